import Foundation
import HaulLoop
import XCTest

/// Kill the server at any moment, start it again: every download finishes with the right bytes.
final class CrashTests: HaulTestCase {
    /// Bytes the origin sent for `name` beyond the file's size: what was fetched again after interruptions.
    private func refetched(_ name: String, size: Int) throws -> Int64 {
        let sent = try originRequests().filter { ($0["path"] as? String) == "/files/\(name)" }
            .reduce(Int64(0)) { $0 + int($1["body_bytes"]) }
        return sent - Int64(size)
    }

    func testSIGKILLAtTwentyRandomMomentsLosesAndDuplicatesNothing() throws {
        let files: [(name: String, size: Int, query: String)] = [
            ("big-1.bin", 16_000_000, "rate=3000000"),
            ("big-2.bin", 12_000_000, "rate=3000000"),
            ("small-1.bin", 200_000, "rate=100000"),
            ("small-2.bin", 40_000, ""),
        ]
        var hashes: [String: String] = [:]
        for file in files { hashes[file.name] = try sandbox.makeRandomFile("www/\(file.name)", size: file.size) }
        var ids: [String: String] = [:]
        for file in files { ids[file.name] = try add(["url": originURL(file.name, file.query)]) }

        // Seeded (and printed), so a failing run can be repeated with HAUL_CRASH_SEED.
        let seed = ProcessInfo.processInfo.environment["HAUL_CRASH_SEED"].flatMap(UInt64.init) ?? 20261201
        print("SIGKILL x20: seed \(seed)")
        var generator = SplitMix64(seed: seed)
        var activeAtKill = 0
        for _ in 0..<20 {
            usleep(UInt32.random(in: 150_000...600_000, using: &generator))
            activeAtKill += (try? api.get("/stats").json["active"]).map { int($0) > 0 ? 1 : 0 } ?? 0
            haul.stop(signal: SIGKILL)
            try startHaul()
        }
        XCTAssertGreaterThanOrEqual(activeAtKill, 10, "most kills should hit running transfers")

        for file in files {
            let done = try waitForState(ids[file.name]!, "completed", timeout: 90)
            XCTAssertEqual(done["filename"] as? String, file.name)
            XCTAssertEqual(try sha256(try downloadedPath(done)), hashes[file.name], file.name)
        }
        let listed = try XCTUnwrap(try api.get("/downloads").json["downloads"] as? [[String: Any]])
        XCTAssertEqual(Set(listed.compactMap { $0["id"] as? String }), Set(ids.values), "none lost or added")
        let onDisk = try FileManager.default.contentsOfDirectory(atPath: sandbox.file("downloads")).sorted()
        XCTAssertEqual(onDisk, files.map(\.name).sorted(), "no duplicates, no leftover part files")
        var report: [String] = []
        for file in files where file.size > 1_000_000 {
            report.append("\(file.name) \(try refetched(file.name, size: file.size) / 1024) KiB")
        }
        print(
            "SIGKILL x20: refetched in total \(report.joined(separator: ", ")); "
                + "\(activeAtKill) kills hit running transfers")
    }

    func testSIGTERMCheckpointsAndExitsWithinFiveSeconds() throws {
        let size = 8_000_000
        let hash = try sandbox.makeRandomFile("www/term.bin", size: size)
        let id = try add(["url": originURL("term.bin", "rate=2000000")])
        try waitFor("a few megabytes") { int(try download(id)["received_bytes"]) > 2_500_000 }
        let started = Date()
        XCTAssertEqual(haul.stop(signal: SIGTERM), 0)
        let took = Date().timeIntervalSince(started)
        XCTAssertLessThan(took, 5)
        try startHaul()
        let journaled = int(try download(id)["received_bytes"])
        XCTAssertGreaterThan(journaled, 2_500_000, "the shutdown checkpoint kept the bytes received")
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        let again = try refetched("term.bin", size: size)
        print("SIGTERM: exited in \(String(format: "%.2f", took)) s; refetched \(again) bytes after the restart")
        // At most one checkpoint's worth (one second at 2 MB/s); a clean shutdown should need next to nothing.
        XCTAssertLessThanOrEqual(again, 2_000_000)
        let ranged = try originRequests().filter { $0["method"] as? String == "GET" }.last
        XCTAssertEqual(ranged?["range"] as? String, "bytes=\(journaled)-")
        XCTAssertNotNil(ranged?["if_range"] as? String)
    }

