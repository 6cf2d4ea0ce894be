import Foundation
import HaulCore
import HaulLoop
import XCTest

/// The download machine driven by a scripted origin and a manual clock (`MachineHarness`): no sockets, no files, no
/// sleeps. Each test checks what a user would see in the end (the state, the error code, the part file's bytes) and
/// the requests the origin got.
final class DownloadMachineTests: XCTestCase {
    private func completed(_ harness: MachineHarness, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(
            harness.state, .completed, "error: \(harness.download.error?.message ?? "none")",
            file: file, line: line)
        XCTAssertTrue(harness.partIsTheFile, "the part file differs from the origin's", file: file, line: line)
        XCTAssertTrue(harness.finished, "the slot was not given back", file: file, line: line)
        XCTAssertEqual(harness.download.journal, harness.download.segments, file: file, line: line)
    }

    // MARK: probe outcomes

    func testTheFirstRequestBecomesTheFirstSegmentAndTheOthersStartFromTheRest() {
        let harness = MachineHarness(size: 64 * 1024, connections: 4)
        harness.start()
        completed(harness)
        // One GET from byte 0 whose headers settle the plan; it goes on as the first quarter, three ranges start
        // beside it (more follow, stealing work), and byte 0 is never asked for again.
        XCTAssertEqual(
            Array(harness.fetches.prefix(4)),
            [
                .probe, .range(start: 16384, end: 32767, ifRange: "\"v1\""),
                .range(start: 32768, end: 49151, ifRange: "\"v1\""), .range(start: 49152, end: nil, ifRange: "\"v1\""),
            ])
        XCTAssertFalse(harness.rangeFetches.contains { $0.start == 0 })
        XCTAssertEqual(harness.download.totalBytes, 64 * 1024)
        XCTAssertTrue(harness.download.resumable)
    }

    func testAMirrorThatAgreesTakesSegmentsAndCountsItsBytes() {
        let harness = MachineHarness(size: 256 * 1024, connections: 4) { $0.mirrors = [Mirror(url: "http://m.test/f")] }
        harness.start()
        completed(harness)
        let mirror = harness.download.mirrors[0]
        XCTAssertEqual(mirror.state, .active)
        XCTAssertEqual(mirror.etag, "\"v1\"")
        // Its HEAD first, its first bytes compared with the first source's, then ranges with its own validator.
        XCTAssertEqual(harness.mirrorRequests.first?.kind, .head)
        XCTAssertEqual(
            harness.mirrorRequests.dropFirst().first?.kind, .compare(start: 0, end: 65535, ifRange: "\"v1\""))
        let ranges = harness.mirrorRequests.dropFirst(2)
        XCTAssertFalse(ranges.isEmpty, "the mirror was given segments")
        XCTAssertTrue(ranges.allSatisfy { $0.url == "http://m.test/f" })
        XCTAssertTrue(ranges.allSatisfy { if case .range(_, _, "\"v1\"") = $0.kind { true } else { false } })
        XCTAssertGreaterThan(mirror.receivedBytes, 0)
        XCTAssertLessThan(mirror.receivedBytes, 256 * 1024, "the first source wrote its share too")
    }

    /// The same size is not the same file: a mirror's first bytes are compared with the first source's before any
    /// of its segments count, and one that differs never writes a byte.
    func testAMirrorOfTheSameSizeWithOtherBytesIsDroppedBeforeItWritesAnything() {
        let harness = MachineHarness(size: 256 * 1024, connections: 4) { $0.mirrors = [Mirror(url: "http://m.test/f")] }
        var other = harness.content
        other[1000] ^= 0xFF
        harness.mirrorContent = other
        harness.start()
        completed(harness)
        let mirror = harness.download.mirrors[0]
        XCTAssertEqual(mirror.state, .dropped)
        XCTAssertTrue(
            mirror.reason?.contains("differ") == true && mirror.reason?.contains("byte 1000") == true,
            mirror.reason ?? "")
        XCTAssertEqual(mirror.receivedBytes, 0, "none of its bytes was written")
        XCTAssertEqual(harness.mirrorRequests.map(\.kind), [.head, .compare(start: 0, end: 65535, ifRange: "\"v1\"")])
    }

