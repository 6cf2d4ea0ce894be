import HaulLoop
import XCTest

/// The producer's thread and the caller's: order kept, memory bounded, and either side's error stops both.
final class OverlapTests: XCTestCase {
    private struct Failure: Error, Equatable { let at: Int }

    func testItemsArriveInOrderWithAtMostDepthBatchesWaiting() throws {
        let produced = Counter()
        var seen: [Int] = []
        var mostAhead = 0
        try Overlap.run(
            batch: 7, depth: 2,
            produce: { yield in
                for n in 0..<10_000 {
                    produced.set(n + 1)
                    try yield(n)
                }
            },
            consume: { (n: Int) in
                seen.append(n)
                mostAhead = max(mostAhead, produced.value - seen.count)
            })
        XCTAssertEqual(seen, Array(0..<10_000))
        // Waiting: two batches; yielded but not handed over: up to one more, and the one being consumed.
        XCTAssertLessThanOrEqual(mostAhead, 4 * 7)
    }

    func testTheConsumersErrorStopsTheProducer() {
        let produced = Counter()
        var seen = 0
        XCTAssertThrowsError(
            try Overlap.run(
                batch: 10, depth: 2,
                produce: { yield in
                    for n in 0..<1_000_000 {
                        produced.set(n + 1)
                        try yield(n)
                    }
                },
                consume: { (n: Int) in
                    seen += 1
                    if n == 500 { throw Failure(at: n) }
                })
        ) { error in XCTAssertEqual(error as? Failure, Failure(at: 500)) }
        XCTAssertEqual(seen, 501)
        XCTAssertLessThan(produced.value, 1_000, "the producer should stop within a few batches")
    }

    func testTheProducersErrorComesAfterWhatItYieldedBefore() {
        var seen: [Int] = []
        XCTAssertThrowsError(
            try Overlap.run(
                batch: 16, depth: 3,
                produce: { yield in
                    for n in 0..<123 { try yield(n) }
                    throw Failure(at: 123)
                },
                consume: { (n: Int) in seen.append(n) })
        ) { error in XCTAssertEqual(error as? Failure, Failure(at: 123)) }
        XCTAssertEqual(seen, Array(0..<123))
    }

    /// A number both threads read and one writes.
    private final class Counter: @unchecked Sendable {
        private let lock = Lock()
        private var count = 0
        var value: Int { lock.withLock { count } }
        func set(_ value: Int) { lock.withLock { count = value } }
    }
}
