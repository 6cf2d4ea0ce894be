import Foundation
import XCTest

/// Several connections per download: disjoint ranges, work stealing, and origins that get ranges wrong.
final class SegmentedTests: HaulTestCase {
    override var serveArguments: [String] {
        super.serveArguments + ["--min-split-size", "256k", "--max-attempts", "6", "--stall-timeout", "1"]
    }

    /// The byte ranges of the origin's 206 replies for `name`, as `first...last`.
    private func servedRanges(_ name: String, size: Int) throws -> [ClosedRange<Int64>] {
        try originRequests().filter { $0["path"] as? String == "/files/\(name)" && $0["status"] as? Int == 206 }
            .compactMap { $0["range"] as? String }
            .filter { $0 != "bytes=0-0" }
            .compactMap { range -> ClosedRange<Int64>? in
                let bounds = range.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
                guard let first = Int64(bounds[0]) else { return nil }
                return first...(Int64(bounds[1]) ?? Int64(size - 1))
            }
    }

    func testEightConnectionsFetchDisjointRangesThatCoverTheFile() throws {
        let size = 8 << 20
        let hash = try sandbox.makeRandomFile("www/eight.bin", size: size)
        let id = try add(["url": originURL("eight.bin", "rate=1000000"), "connections": 8])
        try waitFor("8 connections") { int(try download(id)["active_connections"]) == 8 }
        // Haul counts a transfer from its launch; the origin once its request arrived (later under the sanitizers).
        try waitFor("8 streams at the origin") { try originActiveStreams() == 8 }
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertLessThanOrEqual(int(try originClient.get("/_stats").json["max_active_streams"]), 8)
        // The first request asks from byte 0 (its body is the first eighth); the next seven split the rest into
        // disjoint ranges that cover it exactly.
        let served = try servedRanges("eight.bin", size: size)
        XCTAssertEqual(served.first, 0...Int64(size - 1))
        let rest = served.dropFirst().prefix(7).sorted { $0.lowerBound < $1.lowerBound }
        XCTAssertEqual(rest.count, 7)
        XCTAssertEqual(rest.first?.lowerBound, Int64(size / 8))
        XCTAssertEqual(rest.last?.upperBound, Int64(size - 1))
        for (a, b) in zip(rest, rest.dropFirst()) { XCTAssertEqual(a.upperBound + 1, b.lowerBound) }
        let segments = try XCTUnwrap(done["segments"] as? [[String: Any]])
        XCTAssertEqual(segments.reduce(Int64(0)) { $0 + int($1["received"]) }, Int64(size))
    }

    func testEightConnectionsAgainstNginxLimitingEachConnection() throws {
        try XCTSkipUnless(Nginx.available, "nginx is not installed")
        let size = 16 << 20
        let hash = try sandbox.makeRandomFile("www/throttled.bin", size: size)
        let nginx = try Nginx(root: sandbox.file("www"), prefix: sandbox.file("nginx"), serverConfig: "limit_rate 2m;")
        let id = try add(["url": nginx.baseURL + "/throttled.bin", "connections": 8])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        // nginx served the eight initial ranges, one starting at each eighth of the file (its log is in order of
        // completion, and stolen halves come on top).
        let starts = Set(
            nginx.requests().filter { $0.status == 206 && $0.range != "bytes=0-0" }
                .compactMap { Int64($0.range.dropFirst(6).split(separator: "-").first ?? "") })
        let eighths = Set((0..<8).map { Int64($0) * Int64(size / 8) })
        XCTAssertTrue(eighths.isSubset(of: starts), "\(starts.sorted())")
    }