    /// A mirror whose first bytes agree and whose later ones do not: with a checksum, the mismatch is no failure.
    /// The ranges the mirror wrote are fetched again from the first source, and the file is right.
    func testAChecksumMismatchFetchesAMirrorsRangesAgainFromTheFirstSource() {
        let size = 256 * 1024
        var harness = MachineHarness(size: size, connections: 4)
        let expected = Digest.hex(Digest.sha256(harness.content))
        harness = MachineHarness(size: size, connections: 4) {
            $0.mirrors = [Mirror(url: "http://m.test/f")]
            $0.checksum = "sha256:" + expected
        }
        var other = harness.content
        for index in stride(from: 100_000, to: size, by: 1000) { other[index] ^= 0xFF }
        harness.mirrorContent = other
        harness.start()
        XCTAssertEqual(
            harness.state, .queued, "back in the queue, not failed: \(harness.download.error?.message ?? "")")
        let mirror = harness.download.mirrors[0]
        XCTAssertEqual(mirror.state, .dropped)
        XCTAssertTrue(mirror.reason?.contains("check") == true, mirror.reason ?? "")
        XCTAssertGreaterThan(mirror.receivedBytes, 0)
        let doubtful = harness.download.segments.filter { $0.received == 0 }
        XCTAssertFalse(doubtful.isEmpty)
        XCTAssertEqual(harness.download.journal, harness.download.segments)
        // Its slot again: the ranges come from the first source only, and the checksum passes.
        let before = harness.mirrorRequests.count
        harness.start()
        completed(harness)
        XCTAssertEqual(harness.mirrorRequests.count, before, "nothing more from the mirror")
    }

    func testASmallFileCostsOneRequest() {
        let harness = MachineHarness(size: 3000, connections: 4)
        harness.start()
        completed(harness)
        XCTAssertEqual(harness.fetches, [.probe])
    }

    func testAServerThatIgnoresRangeOnTheFirstRequestIsFetchedOnceOnOneConnection() {
        let harness = MachineHarness(size: 64 * 1024, connections: 4)
        harness.ranges = false
        harness.start()
        completed(harness)
        XCTAssertEqual(harness.fetches, [.probe], "the whole file once, never twice")
        XCTAssertFalse(harness.download.resumable)
    }

    func testFirstResponseOutcomes() {
        struct Case {
            let name: String
            let first: MachineHarness.Reply
            let state: DownloadState
            let error: String?
            let resumable: Bool?
            let requests: Int?
        }
        let size = 20_000
        let body = MachineHarness(size: size).content
        let cases: [Case] = [
            Case(
                name: "Range ignored, no Accept-Ranges",
                first: .init(status: 200, headers: [("Content-Length", String(size)), ("ETag", "\"v1\"")], body: body),
                state: .completed, error: nil, resumable: false, requests: 1),
            Case(
                name: "200 that says it serves ranges",
                first: .init(
                    status: 200,
                    headers: [
                        ("Content-Length", String(size)), ("Accept-Ranges", "bytes"),
                        ("ETag", "\"v1\""),
                    ], body: body),
                state: .completed, error: nil, resumable: true, requests: nil),
            // No size: HEAD tells it (the first body is stopped at its headers), and the body comes again.
            Case(
                name: "chunked, no length", first: .init(status: 200, body: body), state: .completed, error: nil,
                resumable: false, requests: 3),
            Case(
                name: "404", first: .init(status: 404), state: .failed, error: "http_404", resumable: nil,
                requests: 1),
            Case(
                name: "410", first: .init(status: 410), state: .failed, error: "http_410", resumable: nil,
                requests: 1),
            Case(
                name: "304 to a GET", first: .init(status: 304), state: .failed, error: "http_304", resumable: nil,
                requests: 1),
            Case(
                name: "TLS failure", first: .failure(.tls), state: .failed, error: "tls_failed", resumable: nil,
                requests: 1),
            Case(
                name: "blocked address", first: .failure(.blockedAddress), state: .failed, error: "blocked_address",
                resumable: nil, requests: 1),
            Case(
                name: "too many redirects", first: .failure(.tooManyRedirects), state: .failed,
                error: "too_many_redirects", resumable: nil, requests: 1),
        ]
        for c in cases {
            let harness = MachineHarness(size: size, connections: 2)
            harness.first = c.first
            harness.runToEnd()
            XCTAssertEqual(harness.state, c.state, c.name)
            XCTAssertEqual(harness.errorCode, c.error, c.name)
            if let resumable = c.resumable { XCTAssertEqual(harness.download.resumable, resumable, c.name) }
            if c.state == .completed { XCTAssertTrue(harness.partIsTheFile, c.name) }
            if c.error != nil { XCTAssertEqual(harness.download.attempts, 1, "\(c.name): not retried") }
            if let requests = c.requests { XCTAssertEqual(harness.fetches.count, requests, c.name) }
        }
    }

    func testAFirstAnswerForAnotherRangeIsNeverWrittenAndIsAskedAgain() {
        let harness = MachineHarness(size: 20_000, connections: 1)
        harness.script[0] = .init(
            status: 206, headers: [("Content-Range", "bytes 1-19999/20000"), ("ETag", "\"v1\"")],
            body: Array(harness.content.dropFirst()))
        harness.runToEnd()
        completed(harness)
        XCTAssertEqual(harness.fetches, [.probe, .probe])
        XCTAssertEqual(harness.download.attempts, 2)
    }

