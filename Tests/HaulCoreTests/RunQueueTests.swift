import Foundation
import HaulLoop
import HaulTestSupport
import XCTest
@testable import HaulCore

/// The queue of downloads waiting for a slot, without an engine: its order, its stale entries, and the work a step
/// costs with 100 or 100,000 queued.
final class RunQueueTests: XCTestCase {
    /// An entry in creation order unless `order` places it elsewhere.
    private func entry(_ sequence: Int, priority: Int, order: Int64? = nil) -> RunQueue.Entry {
        RunQueue.Entry(
            priority: priority, order: order ?? Int64(sequence), sequence: Int64(sequence),
            id: "d\(sequence)")
    }

    func testEntriesComeOutByPriorityThenPlaceThenAge() {
        var queue = RunQueue()
        var random = SplitMix64(seed: 42)
        var expected: [RunQueue.Entry] = []
        for sequence in 0..<2_000 {
            // One in ten moved by a client: a place of its own, sometimes the same as another's.
            let moved = random.next() % 10 == 0 ? Int64(random.next() % 2_000) : nil
            let entry = entry(sequence, priority: Int(random.next() % 5) - 2, order: moved)
            queue.push(entry)
            expected.append(entry)
        }
        expected.sort { a, b in
            (-a.priority, a.order, a.sequence) < (-b.priority, b.order, b.sequence)
        }
        var taken: [RunQueue.Entry] = []
        while let next = queue.popFirst(where: { _ in true }) { taken.append(next) }
        XCTAssertEqual(taken, expected)
    }

    func testEntriesThatNoLongerStandArePassedOverAndCompactedAway() {
        var queue = RunQueue()
        for sequence in 0..<1_000 { queue.push(entry(sequence, priority: 0)) }
        // Every even one paused, and d999 raised: pushed again at the new priority, its old entry stale.
        var priorities = [String: Int]()
        for sequence in 0..<1_000 { priorities["d\(sequence)"] = sequence % 2 == 0 ? nil : 0 }
        priorities["d999"] = 9
        queue.push(entry(999, priority: 9))
        let stands = { (entry: RunQueue.Entry) in priorities[entry.id] == entry.priority }
        XCTAssertEqual(queue.popFirst(where: stands)?.id, "d999", "raised to the front")
        priorities["d999"] = nil
        XCTAssertEqual(queue.popFirst(where: stands)?.id, "d1", "d0 is paused")
        priorities["d1"] = nil
        XCTAssertEqual(queue.dropped, 1)
        queue.compact(live: priorities.count, where: stands)
        XCTAssertEqual(queue.count, 498, "only what stands is kept")
        var order: [String] = []
        while let next = queue.popFirst(where: stands) { order.append(next.id) }
        XCTAssertEqual(order, stride(from: 3, to: 999, by: 2).map { "d\($0)" })
    }

    func testAStepCostsTheSameWorkWith100Or100000Queued() {
        // The work of adding one download and starting the next, in comparisons, with the queue at 100 and at
        // 100,000: a sorted walk of every queued download per step would cost 1,000 times more at the larger.
        func workPerStep(queued: Int) -> Double {
            var queue = RunQueue()
            var random = SplitMix64(seed: 7)
            for sequence in 0..<queued {
                queue.push(entry(sequence, priority: Int(random.next() % 3)))
            }
            let before = queue.comparisons
            let steps = 1_000
            for step in 0..<steps {
                queue.push(entry(queued + step, priority: Int(random.next() % 3)))
                _ = queue.popFirst { _ in true }
            }
            return Double(queue.comparisons - before) / Double(steps)
        }
        let small = workPerStep(queued: 100)
        let large = workPerStep(queued: 100_000)
        // log2(100,000) is 17: one push and one pop take at most about 3 comparisons per level.
        XCTAssertLessThan(large, 3 * 17 + 3)
        XCTAssertLessThan(large / small, 4, "work per step: \(small) with 100 queued, \(large) with 100,000")
    }
}

/// The engine's scheduling over the run queue: a slot goes to the highest priority, then the oldest, as priorities
/// change and downloads are paused, resumed and removed.
final class SchedulingTests: XCTestCase {
    func testAFreeSlotGoesToTheFirstQueuedDownloadAsTheQueueChanges() throws {
        let engine = try makeEngine(fetcher: SilentFetcher(), clock: ManualClock()) { $0.maxActive = 1 }
        var ids: [String: String] = [:]
        for name in ["a", "b", "c", "d", "e"] {
            ids[name] = try engine.add(NewDownload(url: "http://origin.test/\(name)")).snapshot.download.id
        }
        func running() -> String? {
            let id = engine.runningIDs.first
            return ids.first { $0.value == id }?.key
        }
        XCTAssertEqual(running(), "a")
        _ = try engine.update(ids["d"]!, DownloadChanges(priority: 5))
        _ = try engine.update(ids["b"]!, DownloadChanges(state: .paused))
        _ = try engine.update(ids["e"]!, DownloadChanges(priority: 5))
        _ = try engine.update(ids["e"]!, DownloadChanges(priority: -1))
        try engine.remove(ids["a"]!, deleteFile: false)
        XCTAssertEqual(running(), "d", "raised above the others")
        try engine.remove(ids["d"]!, deleteFile: false)
        XCTAssertEqual(running(), "c", "b is paused, e lowered below c")
        _ = try engine.update(ids["b"]!, DownloadChanges(state: .queued))
        try engine.remove(ids["c"]!, deleteFile: false)
        XCTAssertEqual(running(), "b", "resumed, and older than e")
        try engine.remove(ids["b"]!, deleteFile: false)
        XCTAssertEqual(running(), "e")
        try engine.remove(ids["e"]!, deleteFile: false)
        XCTAssertNil(running())
    }
}
