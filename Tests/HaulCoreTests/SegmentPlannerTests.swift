import XCTest
@testable import HaulCore

final class SegmentPlannerTests: XCTestCase {
    private let mib: Int64 = 1 << 20

    func testInitialSplitTable() {
        // (total, connections, minSplit) -> ranges
        let table: [(Int64, Int, Int64, [ClosedRange<Int64>])] = [
            (100, 8, 1000, [0...99]),
            (10, 4, 1, [0...1, 2...3, 4...5, 6...9]),
            (128 * mib, 8, 4 * mib, (0..<8).map { Int64($0) * 16 * mib...(Int64($0) + 1) * 16 * mib - 1 }),
            (10 * mib, 8, 4 * mib, [0...(5 * mib - 1), (5 * mib)...(10 * mib - 1)]),
            (1, 32, 1, [0...0]),
        ]
        for (total, connections, minSplit, expected) in table {
            let segments = SegmentPlanner.initial(total: total, connections: connections, minSplit: minSplit)
            XCTAssertEqual(segments.map { $0.start...$0.end! }, expected, "\(total) / \(connections)")
            XCTAssertTrue(segments.allSatisfy { $0.received == 0 })
        }
        XCTAssertEqual(SegmentPlanner.initial(total: 0, connections: 8, minSplit: 1), [Segment(start: 0, end: nil)])
    }

    func testAFreeConnectionTakesAnIdleSegmentFirst() {
        var segments = [
            Segment(start: 0, end: 99, received: 100), Segment(start: 100, end: 199, received: 10),
            Segment(start: 200, end: 299),
        ]
        XCTAssertEqual(SegmentPlanner.nextWork(&segments, busy: [2], minSplit: 1), 1)
        XCTAssertEqual(segments.count, 3, "nothing split while idle work exists")
    }

    func testStealingSplitsTheLargestRemainingRangeInHalf() {
        var segments = [
            Segment(start: 0, end: 999, received: 900), Segment(start: 1000, end: 1999, received: 200),
            Segment(start: 2000, end: 2999, received: 1000),
        ]
        let taken = SegmentPlanner.nextWork(&segments, busy: [0, 1], minSplit: 100)
        XCTAssertEqual(taken, 3)
        // Segment 1 had 1200...1999 left (800 bytes): it keeps 1200...1599, the new one takes 1600...1999.
        XCTAssertEqual(segments[1], Segment(start: 1000, end: 1599, received: 200))
        XCTAssertEqual(segments[3], Segment(start: 1600, end: 1999, received: 0))
        // Coverage stays exact: every byte belongs to exactly one segment.
        let covered = segments.map { $0.start...$0.end! }.sorted { $0.lowerBound < $1.lowerBound }
        XCTAssertEqual(covered.first?.lowerBound, 0)
        XCTAssertEqual(covered.last?.upperBound, 2999)
        for (a, b) in zip(covered, covered.dropFirst()) { XCTAssertEqual(a.upperBound + 1, b.lowerBound) }
    }

    func testNoStealingBelowTheMinimumSplit() {
        var segments = [Segment(start: 0, end: 999, received: 800)]
        XCTAssertNil(SegmentPlanner.nextWork(&segments, busy: [0], minSplit: 101))
        XCTAssertEqual(SegmentPlanner.nextWork(&segments, busy: [0], minSplit: 100), 1)
        XCTAssertEqual(segments, [Segment(start: 0, end: 899, received: 800), Segment(start: 900, end: 999)])
        var unknown = [Segment(start: 0, end: nil, received: 10)]
        XCTAssertNil(SegmentPlanner.nextWork(&unknown, busy: [0], minSplit: 1), "no end, nothing to split")
        var finished = [Segment(start: 0, end: 9, received: 10)]
        XCTAssertNil(SegmentPlanner.nextWork(&finished, busy: [], minSplit: 1))
    }