    func testAChunkedBodyRunningPastTheSizeHEADToldFails() {
        let harness = MachineHarness(size: 10_000, connections: 1)
        // Both GETs are chunked and endless-ish (more than the file); HEAD says 10,000 bytes.
        harness.first = .init(status: 200, body: harness.content + [UInt8](repeating: 1, count: 8192))
        harness.runToEnd()
        XCTAssertEqual(harness.state, .failed)
        XCTAssertEqual(harness.errorCode, "size_mismatch")
        XCTAssertEqual(harness.fetches, [.probe, .head, .probe])
    }

    func testAProbeThatFailsForNowIsRetriedWithBackoffThenFails() {
        let harness = MachineHarness()
        harness.first = .failure(.dns)
        harness.runToEnd()
        XCTAssertEqual(harness.state, .failed)
        XCTAssertEqual(harness.errorCode, "dns_failed")
        XCTAssertEqual(harness.download.attempts, 4)
        XCTAssertEqual(harness.fetches.filter { $0 == .probe }.count, 4)
        let delays = harness.scheduledDelays
        XCTAssertEqual(delays.count, 3)
        // 1, 2, 4 seconds, each within ±25%.
        for (delay, base) in zip(delays, [1.0, 2.0, 4.0]) {
            XCTAssertGreaterThanOrEqual(delay, base * 0.75)
            XCTAssertLessThanOrEqual(delay, base * 1.25)
        }
    }

    func testRetryAfterIsHonouredOnAProbe() {
        let harness = MachineHarness()
        harness.script[0] = .init(status: 503, headers: [("Retry-After", "30")])
        harness.runToEnd()
        completed(harness)
        XCTAssertGreaterThanOrEqual(harness.scheduledDelays.first ?? 0, 30)
    }

    func testAWaitToRetryTellsWhenAndWhy() {
        let harness = MachineHarness()
        harness.script[0] = .init(status: 503, headers: [("Retry-After", "30")])
        harness.start()
        XCTAssertEqual(harness.state, .probing, "a retry keeps the state")
        XCTAssertEqual(harness.machine.lastRetryError?.code.rawValue, "http_503")
        let due = try? XCTUnwrap(harness.machine.nextAttemptAt)
        XCTAssertGreaterThanOrEqual(due ?? 0, harness.now + 30)
        harness.advance(29)
        XCTAssertNotNil(harness.machine.nextAttemptAt, "still waiting before the time the server asked for")
        harness.runToEnd()
        completed(harness)
        XCTAssertNil(harness.machine.nextAttemptAt)
        XCTAssertNil(harness.machine.lastRetryError, "completed: nothing to tell")
    }

    func testOneConnectionWaitingWhileOthersFetchIsNoWaitOfTheDownload() {
        let harness = MachineHarness(size: 64 * 1024, connections: 4)
        harness.script[2] = .init(status: 503, headers: [("Retry-After", "20")])
        harness.stallRequests = [1, 3]
        harness.start()
        XCTAssertEqual(harness.machine.lastRetryError?.code.rawValue, "http_503")
        XCTAssertNil(harness.machine.nextAttemptAt, "other connections are under way")
    }

    func testAnEmptyFileCompletesWithoutABody() {
        let harness = MachineHarness(size: 0)
        harness.runToEnd()
        XCTAssertEqual(harness.state, .completed)
        XCTAssertEqual(harness.download.totalBytes, 0)
    }

    func testASizeTheOriginContradictsFails() {
        let harness = MachineHarness(size: 10_000) { $0.expectedBytes = 9_999 }
        harness.runToEnd()
        XCTAssertEqual(harness.state, .failed)
        XCTAssertEqual(harness.errorCode, "size_mismatch")
    }

    func testAProbeNobodyAnswersIsCutAfterTheStallTimeout() {
        let harness = MachineHarness()
        harness.script[0] = .init(status: 0, ending: .silent)
        harness.start()
        XCTAssertEqual(harness.state, .probing)
        harness.runToEnd()
        completed(harness)
        XCTAssertEqual(harness.fetches.filter { $0 == .probe }.count, 2, "the silent first request was retried")
    }

    // MARK: the seeds' local-file rule

    func testAnUnjournaledPartFileIsContinuedCompletedOrRestarted() {
        // Smaller: the first request stops at its headers and a range continues; equal: nothing more is fetched;
        // larger: it starts over, on the first request's body.
        for (existing, requests) in [
            (Int64(5_000), [FetchKind.probe, .range(start: 5_000, end: nil, ifRange: "\"v1\"")]),
            (20_000, [.probe]), (25_000, [.probe]),
        ] {
            let harness = MachineHarness(size: 20_000, connections: 1)
            harness.existingPart = existing
            harness.runToEnd()
            completed(harness)
            XCTAssertEqual(harness.fetches, requests, "existing \(existing)")
        }
    }

    // MARK: pause, resume and a changed file