    func testSIGTERMWithEventStreamsAndKeepAliveConnectionsOpenExitsCleanly() throws {
        let port = haul.port
        let streams = try (0..<3).map { _ in try SSEClient(port: port, path: "/events") }
        for stream in streams { _ = stream.read(timeout: 10) { $0.status != 0 } }
        XCTAssertEqual(try api.get("/stats").json["event_streams"] as? Int, 3)
        // Ending the streams before freeing their connections: freeing them first crashed at exit.
        XCTAssertEqual(haul.stop(signal: SIGTERM), 0)
        for stream in streams { XCTAssertTrue(stream.read(timeout: 5) { $0.closed }, "the stream was closed") }
    }

    func testASecondServerOnTheSameDataDirectoryRefusesToStart() throws {
        let id = try add(["url": originURL("none.bin"), "start_paused": true])
        XCTAssertThrowsError(
            try ServerProcess(
                executable: buildDirectory + "/haul",
                arguments: [
                    "serve", "--listen", "127.0.0.1:0", "--download-dir", sandbox.file("downloads2"),
                    "--data-dir", sandbox.file("data"),
                ],
                logPath: sandbox.file("second.log"))
        ) { error in
            XCTAssertTrue("\(error)".contains("in use by another Haul"), "\(error)")
        }
        // The first server is untouched and still owns its database.
        XCTAssertEqual(try download(id)["state"] as? String, "paused")
        XCTAssertEqual(try api.request("PATCH", "/downloads/\(id)", json: ["priority": 3]).status, 200)
    }

    func testACrashBetweenLinkAndUnlinkFinishesWithoutFetchingAgain() throws {
        let hash = try sandbox.makeRandomFile("www/linked.bin", size: 300_000)
        let id = try add(["url": originURL("linked.bin")])
        _ = try waitForState(id, "completed")
        haul.stop(signal: SIGKILL)
        // The moment after link() and before unlink(): both names on the finished file, the store not yet saying
        // completed (a running download goes back to the queue at start).
        XCTAssertEqual(link(sandbox.file("downloads/linked.bin"), sandbox.file("downloads/linked.bin.part")), 0)
        try runCommand(
            "/usr/bin/python3",
            [
                "-c",
                """
                import sqlite3, sys
                db = sqlite3.connect(sys.argv[1])
                db.execute("UPDATE downloads SET state = 'downloading', completed_at = NULL")
                db.commit()
                """, sandbox.file("data/haul.sqlite"),
            ])
        _ = try originClient.request("DELETE", "/_requests")
        try startHaul()
        let done = try waitForState(id, "completed")
        XCTAssertEqual(done["path"] as? String, "linked.bin")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.file("downloads/linked.bin.part")))
        XCTAssertEqual(try originRequests().count, 0, "nothing was fetched again")
    }

    func testAPartFileWithoutAJournalIsContinuedCompletedOrRestarted() throws {
        let size = 600_000
        let hash = try sandbox.makeRandomFile("www/adopt.bin", size: size)
        let source = try Data(contentsOf: URL(fileURLWithPath: sandbox.file("www/adopt.bin")))
        try FileManager.default.createDirectory(atPath: sandbox.file("downloads"), withIntermediateDirectories: true)
        // The first GET's headers tell the size before a byte is written: smaller goes on from its end (the first
        // GET stops at its headers), equal needs nothing more, larger starts over on the first GET's body.
        let cases: [(dir: String, part: Data, gets: [String])] = [
            ("smaller", source.prefix(250_000), ["bytes=0-", "bytes=250000-"]),
            ("equal", source, ["bytes=0-"]),
            ("larger", source + Data(count: 1000), ["bytes=0-"]),
        ]
        for (dir, part, expected) in cases {
            try FileManager.default.createDirectory(
                atPath: sandbox.file("downloads/\(dir)"),
                withIntermediateDirectories: true)
            try part.write(to: URL(fileURLWithPath: sandbox.file("downloads/\(dir)/adopt.bin.part")))
            _ = try originClient.request("DELETE", "/_requests")
            let id = try add(["url": originURL("adopt.bin"), "directory": dir])
            let done = try waitForState(id, "completed")
            XCTAssertEqual(done["filename"] as? String, "adopt.bin", dir)
            XCTAssertEqual(try sha256(try downloadedPath(done)), hash, dir)
            let gets = try originRequests().filter { $0["method"] as? String == "GET" }.map { $0["range"] as? String }
            XCTAssertEqual(gets, expected, dir)
        }
    }

    /// Start-up reads the store through a map of its file and drops the map after: the file's pages are not the
    /// process's memory while it runs, and what was stored is all there. (Rows enough that SQLite's page cache does
    /// not hold them all, so the read goes through the map.)
    func testAStartUpLeavesNoMapOfTheStoreAndEveryDownloadThere() throws {
        let count = 12_000
        for batch in 0..<(count / 1000) {
            let items = (0..<1000).map { index in
                ["url": originURL("mapped-\(batch)-\(index).bin"), "start_paused": true] as [String: Any]
            }
            XCTAssertEqual(try api.request("POST", "/downloads", json: ["downloads": items]).status, 200)
        }
        XCTAssertEqual(haul.stop(signal: SIGTERM), 0)
        try startHaul()
        XCTAssertEqual(int(try api.get("/stats").json["downloads"]), Int64(count))
        let maps = try String(contentsOfFile: "/proc/\(haul.process.processIdentifier)/maps", encoding: .utf8)
        let mapped = maps.split(separator: "\n").filter { $0.hasSuffix("/haul.sqlite") }
        XCTAssertEqual(mapped, [], "the store's file is still mapped after start-up")
    }
}