    /// A file that changed while paused is fetched again from byte 0 on all the download's connections: the ranged
    /// GET that met the new version takes it whole from the start, and the others take ranges of the new version
    /// (before, the rest ran on that one connection: a 2 MB file at a throttled origin took 26 s instead of 7).
    func testAFileChangedWhilePausedIsFetchedAgainOnEveryConnection() throws {
        try sandbox.makeRandomFile("www/season.bin", size: 2 << 20)
        let id = try add(["url": originURL("season.bin", "rate=400000"), "connections": 4])
        try waitFor("bytes received") { int(try download(id)["received_bytes"]) >= 300_000 }
        XCTAssertEqual(try patch(id, ["state": "paused"]).status, 200)
        try waitFor("the origin to see the connections closed") { try originActiveStreams() == 0 }
        let newHash = try sandbox.makeRandomFile("www/season.bin", size: 2 << 20)
        XCTAssertEqual(try patch(id, ["state": "queued"]).status, 200)
        let done = try waitForState(id, "completed", timeout: 60)
        XCTAssertEqual(try sha256(try downloadedPath(done)), newHash)
        let gets = try originRequests().filter { $0["method"] as? String == "GET" }
        let restart = try XCTUnwrap(
            gets.firstIndex { $0["range"] is String && $0["status"] as? Int == 200 },
            "a resumed range got the new version whole: \(gets)")
        let newVersion = gets[restart]["etag_sent"] as? String
        let after = gets[(restart + 1)...].filter { $0["if_range"] as? String == newVersion }
        XCTAssertGreaterThanOrEqual(after.count, 2, "the new version's ranges on other connections: \(gets)")
        XCTAssertTrue(after.allSatisfy { $0["status"] as? Int == 206 }, "\(after)")
    }

    func testAFinishedConnectionStealsHalfOfTheLargestRange() throws {
        // Two connections; the origin serves the second half slowly, so the first connection finishes early
        // and takes over half of what is left of the second range, then again.
        let size = 4 << 20
        let hash = try sandbox.makeRandomFile("www/steal.bin", size: size)
        let id = try add(["url": originURL("steal.bin", "slowfrom=2097152&slowrate=1000000"), "connections": 2])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        let segments = try XCTUnwrap(done["segments"] as? [[String: Any]])
        XCTAssertGreaterThan(segments.count, 2, "connections that finish take over part of the others' ranges")
        let ranges = segments.map { int($0["start"])...int($0["end"]) }
        for (a, b) in zip(ranges, ranges.dropFirst()) { XCTAssertEqual(a.upperBound + 1, b.lowerBound) }
    }

    func testPauseResumeAndRestartKeepWorkingPerSegment() throws {
        let size = 6 << 20
        let hash = try sandbox.makeRandomFile("www/multi.bin", size: size)
        let id = try add(["url": originURL("multi.bin", "rate=1000000"), "connections": 4])
        try waitFor("progress on every segment") {
            let segments = try download(id)["segments"] as? [[String: Any]] ?? []
            return segments.count >= 4 && segments.allSatisfy { int($0["received"]) > 100_000 }
        }
        XCTAssertEqual(try patch(id, ["state": "paused"]).status, 200)
        try waitFor("the connections to close") { try originActiveStreams() == 0 }
        let paused = try download(id)
        XCTAssertEqual(paused["state"] as? String, "paused")
        XCTAssertEqual(try patch(id, ["state": "queued"]).status, 200)
        try waitFor("the transfer to resume") {
            int(try download(id)["received_bytes"]) > int(paused["received_bytes"]) + 500_000
        }
        haul.stop(signal: SIGKILL)
        try startHaul()
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        // Every resumed request continued a segment: none started again from its segment's first byte twice.
        let resumed = try originRequests().filter { ($0["if_range"] as? String) != nil }
        XCTAssertFalse(resumed.isEmpty)
    }

    func testAServerThatStartsIgnoringRangeFallsBackToOneConnection() throws {
        let size = 4 << 20
        let hash = try sandbox.makeRandomFile("www/half.bin", size: size)
        // The first two ranged requests get 206; every later one gets 200 and the whole file.
        let id = try add(["url": originURL("half.bin", "ignorerangeafter=2&rate=2000000"), "connections": 4])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertEqual(done["resumable"] as? Bool, false, "the server was found to ignore Range")
        XCTAssertEqual((done["segments"] as? [Any])?.count, 1)
    }