    /// A 40,000-byte download on one connection, paused after `bytes` and resumed (queued again).
    private func pausedAndResumed(after bytes: Int) -> MachineHarness {
        let harness = MachineHarness(size: 40_000, connections: 1)
        harness.script[0] = .init(
            status: 200, headers: MachineHarness.plain(40_000),
            body: Array(harness.content.prefix(bytes)), ending: .stall)
        harness.start()
        harness.send(.pause)
        harness.send(.resume)
        return harness
    }

    func testPauseKeepsTheJournalAndResumeContinuesWithIfRange() {
        let harness = MachineHarness(size: 40_000, connections: 1)
        harness.script[0] = .init(
            status: 200, headers: MachineHarness.plain(40_000),
            body: Array(harness.content.prefix(12_288)), ending: .stall)
        harness.start()
        XCTAssertEqual(harness.state, .downloading)
        harness.send(.pause)
        XCTAssertEqual(harness.state, .paused)
        XCTAssertTrue(harness.finished)
        XCTAssertEqual(harness.savedJournal?.first?.received, 12_288, "what was written is journaled")
        XCTAssertEqual(harness.runningCount, 0)

        harness.send(.resume)
        XCTAssertEqual(harness.state, .queued)
        harness.runToEnd()
        completed(harness)
        // No probe on resume: the range itself carries If-Range.
        XCTAssertEqual(harness.fetches, [.probe, .range(start: 12_288, end: nil, ifRange: "\"v1\"")])
    }

    func testAFileChangedWhilePausedIsFetchedAgainFromZero() {
        let harness = pausedAndResumed(after: 8_192)
        // The new version has another validator and other bytes.
        harness.etag = "\"v2\""
        harness.content = harness.content.reversed()
        harness.runToEnd()
        completed(harness)
        XCTAssertEqual(harness.download.etag, "\"v2\"")
        // The resumed range, sent with If-Range: "v1", got the whole new file instead; nothing was spliced.
        XCTAssertEqual(harness.fetches, [.probe, .range(start: 8_192, end: nil, ifRange: "\"v1\"")])
    }

    func testAFileChangedWhilePausedIsFetchedAgainOnAllItsConnections() throws {
        let harness = MachineHarness(size: 256 * 1024, connections: 4)
        harness.script[0] = .init(
            status: 200, headers: MachineHarness.plain(256 * 1024),
            body: Array(harness.content.prefix(8_192)), ending: .stall)
        harness.start()
        harness.send(.pause)
        harness.send(.resume)
        harness.etag = "\"v2\""
        harness.content = harness.content.reversed()
        harness.runToEnd()
        completed(harness)
        XCTAssertEqual(harness.download.etag, "\"v2\"")
        XCTAssertTrue(harness.download.acceptsRanges, "the server does serve ranges: only the file changed")
        // The new version is split again: ranges of it, asked for with its own validator, beside the first body
        // (before the fix the rest ran on that one connection); no range of the old one is asked for after it.
        let validators = harness.rangeFetches.map(\.ifRange)
        let firstNew = try XCTUnwrap(validators.firstIndex(of: "\"v2\""), "\(harness.fetches)")
        XCTAssertGreaterThanOrEqual(validators[firstNew...].count, 3, "\(harness.fetches)")
        XCTAssertTrue(validators[firstNew...].allSatisfy { $0 == "\"v2\"" }, "\(harness.fetches)")
        XCTAssertGreaterThan(harness.download.segments.count, 1)
    }

    func testAServerThatIgnoresRangeGetsOneConnectionFromZero() {
        let harness = MachineHarness(size: 64 * 1024, connections: 4)
        // Advertises ranges, answers every ranged GET with the whole file.
        harness.script[1] = .init(
            status: 200, headers: [("Content-Length", "65536"), ("ETag", "\"v1\"")],
            body: harness.content)
        harness.runToEnd()
        completed(harness)
        XCTAssertFalse(harness.download.acceptsRanges)
        XCTAssertEqual(harness.download.segments.count, 1)
    }

    func testAWrongContentRangeIsRetried() {
        let harness = MachineHarness(size: 64 * 1024, connections: 4)
        harness.script[1] = .init(
            status: 206, headers: [("Content-Range", "bytes 1-100/65536"), ("ETag", "\"v1\"")],
            body: [UInt8](repeating: 0, count: 100))
        harness.runToEnd()
        completed(harness)
        XCTAssertEqual(harness.download.attempts, 2, "one retry")
        XCTAssertEqual(
            harness.actions.filter {
                if case .log(_, let message, let meta) = $0 {
                    return message.contains("retrying") && meta["error.code"] == "range_mismatch"
                }
                return false
            }.count, 1)
    }

