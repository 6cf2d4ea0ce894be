import XCTest
@testable import HaulCore

final class ResumePlanTests: XCTestCase {
    func testDecisionTable() {
        let etag = "\"v1\""
        // (journaled, part file size, total, ranges, validator) -> plan
        let table: [(Int64, Int64?, Int64?, Bool, String?, ResumePlan)] = [
            (500, 500, 1000, true, etag, ResumePlan(offset: 500, ifRange: etag)),
            // The part file is shorter than the journal claims: trust the file.
            (500, 300, 1000, true, etag, ResumePlan(offset: 300, ifRange: etag)),
            // Bytes beyond the journal are not vouched for.
            (500, 800, 1000, true, etag, ResumePlan(offset: 500, ifRange: etag)),
            (1000, 1000, 1000, true, etag, ResumePlan(offset: 1000, ifRange: etag)),
            (0, 0, 1000, true, etag, .fromStart),
            (500, nil, 1000, true, etag, .fromStart),
            (500, 500, 1000, false, etag, .fromStart),
            (500, 500, nil, true, etag, .fromStart),
            (500, 500, 1000, true, nil, .fromStart),
            // Journal and file claim more than the remote file has.
            (1500, 1500, 1000, true, etag, .fromStart),
        ]
        for (index, row) in table.enumerated() {
            let plan = ResumePlan.decide(journaled: row.0, partFileSize: row.1, total: row.2, acceptsRanges: row.3,
                                         validator: row.4)
            XCTAssertEqual(plan, row.5, "row \(index)")
        }
    }
}

final class DownloadStateTests: XCTestCase {
    func testTransitionTable() {
        let table: [(DownloadState, DownloadEvent, DownloadState?)] = [
            (.queued, .start, .probing),
            (.probing, .probed, .downloading),
            (.downloading, .transferred, .verifying),
            (.verifying, .verified, .completed),
            (.queued, .pause, .paused),
            (.probing, .pause, .paused),
            (.downloading, .pause, .paused),
            (.paused, .resume, .queued),
            (.failed, .resume, .queued),
            (.probing, .fail, .failed),
            (.downloading, .fail, .failed),
            (.verifying, .fail, .failed),
            // Impossible ones.
            (.completed, .pause, nil),
            (.completed, .resume, nil),
            (.verifying, .pause, nil),
            (.failed, .pause, nil),
            (.paused, .pause, nil),
            (.queued, .resume, nil),
            (.downloading, .resume, nil),
            (.paused, .start, nil),
            (.queued, .fail, nil),
            (.completed, .fail, nil),
        ]
        for (from, event, expected) in table {
            XCTAssertEqual(from.next(after: event), expected, "\(from) --\(event)-->")
        }
    }

    func testEveryStateIsReachableFromQueued() {
        var reached: Set<DownloadState> = [.queued]
        var frontier: [DownloadState] = [.queued]
        let events: [DownloadEvent] = [.start, .probed, .transferred, .verified, .pause, .resume, .fail]
        while let state = frontier.popLast() {
            for event in events {
                if let next = state.next(after: event), reached.insert(next).inserted { frontier.append(next) }
            }
        }
        XCTAssertEqual(reached, Set(DownloadState.allCases))
    }
}