    func testAWrongContentRangeIsNeverWrittenAndIsRetried() throws {
        let size = 2 << 20
        let hash = try sandbox.makeRandomFile("www/off.bin", size: size)
        let id = try add(["url": originURL("off.bin", "badrange=3"), "connections": 4])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertGreaterThan(int(done["attempts"]), 1)
    }

    func testRetryAfterIsHonoured() throws {
        let hash = try sandbox.makeRandomFile("www/busy.bin", size: 100_000)
        let started = Date()
        // Two 503s with Retry-After: 1; our own backoff would retry after 0.1 s and 0.2 s.
        let id = try add(["url": originURL("busy.bin", "fail=2&status=503")])
        // While it waits the resource says until when and why, in the state it was in.
        var waiting: [String: Any] = [:]
        try waitFor("the wait to retry", timeout: 5) {
            waiting = try download(id)
            return waiting["next_attempt_at"] is String
        }
        XCTAssertEqual(waiting["state"] as? String, "probing")
        XCTAssertEqual((waiting["last_error"] as? [String: Any])?["code"] as? String, "http_503")
        let parser = ISO8601DateFormatter()
        parser.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let due = try XCTUnwrap(parser.date(from: waiting["next_attempt_at"] as? String ?? ""))
        XCTAssertGreaterThan(due.timeIntervalSinceNow, -0.5)
        XCTAssertLessThan(due.timeIntervalSinceNow, 2)
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 1.9)
        XCTAssertTrue(done["next_attempt_at"] is NSNull)
        XCTAssertTrue(done["last_error"] is NSNull)
    }

    func testAStalledConnectionIsClosedAndItsRangeFetchedAgain() throws {
        let size = 2 << 20
        let hash = try sandbox.makeRandomFile("www/stuck.bin", size: size)
        let id = try add(["url": originURL("stuck.bin", "stall=100000&stalls=1&rate=2000000"), "connections": 4])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
    }

    func testChangingConnectionsWhileRunning() throws {
        let size = 4 << 20
        let hash = try sandbox.makeRandomFile("www/grow.bin", size: size)
        let id = try add(["url": originURL("grow.bin", "rate=500000"), "connections": 1])
        try waitFor("one connection") { int(try download(id)["active_connections"]) == 1 }
        let changed = try patch(id, ["connections": 4])
        XCTAssertEqual(changed.status, 200)
        XCTAssertEqual(int(changed.json["connections"]), 4)
        try waitFor("four connections") { int(try download(id)["active_connections"]) == 4 }
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
    }

    func testChecksumsAreVerifiedBeforeTheFileGetsItsName() throws {
        let hash = try sandbox.makeRandomFile("www/sum.bin", size: 700_000)
        let data = try Data(contentsOf: URL(fileURLWithPath: sandbox.file("www/sum.bin")))
        let sha1 = try runCommand("/usr/bin/sha1sum", [sandbox.file("www/sum.bin")]).prefix(40)
        let md5 = try runCommand("/usr/bin/md5sum", [sandbox.file("www/sum.bin")]).prefix(32)
        for (n, checksum) in ["sha256:\(hash)", "SHA1:\(sha1)", "md5:\(md5.uppercased())"].enumerated() {
            let id = try add(["url": originURL("sum.bin"), "filename": "ok\(n).bin", "checksum": checksum])
            let done = try waitForState(id, "completed")
            XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
            XCTAssertEqual(done["checksum"] as? String, checksum.lowercased())
        }
        let wrong = "sha256:" + String(repeating: "0", count: 64)
        let id = try add(["url": originURL("sum.bin"), "filename": "bad.bin", "checksum": wrong])
        let failed = try waitForState(id, "failed")
        XCTAssertEqual((failed["error"] as? [String: Any])?["code"] as? String, "checksum_mismatch")
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.file("downloads/bad.bin")))
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.file("downloads/bad.bin.part")))
        XCTAssertEqual(
            try api.request(
                "POST", "/downloads",
                json: [
                    "url": originURL("sum.bin"),
                    "checksum": "sha256:abc",
                ]
            ).status, 422)
        XCTAssertEqual(data.count, 700_000)
    }
}