    func testATotalThatChangedMidTransferRestartsAtMostThreeTimes() {
        let harness = MachineHarness(size: 64 * 1024, connections: 4)
        // Every ranged reply says the file has another size now.
        harness.rangeReply = { start, _ in
            .init(status: 206, headers: [("Content-Range", "bytes \(start)-65535/99999"), ("ETag", "\"v1\"")])
        }
        harness.runToEnd()
        XCTAssertEqual(harness.state, .failed)
        XCTAssertEqual(harness.errorCode, "remote_changed")
        XCTAssertEqual(harness.fetches.filter { $0 == .probe }.count, 4, "the first request and three restarts")
    }

    func testA416OnARangeProbesAgain() {
        let harness = MachineHarness(size: 64 * 1024, connections: 4)
        harness.script[3] = .init(status: 416)
        harness.runToEnd()
        completed(harness)
        XCTAssertEqual(harness.fetches.filter { $0 == .probe }.count, 2)
    }

    // MARK: connections failing

    func testACutConnectionResumesFromWhereItStopped() {
        let harness = MachineHarness(size: 40_000, connections: 1)
        harness.script[0] = .init(
            status: 200, headers: MachineHarness.plain(40_000),
            body: Array(harness.content.prefix(10_000)), ending: .cut)
        harness.runToEnd()
        completed(harness)
        XCTAssertEqual(harness.rangeFetches.first?.start, 10_000)
    }

    func testRetryAfterIsHonouredOnASegment() {
        let harness = MachineHarness(size: 64 * 1024, connections: 4)
        harness.script[2] = .init(status: 503, headers: [("Retry-After", "20")])
        harness.runToEnd()
        completed(harness)
        XCTAssertGreaterThanOrEqual(harness.scheduledDelays.max() ?? 0, 20)
    }

    func testRetriesRunOutAndTheDownloadFailsKeepingWhatItReceived() {
        let harness = MachineHarness(size: 40_000, connections: 1)
        for n in 0..<20 {
            harness.script[n] = .init(
                status: n == 0 ? 200 : 206,
                headers: n == 0
                    ? MachineHarness.plain(40_000)
                    : [("Content-Range", "bytes \(n * 1000)-39999/40000"), ("ETag", "\"v1\"")],
                body: Array(harness.content.prefix(1000)), ending: .cut)
        }
        harness.runToEnd()
        XCTAssertEqual(harness.state, .failed)
        XCTAssertEqual(harness.download.attempts, 4)
        XCTAssertGreaterThan(harness.download.receivedBytes, 0, "what was received is kept")
        XCTAssertTrue(
            harness.actions.contains { if case .release = $0 { return true } else { return false } },
            "the blocks reserved for the rest are given back")
        XCTAssertTrue(harness.finished)
    }

    func testANotFoundOnASegmentFailsAtOnce() {
        let harness = MachineHarness(size: 64 * 1024, connections: 4)
        harness.script[3] = .init(status: 404)
        harness.runToEnd()
        XCTAssertEqual(harness.state, .failed)
        XCTAssertEqual(harness.errorCode, "http_404")
        XCTAssertEqual(harness.runningCount, 0, "the other connections were stopped")
        XCTAssertEqual(harness.pendingTimers, 0)
    }

    func testAStalledConnectionIsCutAndItsSegmentRetried() {
        let harness = MachineHarness(size: 64 * 1024, connections: 4)
        harness.script[1] = .init(
            status: 206,
            headers: [
                ("Content-Range", "bytes 16384-32767/65536"),
                ("ETag", "\"v1\""),
            ],
            body: Array(harness.content[16384..<20480]), ending: .stall)
        harness.start()
        XCTAssertEqual(harness.state, .downloading)
        harness.runToEnd()
        completed(harness)
        XCTAssertTrue(
            harness.actions.contains {
                if case .log(_, let message, _) = $0 { return message.contains("nothing received for 5 s") }
                return false
            })
    }

    func testAConnectionSlowerThanTheLowestSpeedIsReplaced() {
        var settings = MachineHarness.settings
        settings.lowestSpeed = 1000
        settings.minSplitSize = 1 << 20
        let harness = MachineHarness(size: 40_000, connections: 1, settings: settings)
        // 100 bytes a second, under the 1000 asked for: cut after the stall timeout, then fetched at full speed.
        harness.script[0] = .init(
            status: 200, headers: MachineHarness.plain(40_000), body: harness.content,
            ending: .trickle(100))
        harness.runToEnd()
        completed(harness)
        XCTAssertTrue(
            harness.actions.contains {
                if case .log(_, let message, _) = $0 { return message.contains("slower than 1000 bytes/s for 5 s") }
                return false
            })
        XCTAssertGreaterThan(harness.rangeFetches.first?.start ?? 0, 0, "resumed where the slow one stopped")
    }

