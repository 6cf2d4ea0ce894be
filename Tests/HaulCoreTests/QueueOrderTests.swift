import HaulLoop
import HaulTestSupport
import XCTest
@testable import HaulCore

/// Moving waiting downloads in the queue, without an engine: where each move puts a download, the priority it
/// takes, and that the places stored afterwards give the same order when sorted afresh.
final class QueueOrderTests: XCTestCase {
    private func queue(_ priorities: [Int]) -> QueueOrder {
        QueueOrder(
            priorities.enumerated().map { index, priority in
                QueueOrder.Entry(
                    id: "d\(index)", priority: priority, order: Int64(index + 1) * QueueOrder.step,
                    sequence: Int64(index + 1))
            })
    }

    private func ids(_ queue: QueueOrder) -> [String] { queue.entries.map(\.id) }

    func testEachMoveGoesWhereItSays() {
        let cases: [(move: QueueMove, id: String, expected: [String], position: Int)] = [
            (.top, "d3", ["d3", "d0", "d1", "d2", "d4"], 0),
            (.bottom, "d0", ["d1", "d2", "d3", "d4", "d0"], 4),
            (.up, "d2", ["d0", "d2", "d1", "d3", "d4"], 1),
            (.down, "d2", ["d0", "d1", "d3", "d2", "d4"], 3),
            (.up, "d0", ["d0", "d1", "d2", "d3", "d4"], 0),
            (.down, "d4", ["d0", "d1", "d2", "d3", "d4"], 4),
            (.position(2), "d4", ["d0", "d1", "d4", "d2", "d3"], 2),
            (.position(99), "d1", ["d0", "d2", "d3", "d4", "d1"], 4),
        ]
        for (move, id, expected, position) in cases {
            var q = queue([0, 0, 0, 0, 0])
            let result = q.move(id, move)
            XCTAssertEqual(result?.position, position, "\(move) \(id)")
            XCTAssertEqual(ids(q), expected, "\(move) \(id)")
            XCTAssertEqual(ids(QueueOrder(q.entries)), expected, "\(move) \(id): the places sort the same way")
            if expected == ids(queue([0, 0, 0, 0, 0])) {
                XCTAssertEqual(result?.changed, [], "a move that goes nowhere changes nothing")
            } else {
                XCTAssertEqual(result?.changed.map(\.id), [id], "only the moved download changes")
            }
        }
        var q = queue([0, 0])
        XCTAssertNil(q.move("d9", .top), "not waiting")
    }

    func testAMovePastAnotherPriorityTakesItSoTheOrderStaysTrue() {
        // d0 and d1 at 5, d2 and d3 at 0.
        var q = queue([5, 5, 0, 0])
        XCTAssertEqual(q.move("d3", .top)?.changed.map(\.priority), [5], "to the top: the first one's priority")
        XCTAssertEqual(ids(q), ["d3", "d0", "d1", "d2"])
        q = queue([5, 5, 0, 0])
        _ = q.move("d2", .up)
        XCTAssertEqual(ids(q), ["d0", "d2", "d1", "d3"])
        XCTAssertEqual(q.entries[1].priority, 5)
        q = queue([5, 5, 0, 0])
        _ = q.move("d1", .down)
        XCTAssertEqual(ids(q), ["d0", "d2", "d1", "d3"])
        XCTAssertEqual(q.entries[2].priority, 0, "moved below a lower priority: takes it")
        q = queue([5, 5, 0, 0])
        _ = q.move("d0", .bottom)
        XCTAssertEqual(q.entries.last?.priority, 0)
        // Between two priorities it keeps its own when it fits there.
        q = queue([9, 5, 0])
        _ = q.move("d1", .position(0))
        XCTAssertEqual(q.entries[0].priority, 9)
        q = queue([9, 0, 5])
        _ = q.move("d2", .position(1))
        XCTAssertEqual(ids(q), ["d0", "d2", "d1"])
        XCTAssertEqual(q.entries[1].priority, 5, "between 9 and 0, its 5 fits")
    }

    /// Thousands of random moves, many into the same gap (where places run out and a priority is numbered again):
    /// the queue is always what a plain list moved the same way would be, its priorities never rise down the list,
    /// and sorting its entries afresh gives the same order.
    func testRandomMovesAgreeWithAList() {
        var random = SplitMix64(seed: 11)
        var q = queue((0..<40).map { $0 < 10 ? 3 : $0 < 30 ? 0 : -2 })
        var model = ids(q)
        for step in 0..<5_000 {
            let id = model[Int(random.next() % UInt64(model.count))]
            let move: QueueMove =
                switch random.next() % 6 {
                case 0: .top
                case 1: .bottom
                case 2: .up
                case 3: .down
                // The same place again and again: the gap there halves until it is gone.
                case 4: .position(1)
                default: .position(Int(random.next() % 45))
                }
            let from = model.firstIndex(of: id)!
            let target =
                switch move {
                case .top: 0
                case .bottom: model.count - 1
                case .up: max(0, from - 1)
                case .down: min(model.count - 1, from + 1)
                case .position(let n): min(n, model.count - 1)
                }
            model.insert(model.remove(at: from), at: target)
            guard let result = q.move(id, move) else { return XCTFail("step \(step): \(id) not found") }
            XCTAssertEqual(result.position, target, "step \(step)")
            XCTAssertEqual(ids(q), model, "step \(step)")
            XCTAssertEqual(ids(QueueOrder(q.entries)), model, "step \(step): the places sort as the list")
            let priorities = q.entries.map(\.priority)
            XCTAssertEqual(priorities, priorities.sorted(by: >), "step \(step)")
        }
    }

    /// Into the same gap again and again: after twenty halvings no number is left between the two neighbours, and
    /// the downloads of that priority are numbered again, each changed one returned to be stored.
    func testAGapUsedUpIsNumberedAgain() {
        var q = queue(Array(repeating: 0, count: 30))
        var model = ids(q)
        var renumbered: [Int] = []
        for step in 0..<28 {
            let id = model.last!
            model.insert(model.removeLast(), at: 1)
            guard let result = q.move(id, .position(1)) else { return XCTFail("step \(step)") }
            if result.changed.count > 1 { renumbered.append(step) }
            XCTAssertEqual(ids(q), model, "step \(step)")
            XCTAssertEqual(ids(QueueOrder(q.entries)), model, "step \(step)")
            XCTAssertTrue(result.changed.contains { $0.id == id }, "step \(step): the moved one is stored")
        }
        XCTAssertEqual(renumbered, [20], "once the gap's twenty halvings are used up, and not again soon")
    }
}