/// Limits across downloads: connections per host and speed.
final class LimitTests: HaulTestCase {
    override var serveArguments: [String] {
        super.serveArguments + ["--min-split-size", "256k", "--max-connections-per-host", "4"]
    }

    func testThePerHostCapHoldsOverAllDownloads() throws {
        var hashes: [String: String] = [:]
        var ids: [String: String] = [:]
        for name in ["a.bin", "b.bin"] {
            hashes[name] = try sandbox.makeRandomFile("www/\(name)", size: 3 << 20)
            ids[name] = try add(["url": originURL(name, "rate=1000000"), "connections": 8])
        }
        for name in ["a.bin", "b.bin"] {
            let done = try waitForState(ids[name]!, "completed")
            XCTAssertEqual(try sha256(try downloadedPath(done)), hashes[name])
        }
        let peak = int(try originClient.get("/_stats").json["max_active_streams"])
        XCTAssertEqual(peak, 4, "the cap is used and never exceeded")
    }

    /// The limit's accuracy is measured on the engine's own clock in RunnerTests; here, over real HTTP, that it
    /// applies to a running download and can be lifted.
    func testAPerDownloadSpeedLimitAppliesAndCanBeLifted() throws {
        let hash = try sandbox.makeRandomFile("www/limited.bin", size: 16 << 20)
        let id = try add(["url": originURL("limited.bin"), "connections": 4, "max_speed": 500_000])
        try waitFor("the transfer to start") { int(try download(id)["received_bytes"]) > 500_000 }
        let limited = try download(id)
        XCTAssertEqual(limited["state"] as? String, "downloading", "16 MiB at 500 kB/s is not done in a second")
        XCTAssertEqual(int(limited["max_speed"]), 500_000)
        XCTAssertEqual(try patch(id, ["max_speed": NSNull()]).status, 200)
        let done = try waitForState(id, "completed")
        XCTAssertTrue(done["max_speed"] is NSNull)
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
    }

    /// With transfer loops (the default from two cores) a body flowing unlimited is written on its loop, under a
    /// grant; a limit set while it flows revokes the grant, so the origin is held to the limit's pace again (what
    /// it sends, not only what Haul counts), and lifting the limit lets the rest come whole.
    func testALimitSetWhileATransferLoopWritesTheBodyHoldsTheOrigin() throws {
        let hash = try sandbox.makeRandomFile("www/granted.bin", size: 64 << 20)
        let id = try add(["url": originURL("granted.bin", "rate=32000000"), "connections": 1])
        try waitFor("the body to flow") { int(try download(id)["received_bytes"]) > 4 << 20 }
        XCTAssertEqual(try patch(id, ["max_speed": 200_000]).status, 200)
        func sent() throws -> Int64 {
            try originRequests().filter { ($0["path"] as? String) == "/files/granted.bin" }
                .reduce(Int64(0)) { $0 + int($1["body_bytes"]) }
        }
        // The sockets' buffers fill first (megabytes on loopback); after that the origin sends what is read.
        Thread.sleep(forTimeInterval: 1.5)
        let before = try sent()
        Thread.sleep(forTimeInterval: 2)
        let during = try sent() - before
        XCTAssertEqual(try download(id)["state"] as? String, "downloading")
        XCTAssertLessThan(during, 4 << 20, "2 s at 200 kB/s; unheld, the rest of the 64 MiB at 32 MB/s")
        XCTAssertEqual(try patch(id, ["max_speed": NSNull()]).status, 200)
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
    }
}