    func testWorkIsStolenFromASlowConnection() {
        let harness = MachineHarness(size: 256 * 1024, connections: 4)
        // The last segment's connection stalls after one chunk; the free connections split its range.
        harness.script[3] = .init(
            status: 206,
            headers: [
                ("Content-Range", "bytes 196608-262143/262144"),
                ("ETag", "\"v1\""),
            ],
            body: Array(harness.content[196608..<200704]), ending: .stall)
        harness.start()
        XCTAssertGreaterThan(harness.download.segments.count, 4, "a free connection took half of the slow range")
        harness.runToEnd()
        completed(harness)
    }

    func testASlowConnectionKeepsOnlyTheShareItCanFetchInTime() {
        var settings = MachineHarness.settings
        settings.minSplitSize = 256 << 10
        let size = 1 << 20
        let harness = MachineHarness(size: size, connections: 4, settings: settings)
        // Four segments of 256 KiB: three come at 128 KiB/s, the last at 1,000 bytes/s (a bad path). What is left of
        // it is under the split minimum, but at its rate it would take 260 s.
        func reply(_ start: Int64, _ end: Int64?) -> MachineHarness.Reply {
            let last = Int(end ?? Int64(size - 1))
            return .init(
                status: 206, headers: [("Content-Range", "bytes \(start)-\(last)/\(size)"), ("ETag", "\"v1\"")],
                body: Array(harness.content[Int(start)...last]),
                ending: .trickle(start == 786_432 ? 1000 : 128 << 10))
        }
        harness.first = reply(0, nil)
        harness.rangeReply = { reply($0, $1) }
        harness.runToEnd()
        completed(harness)
        // The fast connections took most of the slow one's range once its rate showed: done in seconds, not minutes.
        XCTAssertLessThan(harness.now, 10)
        let slow = harness.download.segments.first { $0.start == 786_432 }
        XCTAssertLessThan(slow.map { $0.end! - $0.start + 1 } ?? .max, 16 << 10, "the slow one kept a sliver")
    }

    func testABodyRunningPastItsRangeFails() {
        let harness = MachineHarness(size: 40_000, connections: 1)
        harness.script[0] = .init(
            status: 200, headers: MachineHarness.plain(40_000), body: harness.content + [1, 2, 3])
        harness.runToEnd()
        XCTAssertEqual(harness.state, .failed)
        XCTAssertEqual(harness.errorCode, "size_mismatch")
    }

    func testARangeEndedEarlyIsRetried() {
        let harness = MachineHarness(size: 40_000, connections: 1)
        harness.script[0] = .init(
            status: 200, headers: MachineHarness.plain(40_000),
            body: Array(harness.content.prefix(30_000)))
        harness.runToEnd()
        completed(harness)
        XCTAssertEqual(harness.rangeFetches.first?.start, 30_000)
    }

    func testAnUnknownLengthEndsWhereTheBodyEnds() {
        let harness = MachineHarness(size: 30_000, connections: 4)
        harness.script[0] = .init(status: 200, body: harness.content)
        harness.head = .init(status: 405)
        harness.script[2] = .init(status: 200, body: harness.content)
        harness.runToEnd()
        completed(harness)
        XCTAssertEqual(harness.download.totalBytes, 30_000)
        XCTAssertFalse(harness.download.resumable)
        XCTAssertEqual(harness.fetches, [.probe, .head, .probe])
    }

    func testAThreeHundredToAPlainGetIsARangeMismatch() {
        // Not resumable (no ranges): after a cut the file is asked for again from 0, and a 304 is no answer.
        let harness = MachineHarness(size: 10_000, connections: 1)
        harness.script[0] = .init(
            status: 200, headers: [("Content-Length", "10000")],
            body: Array(harness.content.prefix(4096)), ending: .cut)
        for n in 1..<10 { harness.script[n] = .init(status: 304) }
        harness.runToEnd()
        XCTAssertEqual(harness.state, .failed)
        XCTAssertEqual(harness.errorCode, "range_mismatch")
        XCTAssertEqual(harness.fetches.dropFirst().first, .whole)
    }

    func testAFetchThatCannotStartFailsTheDownload() {
        let harness = MachineHarness()
        harness.send(.start(now: 0))
        guard
            case .fetch(let id, _)? = harness.actions.first(where: {
                if case .fetch = $0 { return true } else { return false }
            })
        else { return XCTFail("no fetch") }
        harness.send(.couldNotStart(id, "the request header 'X' is not a valid HTTP field"))
        XCTAssertEqual(harness.state, .failed)
        XCTAssertEqual(harness.errorCode, "internal_error")
    }

    // MARK: verification, disk and the journal

    func testAChecksumMismatchDiscardsThePartFile() {
        let harness = MachineHarness(size: 10_000, connections: 1) {
            $0.checksum = "sha256:" + String(repeating: "0", count: 64)
        }
        harness.runToEnd()
        XCTAssertEqual(harness.state, .failed)
        XCTAssertEqual(harness.errorCode, "checksum_mismatch")
        XCTAssertTrue(harness.actions.contains(.deletePartFile))
        XCTAssertEqual(harness.download.segments, [])
        XCTAssertFalse(harness.actions.contains { if case .publish = $0 { return true } else { return false } })
    }

