import Foundation
import HaulLoop
import XCTest

@testable import HaulCore

/// A search page read through the trigram index is the page the walk of every download answers: the same ids from
/// any cursor, for any needle, with texts of every awkward kind (upper case, beyond ASCII, credentials in the URL,
/// a torrent named by its metadata), after renames and removals, packed or not.
final class SearchIndexTests: XCTestCase {
    private func box(
        _ id: String, _ sequence: Int64, url: String, name: String?, kind: DownloadKind = .auto
    )
        -> MachineBox
    {
        var download = Download(
            id: id, sequence: sequence, url: url, headers: [], requestedFilename: name, directory: "",
            state: .paused, connections: 1, priority: 0, maxSpeed: nil, createdAt: Date(timeIntervalSince1970: 0))
        download.kind = kind
        return MachineBox(DownloadMachine(download: download, settings: MachineSettings()))
    }

    /// Every download of the walk's answer, followed page by page from `after` to the end.
    private func pages(_ registry: DownloadRegistry, _ needle: String, limit: Int, after: Int64 = 0) -> [[String]] {
        var cursor = after
        var all: [[String]] = []
        while true {
            let page = registry.page(after: cursor, limit: limit, where: DownloadFilter(search: needle))
            all.append(page.ids)
            guard page.more, let last = page.ids.last else { return all }
            cursor = registry.machines[last]!.machine.download.sequence
        }
    }

    /// What the walk answers: every download that matches, in creation order, with its sequence number.
    private func walked(_ registry: DownloadRegistry, _ needle: String) -> [(sequence: Int64, id: String)] {
        registry.order.filter { entry in !entry.box.isRemoved && entry.box.download.matches(search: needle) }
            .map { ($0.sequence, $0.box.id) }
    }

    /// `matches` cut into pages of `limit` from `after`, as the walk pages them.
    private func paged(_ matches: [(sequence: Int64, id: String)], limit: Int, after: Int64) -> [[String]] {
        let ids = matches.filter { $0.sequence > after }.map(\.id)
        guard !ids.isEmpty else { return [[]] }
        return stride(from: 0, to: ids.count, by: limit).map { Array(ids[$0..<min($0 + limit, ids.count)]) }
    }

    func testIndexedPagesAreTheWalksPagesForAnyNeedleAndCursor() {
        var random = SplitMix64(seed: 47)
        let registry = DownloadRegistry()
        let hosts = ["origin.test", "CDN.Example.org", "files.example"]
        let words = ["Movie", "show", "s01e02", "Linux", "ISO", "7", "tar", "Kelvin"]
        // One download in 200 has a text the index cannot speak for: most blocks have none, so a trigram missing
        // from the index would lose matches (checked: with the URLs left out, pages come back short).
        let opaque = ["user:secret@private.test", "b\u{FC}cher.de", "g\u{E9}n\u{E9}rique", "K\u{212A}elvin"]
        func word() -> String {
            random.next() % 200 == 0
                ? opaque[Int(random.next() % UInt64(opaque.count))] : words[Int(random.next() % UInt64(words.count))]
        }
        var sequence: Int64 = 0
        for index in 0..<2_000 {
            // Gaps between sequence numbers, as removals and other nodes leave them.
            sequence += Int64(1 + random.next() % 3)
            let host = random.next() % 200 == 0 ? opaque[0] : hosts[Int(random.next() % UInt64(hosts.count))]
            let url = "https://\(host)/\(word())/\(index)/\(word()).\(word())"
            let name: String? = random.next() % 3 == 0 ? "\(word()) \(word()) \(index).mkv" : nil
            let kind: DownloadKind = random.next() % 200 == 0 ? .torrent : .auto
            let made = box("d\(index)", sequence, url: url, name: name, kind: kind)
            registry.insert(made, holding: made.machine.download)
        }
        XCTAssertNil(registry.search.blocks(for: "movie"), "not built: the walk answers")
        var slices = 0
        while !registry.indexForSearch(count: 500) { slices += 1 }
        XCTAssertEqual(slices, 3, "2,000 in slices of 500")
        registry.packWaiting()
        XCTAssertGreaterThan(registry.search.postingCount, 0)

        let needles = [
            "movie", "s01", "/7/", "7.", "linux", "iso", "example", "cdn.example", "secret", "user", "private",
            "b\u{FC}cher", "kelvin", "k\u{212A}", "elvin", "nothing-like-it", "ttps://", "mkv", "show show", "e02",
        ]
        for needle in needles {
            let ascii = needle.utf8.count >= 3 && needle.utf8.allSatisfy { $0 < 0x80 }
            XCTAssertEqual(registry.search.blocks(for: needle) != nil, ascii, "q=\(needle) read through the index")
            let matches = walked(registry, needle)
            for limit in [1, 100] {
                for after: Int64 in [0, 777, sequence - 5] {
                    XCTAssertEqual(
                        pages(registry, needle, limit: limit, after: after),
                        paged(matches, limit: limit, after: after),
                        "q=\(needle) limit=\(limit) after \(after)")
                }
            }
        }
        // Short needles and needles beyond ASCII are left to the walk.
        XCTAssertNil(registry.search.blocks(for: "7/"))
        XCTAssertNil(registry.search.blocks(for: "b\u{FC}cher"))
        XCTAssertEqual(registry.search.blocks(for: "nothing-like-it")?.isEmpty, false, "the opaque ones' blocks")
    }

    func testRenamesRemovalsAndAddsAfterTheBuildAreFound() {
        let registry = DownloadRegistry()
        for index in 1...200 {
            let made = box("d\(index)", Int64(index), url: "http://origin.test/f\(index).bin", name: nil)
            registry.insert(made, holding: made.machine.download)
        }
        XCTAssertTrue(registry.indexForSearch(count: 1_000))
        XCTAssertTrue(registry.search.isComplete)
        XCTAssertEqual(registry.page(after: 0, limit: 10, where: DownloadFilter(search: "f150.bin")).ids, ["d150"])

        // Named by its answer: found by its new name, and still by its URL.
        let before = registry.machines["d3"]!.machine.download
        registry.machines["d3"]!.machine.download.filename = "Holiday Pictures.zip"
        registry.changed("d3", from: before)
        XCTAssertEqual(registry.page(after: 0, limit: 10, where: DownloadFilter(search: "holiday pic")).ids, ["d3"])
        XCTAssertEqual(registry.page(after: 0, limit: 10, where: DownloadFilter(search: "/f3.bin")).ids, ["d3"])

        // Removed: gone from the page (its trigrams stay, a block read for nothing).
        registry.remove("d150")
        XCTAssertEqual(registry.page(after: 0, limit: 10, where: DownloadFilter(search: "f150.bin")).ids, [])

        // Added after the build: indexed as it comes, in a block of its own.
        let added = box("late", 5_000, url: "http://elsewhere.test/Late-Arrival.iso", name: nil)
        registry.insert(added, holding: added.machine.download)
        XCTAssertEqual(registry.page(after: 0, limit: 10, where: DownloadFilter(search: "late-arr")).ids, ["late"])
        XCTAssertEqual(registry.search.blocks(for: "late-arr"), [UInt32(5_000 >> SearchIndex.blockShift)])
    }
}