    func testASlowConnectionKeepsOnlyWhatItCanFetchWhileTheFreeOneFetchesTheRest() {
        // Segment 0 runs at 1 byte/s, segments 1 and 2 at 8: the free connection counts as 8 (the median).
        var segments = [
            Segment(start: 0, end: 999, received: 100), Segment(start: 1000, end: 1999, received: 900),
            Segment(start: 2000, end: 2999, received: 1000),
        ]
        let taken = SegmentPlanner.nextWork(&segments, busy: [(0, 1), (1, 8), (2, 8)], minSplit: 10)
        XCTAssertEqual(taken, 3)
        // 900 bytes left at 1 byte/s against 100 at 8: segment 0 is the victim although segment 1 is as long. It
        // keeps a ninth of its rest (100 bytes), the new segment takes the 800 after.
        XCTAssertEqual(segments[0], Segment(start: 0, end: 199, received: 100))
        XCTAssertEqual(segments[3], Segment(start: 200, end: 999))
    }

    func testAStalledConnectionKeepsASliverAndUnmeasuredOnesCountAsTypical() {
        var stalled = [Segment(start: 0, end: 6499, received: 0), Segment(start: 6500, end: 6999, received: 100)]
        XCTAssertEqual(SegmentPlanner.nextWork(&stalled, busy: [(0, 0), (1, 50)], minSplit: 1), 2)
        // Nothing received counts as 1/64 of the typical rate: it keeps 1/65 of its range.
        XCTAssertEqual(stalled[0].end, 99)
        XCTAssertEqual(stalled[2], Segment(start: 100, end: 6499))
        // Without measurements every connection is typical: halves, as between equals.
        var fresh = [Segment(start: 0, end: 999), Segment(start: 1000, end: 1999, received: 999)]
        XCTAssertEqual(SegmentPlanner.nextWork(&fresh, busy: [(0, nil), (1, nil)], minSplit: 1), 2)
        XCTAssertEqual(fresh[0].end, 499)
        // A victim whose share would fall below the minimum is passed over for the next one.
        var short = [Segment(start: 0, end: 99, received: 40), Segment(start: 100, end: 999, received: 0)]
        XCTAssertEqual(SegmentPlanner.nextWork(&short, busy: [(0, 1), (1, 100)], minSplit: 100), 2)
        XCTAssertEqual(short[0].end, 99, "60 bytes at 1 byte/s take longest, but 59 are under the minimum")
        XCTAssertEqual(short[1].end, 549)
    }

    func testALoneSlowConnectionIsMeasuredAgainstTheOnesThatFinished() {
        // Only the slow connection is left; alone it would be its own typical rate and look fine.
        var alone = [Segment(start: 0, end: 899, received: 900), Segment(start: 900, end: 99_999, received: 99)]
        XCTAssertNil(SegmentPlanner.nextWork(&alone, busy: [(1, 1000)], minSplit: 1 << 20))
        // The connections that finished ran at 8,000 bytes/s: it keeps a ninth of its rest.
        XCTAssertEqual(SegmentPlanner.nextWork(&alone, busy: [(1, 1000)], recent: [8000, 8000], minSplit: 1 << 20), 2)
        XCTAssertEqual(alone[1].end, 11_999)
        XCTAssertEqual(alone[2], Segment(start: 12_000, end: 99_999))
    }

    func testTheJournalNeverClaimsMoreThanWasSynced() {
        let synced = [Segment(start: 0, end: 999, received: 500), Segment(start: 1000, end: 1999, received: 300)]
        // Since the sync began: more bytes arrived, segment 1 was split, and segment 0 went back (restart).
        let live = [
            Segment(start: 0, end: 999, received: 200), Segment(start: 1000, end: 1599, received: 450),
            Segment(start: 1600, end: 1999, received: 50),
        ]
        XCTAssertEqual(
            SegmentPlanner.journal(synced: synced, live: live),
            [
                Segment(start: 0, end: 999, received: 200),
                Segment(start: 1000, end: 1599, received: 300),
                Segment(start: 1600, end: 1999, received: 0),
            ])
    }
}