    func testAMatchingChecksumCompletes() {
        let content = MachineHarness(size: 10_000).content
        let digest = Digest.sha256(content).map { String(format: "%02x", $0) }.joined()
        let harness = MachineHarness(size: 10_000, connections: 1) { $0.checksum = "sha256:" + digest }
        harness.runToEnd()
        completed(harness)
    }

    func testAFullDiskFailsTheDownloadAndGivesBackTheReservation() {
        let harness = MachineHarness(size: 2 << 20)
        harness.diskFullOnReserve = true
        harness.runToEnd()
        XCTAssertEqual(harness.state, .failed)
        XCTAssertEqual(harness.errorCode, "disk_full")
        let released = harness.actions.compactMap {
            if case .release(let ranges) = $0 { return ranges } else { return nil }
        }
        XCTAssertEqual(released.joined().reduce(0) { $0 + $1.last - $1.first + 1 }, 2 << 20, "all of it")
    }

    func testASmallFileIsWrittenWithoutReservingItsBlocks() {
        let small = MachineHarness(size: 64 * 1024)
        small.diskFullOnReserve = true
        small.runToEnd()
        completed(small)
        XCTAssertFalse(small.actions.contains { if case .reserve = $0 { return true } else { return false } })
        let large = MachineHarness(size: 1 << 20)
        large.runToEnd()
        completed(large)
        XCTAssertTrue(large.actions.contains { if case .reserve(1 << 20) = $0 { return true } else { return false } })
    }

    func testAFileThatCannotFitIsRefusedBeforeReserving() {
        var settings = MachineHarness.settings
        settings.space = SpacePolicy(minFreeSpace: 1 << 20)
        let harness = MachineHarness(settings: settings)
        harness.free = (1 << 20) + 1000
        harness.runToEnd()
        XCTAssertEqual(harness.state, .failed)
        XCTAssertEqual(harness.errorCode, "insufficient_space")
        XCTAssertFalse(harness.actions.contains { if case .reserve = $0 { return true } else { return false } })
    }

    func testAnEndlessBodyStopsAtTheLargestFileAccepted() {
        var settings = MachineHarness.settings
        settings.space = SpacePolicy(minFreeSpace: 0, maxFileSize: 20_000)
        let harness = MachineHarness(size: 50_000, settings: settings)
        harness.script[0] = .init(status: 200, body: harness.content)
        harness.runToEnd()
        XCTAssertEqual(harness.state, .failed)
        XCTAssertEqual(harness.errorCode, "file_too_large")
        XCTAssertLessThanOrEqual(harness.download.receivedBytes, 20_000)
    }

    func testAWriteThatFailsFailsTheDownload() {
        let harness = MachineHarness(size: 10_000, connections: 1)
        harness.failNextWrite = true
        harness.runToEnd()
        XCTAssertEqual(harness.state, .failed)
        XCTAssertEqual(harness.errorCode, "write_failed")
        XCTAssertEqual(harness.download.receivedBytes, 0, "the bytes not written are not counted")
    }

    func testCheckpointsJournalOnlyWhatASyncCovered() {
        var settings = MachineHarness.settings
        settings.checkpointBytes = 8192
        let harness = MachineHarness(size: 40_000, connections: 1, settings: settings)
        harness.script[0] = .init(
            status: 200, headers: MachineHarness.plain(40_000),
            body: Array(harness.content.prefix(20_480)), ending: .stall)
        harness.start()
        let journal = harness.savedJournal?.first?.received ?? 0
        XCTAssertGreaterThanOrEqual(journal, 8192)
        XCTAssertLessThanOrEqual(journal, harness.download.receivedBytes)
        // A checkpoint of segments since thrown away is not journaled.
        let before = harness.savedJournal
        harness.send(.synced([Segment(start: 0, end: 39_999, received: 40_000)], generation: -1, final: false))
        XCTAssertEqual(harness.savedJournal, before)
    }

    func testRestartAfterACrashContinuesEverySegmentFromItsJournal() {
        let journal = [
            Segment(start: 0, end: 16383, received: 10_000), Segment(start: 16384, end: 32767, received: 0),
            Segment(start: 32768, end: 49151, received: 16384),
            Segment(
                start: 49152, end: 65535,
                received: 100),
        ]
        let harness = MachineHarness(size: 64 * 1024, connections: 4) {
            $0.state = .downloading
            $0.filename = "file.bin"
            $0.totalBytes = 65536
            $0.acceptsRanges = true
            $0.etag = "\"v1\""
            $0.segments = journal
            $0.journal = journal
        }
        // What the crashed server had written, as the part file holds it.
        harness.send(.interrupted)
        XCTAssertEqual(harness.state, .queued)
        harness.prefill(journal)
        harness.runToEnd()
        completed(harness)
        // The first three requests continue the three unfinished segments from their journaled cursors.
        XCTAssertEqual(Set(harness.rangeFetches.prefix(3).map(\.start)), [10_000, 16384, 49252])
        XCTAssertTrue(harness.rangeFetches.allSatisfy { $0.ifRange == "\"v1\"" })
    }

