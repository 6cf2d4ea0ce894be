import Foundation
import HaulLoop
import XCTest
@testable import HaulCore

/// The registry is the one place a download is inserted, replaced or removed: its order, counts, bytes,
/// destinations and run queue follow every change without a caller writing the bookkeeping out.
final class DownloadRegistryTests: XCTestCase {
    private func box(
        _ id: String, _ sequence: Int64, _ state: DownloadState, priority: Int = 0,
        received: Int64 = 0, url: String? = nil
    ) -> MachineBox {
        var download = Download(
            id: id, sequence: sequence, url: url ?? "http://origin.test/\(id)", headers: [],
            requestedFilename: nil, directory: "", state: state, connections: 1,
            priority: priority, maxSpeed: nil, createdAt: Date(timeIntervalSince1970: 0))
        if received > 0 { download.segments = [Segment(start: 0, end: nil, received: received)] }
        return MachineBox(DownloadMachine(download: download, settings: MachineSettings()))
    }

    func testEveryIndexFollowsInsertReplaceAndRemove() {
        let registry = DownloadRegistry()
        // Loaded in any order, sorted once.
        for (id, sequence, state, received) in [
            ("c", Int64(3), DownloadState.queued, Int64(0)),
            ("a", 1, .completed, 100), ("b", 2, .paused, 40),
        ] {
            let made = box(id, sequence, state, received: received)
            registry.insert(made, holding: made.machine.download)
        }
        registry.finishLoading()
        XCTAssertEqual(registry.order.map(\.box.machine.download.id), ["a", "b", "c"])
        XCTAssertEqual(registry.stateCounts, [.queued: 1, .completed: 1, .paused: 1])
        XCTAssertEqual(registry.receivedTotal, 140)
        XCTAssertEqual(registry.download(fetching: "http://origin.test/b", into: "", as: nil), "b")
        XCTAssertNil(registry.download(fetching: "http://origin.test/a", into: "", as: nil), "a finished one")

        // Another node resumed b and fetched more of it.
        registry.replace(with: box("b", 2, .queued, priority: 5, received: 60))
        XCTAssertEqual(registry.stateCounts, [.queued: 2, .completed: 1, .paused: 0])
        XCTAssertEqual(registry.receivedTotal, 160)
        XCTAssertEqual(registry.runQueue.popFirst { _ in true }?.id, "b", "queued at priority 5: first")

        XCTAssertEqual(registry.remove("a")?.id, "a")
        XCTAssertNil(registry.remove("a"))
        XCTAssertEqual(registry.receivedTotal, 60)
        XCTAssertEqual(registry.count, 2)
        XCTAssertEqual(registry.stateCounts[.completed], 0)
        // A removed one stays in the order until enough are gone to sweep them; readers pass over it.
        XCTAssertEqual(registry.order.filter { !$0.box.isRemoved }.map(\.box.machine.download.id), ["b", "c"])
        XCTAssertEqual(registry.firstIndex(after: 2), registry.order.firstIndex { $0.box.machine.download.id == "c" })
        // The replaced b's entry holds its new box; pages read it, and a removed one read again takes its place.
        XCTAssertEqual(registry.order.first { $0.sequence == 2 }?.box.machine.download.priority, 5)
        XCTAssertEqual(registry.page(after: 0, limit: 10).ids, ["b", "c"])
        let again = box("a", 1, .completed, received: 100)
        registry.insert(again, holding: again.machine.download)
        XCTAssertEqual(registry.order.count, 3, "the entry of a is taken again, not added")
        XCTAssertEqual(registry.page(after: 0, limit: 10).ids, ["a", "b", "c"])
        XCTAssertEqual(registry.ids(where: DownloadFilter(states: [.completed, .paused, .failed])), ["a"])
    }

    func testRemovedEntriesAreSweptOnceTheyAreHalfTheOrder() {
        let registry = DownloadRegistry()
        for n in 1...600 {
            let made = box("d\(n)", Int64(n), .paused)
            registry.insert(made, holding: made.machine.download)
        }
        for n in 1...300 { registry.remove("d\(n * 2)") }
        XCTAssertEqual(registry.order.count, 600, "kept in place until they are more than half of it")
        registry.remove("d1")
        XCTAssertEqual(registry.order.count, 299, "swept")
        XCTAssertFalse(registry.order.contains { $0.box.isRemoved })
        let odd = (1..<300).map { "d\($0 * 2 + 1)" }
        XCTAssertEqual(registry.page(after: 0, limit: 1_000).ids, odd)
        XCTAssertEqual(registry.page(after: 100, limit: 3).ids, ["d101", "d103", "d105"])
        XCTAssertTrue(registry.page(after: 100, limit: 3).more)
    }

    /// A destination answers the unfinished download that holds it; a download whose URL changed under its entry
    /// (a change that moved no index) answers for it no more, and another of that destination is found after all.
    func testDestinationsAnswerOnlyTheDownloadThatFetchesThere() {
        let registry = DownloadRegistry()
        let url = "http://origin.test/same.bin"
        for made in [box("a", 1, .paused, url: url), box("b", 2, .paused, url: url)] {
            registry.insert(made, holding: made.machine.download)
        }
        XCTAssertEqual(registry.download(fetching: url, into: "", as: nil), "a", "the first of the two")
        XCTAssertNil(registry.download(fetching: url, into: "", as: "other.bin"))
        XCTAssertNil(registry.download(fetching: url, into: "sub", as: nil))

        let moved = "http://origin.test/moved.bin"
        let c = box("c", 3, .paused, url: "http://origin.test/c.bin")
        registry.insert(c, holding: c.machine.download)
        let before = c.machine.download
        c.machine.download.url = moved
        registry.changed("c", from: before)
        XCTAssertNil(registry.download(fetching: "http://origin.test/c.bin", into: "", as: nil), "c fetches elsewhere")
        let d = box("d", 4, .paused, url: "http://origin.test/c.bin")
        registry.insert(d, holding: d.machine.download)
        XCTAssertEqual(registry.download(fetching: "http://origin.test/c.bin", into: "", as: nil), "d")
        registry.remove("d")
        XCTAssertNil(registry.download(fetching: "http://origin.test/c.bin", into: "", as: nil))
        registry.remove("a")
        XCTAssertNil(registry.download(fetching: url, into: "", as: nil), "a is gone")
    }

    /// An id prefix of two characters or more is answered from the index, which follows inserts and removals;
    /// a shorter one is left to a walk (nil).
    func testTheIDPrefixIndexFollowsInsertAndRemove() {
        let registry = DownloadRegistry()
        for (id, sequence) in [("ab1", Int64(1)), ("ab2", 2), ("ac3", 3), ("b4", 4)] {
            let made = box(id, sequence, .paused)
            registry.insert(made, holding: made.machine.download)
        }
        XCTAssertEqual(registry.ids(prefixed: "ab"), ["ab1", "ab2"])
        XCTAssertEqual(registry.ids(prefixed: "ab2"), ["ab2"])
        XCTAssertEqual(registry.ids(prefixed: "ac3x"), [])
        XCTAssertEqual(registry.ids(prefixed: "zz"), [])
        XCTAssertNil(registry.ids(prefixed: "a"), "one character: a walk")
        registry.remove("ab1")
        XCTAssertEqual(registry.ids(prefixed: "ab"), ["ab2"])
        registry.remove("ab2")
        XCTAssertEqual(registry.ids(prefixed: "ab"), [])
        // Another node's copy of one known here changes nothing.
        registry.replace(with: box("ac3", 3, .queued))
        XCTAssertEqual(registry.ids(prefixed: "ac"), ["ac3"])
    }
}
