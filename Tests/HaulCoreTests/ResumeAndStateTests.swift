import XCTest
@testable import HaulCore

final class ResumePlanTests: XCTestCase {
    private func plan(_ journal: [Segment], file: Int64, total: Int64?, resumable: Bool = true) -> [Segment] {
        ResumePlan.segments(
            journal: journal, partFileSize: file, total: total, resumable: resumable,
            connections: 4, minSplit: 100)
    }

    func testDecisionTable() {
        let journal = [Segment(start: 0, end: 499, received: 300), Segment(start: 500, end: 999, received: 200)]
        let fresh = [
            Segment(start: 0, end: 249), Segment(start: 250, end: 499), Segment(start: 500, end: 749),
            Segment(start: 750, end: 999),
        ]
        // (journal, part file size, total, resumable) -> segments
        let table: [([Segment], Int64, Int64?, Bool, [Segment])] = [
            // The journal is trusted where the part file holds the bytes.
            (journal, 1000, 1000, true, journal),
            // The part file is shorter than the journal claims: trust the file.
            (
                journal, 600, 1000, true,
                [
                    Segment(start: 0, end: 499, received: 300),
                    Segment(start: 500, end: 999, received: 100),
                ]
            ),
            (journal, 100, 1000, true, [Segment(start: 0, end: 499, received: 100), Segment(start: 500, end: 999)]),
            // Finished: nothing left to fetch, the file is verified as it is.
            (
                [Segment(start: 0, end: 999, received: 1000)], 1000, 1000, true,
                [Segment(start: 0, end: 999, received: 1000)]
            ),
            // Without a journal that covers the remote file (it changed size, or there is none): start over.
            (journal, 1000, 2000, true, SegmentPlanner.initial(total: 2000, connections: 4, minSplit: 100)),
            ([], 0, 1000, true, fresh),
            // A journal claiming more than a segment holds is not trusted.
            ([Segment(start: 0, end: 999, received: 1500)], 1500, 1000, true, fresh),
            // No ranges or no validator: one segment from byte 0, whatever was there.
            (journal, 1000, 1000, false, [Segment(start: 0, end: 999)]),
            // Unknown size: one open segment; an empty file: nothing to fetch.
            (journal, 1000, nil, false, [Segment(start: 0, end: nil)]),
            ([], 0, 0, false, [Segment(start: 0, end: -1)]),
        ]
        for (index, row) in table.enumerated() {
            XCTAssertEqual(plan(row.0, file: row.1, total: row.2, resumable: row.3), row.4, "row \(index)")
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
            (.downloading, .restart, .probing),
            (.probing, .interrupt, .queued),
            (.downloading, .interrupt, .queued),
            (.verifying, .interrupt, .queued),
            (.queued, .finished, .completed),
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
            (.probing, .restart, nil),
            (.paused, .interrupt, nil),
            (.completed, .finished, nil),
        ]
        for (from, event, expected) in table {
            XCTAssertEqual(from.next(after: event), expected, "\(from) --\(event)-->")
        }
    }

    func testEveryStateIsReachableFromQueued() {
        var reached: Set<DownloadState> = [.queued]
        var frontier: [DownloadState] = [.queued]
        while let state = frontier.popLast() {
            for event in DownloadEvent.allCases {
                if let next = state.next(after: event), reached.insert(next).inserted { frontier.append(next) }
            }
        }
        XCTAssertEqual(reached, Set(DownloadState.allCases))
    }

    /// The table printed in DownloadState's doc comment is the table `next(after:)` follows, cell by cell.
    func testThePrintedTableIsTheTableFollowed() throws {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/HaulCore/Model/DownloadState.swift")
        let lines = try String(contentsOf: source, encoding: .utf8).split(separator: "\n").map(String.init)
        let fences = lines.indices.filter { lines[$0].hasPrefix("/// ```") }
        XCTAssertEqual(fences.count, 2)
        let rows = lines[(fences[0] + 1)..<fences[1]].map { $0.dropFirst(4).split(separator: " ").map(String.init) }
        /// The case whose name starts with `text` (less a trailing "."), which must be the only one.
        func resolve<T: RawRepresentable & CaseIterable>(_ text: String, as: T.Type) -> T? where T.RawValue == String {
            let prefix = text.hasSuffix(".") ? String(text.dropLast()) : text
            let matches = T.allCases.filter {
                $0.rawValue.hasPrefix(prefix) && (text.hasSuffix(".") || $0.rawValue == prefix)
            }
            return matches.count == 1 ? matches.first : nil
        }
        let events = try rows[0].map { try XCTUnwrap(resolve($0, as: DownloadEvent.self), $0) }
        XCTAssertEqual(Set(events), Set(DownloadEvent.allCases), "every event has a column")
        var printed: [(DownloadState, DownloadEvent, DownloadState)] = []
        for row in rows.dropFirst() {
            let from = try XCTUnwrap(resolve(row[0], as: DownloadState.self), row[0])
            XCTAssertEqual(row.count, events.count + 1, row.joined(separator: " "))
            for (event, cell) in zip(events, row.dropFirst()) {
                if cell == "-" {
                    XCTAssertNil(from.next(after: event), "\(from) on \(event) is printed impossible")
                } else {
                    let to = try XCTUnwrap(resolve(cell, as: DownloadState.self), cell)
                    XCTAssertEqual(from.next(after: event), to, "\(from) on \(event)")
                    printed.append((from, event, to))
                }
            }
        }
        XCTAssertEqual(
            Set(rows.dropFirst().compactMap { resolve($0[0], as: DownloadState.self) }),
            Set(DownloadState.allCases), "every state has a row")
        XCTAssertEqual(printed.count, DownloadState.transitions.count, "every transition is printed")
    }
}