    func testAFinishedFileFoundAtStartCompletesWithoutFetching() {
        let harness = MachineHarness()
        harness.send(.foundFinished(name: "file (1).bin", file: nil))
        XCTAssertEqual(harness.state, .completed)
        XCTAssertEqual(harness.download.filename, "file (1).bin")
        XCTAssertTrue(harness.fetches.isEmpty)
        XCTAssertTrue(harness.finished)
    }

    func testStoppingForShutdownKeepsTheStateAndSyncsTheFile() {
        let harness = MachineHarness(size: 40_000, connections: 1)
        harness.script[0] = .init(
            status: 200, headers: MachineHarness.plain(40_000),
            body: Array(harness.content.prefix(4096)), ending: .stall)
        harness.start()
        harness.send(.stop(keepFile: true))
        XCTAssertEqual(harness.state, .downloading, "the next start resumes it")
        XCTAssertEqual(harness.savedJournal?.first?.received, 4096)
        XCTAssertFalse(harness.machine.isRunning)
        XCTAssertEqual(harness.runningCount, 0)
    }

    // MARK: limits

    func testAHostWithoutConnectionsToSpareMakesSegmentsWait() {
        let harness = MachineHarness(size: 64 * 1024, connections: 4)
        harness.hostRefusals = 2
        harness.start()
        XCTAssertEqual(harness.state, .downloading)
        harness.send(.hostConnectionFreed)
        harness.runToEnd()
        completed(harness)
    }

    func testFewerConnectionsCloseTheExtraOnesAndMoreOpenAtOnce() {
        let harness = MachineHarness(size: 256 * 1024, connections: 4)
        harness.stallRequests = [0, 1, 2, 3]
        harness.send(.start(now: 0))
        harness.settle()
        XCTAssertEqual(harness.machine.activeConnections, 4)
        harness.send(.change(DownloadChanges(connections: 2)))
        XCTAssertEqual(harness.machine.activeConnections, 2)
        XCTAssertEqual(harness.download.connections, 2)
        harness.send(.change(DownloadChanges(connections: 6)))
        XCTAssertEqual(harness.machine.activeConnections, 6)
    }

    // MARK: the transition table

    func testEveryStateChangeGoesThroughTheTable() {
        // A whole life: queued -> probing -> downloading -> verifying -> completed, each step a table entry.
        let harness = MachineHarness(size: 10_000, connections: 1)
        var seen: [DownloadState] = [harness.state]
        harness.send(.start(now: 0))
        seen.append(harness.state)
        harness.runToEnd()
        seen.append(harness.state)
        XCTAssertEqual(seen, [.queued, .probing, .completed])
        for (from, to) in [
            (DownloadState.queued, DownloadState.probing), (.probing, .downloading),
            (.downloading, .verifying), (.verifying, .completed),
        ] {
            XCTAssertTrue(DownloadState.transitions.contains { $0.from == from && $0.to == to }, "\(from) -> \(to)")
        }
    }

    func testPausingAQueuedDownloadAndResumingIt() {
        let harness = MachineHarness()
        harness.send(.pause)
        XCTAssertEqual(harness.state, .paused)
        XCTAssertTrue(harness.actions.isEmpty, "a download that is not running needs nothing done")
        harness.send(.resume)
        XCTAssertEqual(harness.state, .queued)
    }

    func testRetryingAFailedDownloadStartsItsAttemptsAgain() {
        let harness = MachineHarness()
        harness.first = .failure(.connect)
        harness.runToEnd()
        XCTAssertEqual(harness.state, .failed)
        harness.first = nil
        harness.send(.resume)
        XCTAssertEqual(harness.state, .queued, "a retried download waits for a slot")
        XCTAssertEqual(harness.download.attempts, 0)
        XCTAssertNil(harness.download.error)
        harness.runToEnd()
        completed(harness)
    }
}

extension MachineHarness {
    /// Writes the bytes `journal` vouches for into the part file, as a crashed server would have left them.
    func prefill(_ journal: [Segment]) {
        for segment in journal where segment.received > 0 {
            let start = Int(segment.start)
            write(Array(content[start..<start + Int(segment.received)]), at: start)
        }
    }
}

extension MachineHarness {
    /// The headers of a plain 200 for a file of `size` bytes that also serves ranges.
    static func plain(_ size: Int) -> [(String, String)] {
        [("Content-Length", String(size)), ("Accept-Ranges", "bytes"), ("ETag", "\"v1\"")]
    }
}
