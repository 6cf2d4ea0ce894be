import FoundationEssentials
import HaulLoop
import XCTest

@testable import HaulCore

/// What of a file is on disk, as readers of an unfinished download see it: each segment's received bytes, merged.
final class AvailableRangesTests: XCTestCase {
    private func download(
        _ segments: [Segment], state: DownloadState = .downloading, total: Int64? = 1000
    )
        -> Download
    {
        var download = Download(
            id: "d", sequence: 1, url: "http://origin/f", headers: [], requestedFilename: nil, directory: "",
            state: state, connections: 4, priority: 0, maxSpeed: nil, createdAt: Date(timeIntervalSince1970: 0))
        download.segments = segments
        download.totalBytes = total
        return download
    }

    func testSegmentsMergeIntoTheRangesOnDisk() {
        let cases: [(segments: [Segment], ranges: [ByteRange], contiguous: Int64)] = [
            ([], [], 0),
            ([Segment(start: 0, end: 999, received: 0)], [], 0),
            ([Segment(start: 0, end: 999, received: 10)], [ByteRange(0, 9)], 10),
            // A segment done and the next begun: one range.
            (
                [Segment(start: 0, end: 499, received: 500), Segment(start: 500, end: 999, received: 20)],
                [ByteRange(0, 519)], 520
            ),
            // Out of order, with a gap; nothing from 0.
            (
                [Segment(start: 600, end: 999, received: 100), Segment(start: 100, end: 599, received: 50)],
                [ByteRange(100, 149), ByteRange(600, 699)], 0
            ),
            // A split: the stolen half begun at its start, the first still short of it.
            (
                [Segment(start: 0, end: 799, received: 300), Segment(start: 800, end: 999, received: 200)],
                [ByteRange(0, 299), ByteRange(800, 999)], 300
            ),
        ]
        for (segments, ranges, contiguous) in cases {
            let d = download(segments)
            XCTAssertEqual(d.available, ranges, "\(segments)")
            XCTAssertEqual(d.contiguousBytes, contiguous, "\(segments)")
        }
    }

    func testACompletedDownloadHasItsWholeFile() {
        XCTAssertEqual(download([], state: .completed, total: 1000).available, [ByteRange(0, 999)])
        XCTAssertEqual(download([], state: .completed, total: 0).available, [])
    }

    func testReadableFromAnOffsetStopsAtTheFirstGap() {
        let ranges = [ByteRange(0, 99), ByteRange(200, 299)]
        XCTAssertEqual(ranges.readable(from: 0), 99)
        XCTAssertEqual(ranges.readable(from: 99), 99)
        XCTAssertNil(ranges.readable(from: 100))
        XCTAssertEqual(ranges.readable(from: 250), 299)
        XCTAssertNil(ranges.readable(from: 300))
    }

    /// A reader asking past every connection gets a connection there: the segment is split at the byte asked, and
    /// with every connection busy, the one on the largest range left moves to it.
    func testAWantedByteIsFetchedNext() {
        let mb: Int64 = 1_000_000
        var machine = DownloadMachine(download: download([], total: 100 * mb), settings: MachineSettings())
        machine.download.acceptsRanges = true
        machine.download.etag = "\"v1\""
        machine.phase = .transferring
        machine.download.segments = [
            Segment(start: 0, end: 50 * mb - 1, received: mb), Segment(start: 50 * mb, end: 100 * mb - 1),
        ]
        machine.plannedConnections = 2
        machine.connections = [
            .init(segment: 0, state: .fetching(TransferID(1))), .init(segment: 1, state: .fetching(TransferID(2))),
        ]
        let actions = machine.handle(.wanted(90 * mb), at: 10)
        XCTAssertEqual(machine.download.segments.last, Segment(start: 90 * mb, end: 100 * mb - 1))
        XCTAssertEqual(machine.download.segments[1].end, 90 * mb - 1)
        XCTAssertEqual(machine.connections.count, 2)
        XCTAssertEqual(machine.connections.last?.segment, 2, "a connection moved to the asked byte")
        XCTAssertTrue(
            actions.contains(.cancel(TransferID(2))) || actions.contains(.cancel(TransferID(1))), "\(actions)")
        // On disk already, or where a connection is about to be: nothing moves.
        let before = machine.connections.map(\.segment)
        _ = machine.handle(.wanted(50), at: 10)
        _ = machine.handle(.wanted(90 * mb + 1000), at: 10)
        XCTAssertEqual(machine.connections.map(\.segment), before)
        XCTAssertEqual(machine.download.segments.count, 3)
    }

    /// The first plan of a download by its piece order: spread, in order, or first and last first.
    func testTheOrderOfPiecesShapesTheFirstPlan() {
        let mb: Int64 = 1 << 20
        XCTAssertEqual(
            SegmentPlanner.initial(total: 8 * mb, connections: 2, minSplit: mb, order: .spread).map(\.start),
            [0, 4 * mb])
        XCTAssertEqual(
            SegmentPlanner.initial(total: 4 * mb + 1, connections: 2, minSplit: mb, order: .sequential).map(\.start),
            [0, mb, 2 * mb, 3 * mb, 4 * mb])
        let firstLast = SegmentPlanner.initial(total: 8 * mb, connections: 3, minSplit: mb, order: .firstLast)
        XCTAssertEqual(firstLast.map(\.start), [0, 3_670_016, 7 * mb])
        XCTAssertEqual(firstLast.last?.end, 8 * mb - 1)
        // Too small to split, or one connection: as spread.
        XCTAssertEqual(SegmentPlanner.initial(total: 100, connections: 1, minSplit: mb, order: .firstLast).count, 1)
    }
}