/// A full disk fails one download (insufficient_space when its size is known, disk_full when the disk fills while
/// it writes); the server and the others go on, and a retry after space is freed finishes the file.
final class DiskFullTests: HaulTestCase {
    private var mounts: [String] = []

    /// No reserve: these tests are about running out of space for real (ENOSPC from fallocate and from writes),
    /// which `--min-free-space` would otherwise prevent (DiskSpaceTests cover that).
    override var serveArguments: [String] { super.serveArguments + ["--min-free-space", "0"] }

    private func mountTmpfs(_ relative: String, megabytes: Int) throws {
        try XCTSkipUnless(getuid() == 0, "mounting a small file system needs root")
        let path = sandbox.file(relative)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        do {
            try runCommand("/bin/mount", ["-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", path])
        } catch {
            throw XCTSkip("cannot mount tmpfs here: \(error)")
        }
        mounts.append(path)
    }

    override func tearDownWithError() throws {
        haul?.stop(signal: SIGKILL)
        for path in mounts { _ = try? runCommand("/bin/umount", ["-l", path]) }
        try super.tearDownWithError()
    }

    func testAFileTooLargeForTheDiskFailsAloneAndARetryAfterFreeingSpaceFinishesIt() throws {
        try mountTmpfs("downloads/full", megabytes: 2)
        let bigHash = try sandbox.makeRandomFile("www/big.bin", size: 3_000_000)
        let otherHash = try sandbox.makeRandomFile("www/other.bin", size: 1_000_000)
        let big = try add(["url": originURL("big.bin"), "directory": "full"])
        let failed = try waitForState(big, "failed")
        let error = try XCTUnwrap(failed["error"] as? [String: Any])
        // Its size is known: compared with the free space of its own directory's file system before a block is
        // taken.
        XCTAssertEqual(error["code"] as? String, "insufficient_space")
        XCTAssertTrue((error["message"] as? String ?? "").contains("free"))
        // The rest of the server carries on.
        let other = try add(["url": originURL("other.bin")])
        XCTAssertEqual(try sha256(try downloadedPath(try waitForState(other, "completed"))), otherHash)

        try runCommand("/bin/mount", ["-o", "remount,size=16m", sandbox.file("downloads/full")])
        XCTAssertEqual(try patch(big, ["state": "queued"]).status, 200)
        let done = try waitForState(big, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), bigHash)
    }

    func testDiskFullWhileWritingKeepsWhatWasWrittenForTheRetry() throws {
        try mountTmpfs("downloads/full", megabytes: 1)
        // Size unknown until the end, so nothing can be reserved: the disk fills up mid-transfer.
        let hash = try sandbox.makeRandomFile("www/stream.bin", size: 2_000_000)
        let id = try add(["url": originURL("stream.bin", "nolength=1&norange=1"), "directory": "full"])
        let failed = try waitForState(id, "failed")
        XCTAssertEqual((failed["error"] as? [String: Any])?["code"] as? String, "disk_full")
        XCTAssertEqual(try api.get("/healthz").status, 200)
        try runCommand("/bin/mount", ["-o", "remount,size=16m", sandbox.file("downloads/full")])
        XCTAssertEqual(try patch(id, ["state": "queued"]).status, 200)
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
    }
}
