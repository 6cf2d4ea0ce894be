import Foundation
import XCTest

/// Pause, resume and cancel mid-transfer, against origins that honour, ignore or outwit Range.
final class PauseResumeTests: HaulTestCase {
    /// Waits until at least `bytes` are received, pauses, and checks the transfer really stopped.
    private func pauseAfter(_ id: String, bytes: Int64) throws -> Int64 {
        try waitFor("\(bytes) bytes received") { int(try download(id)["received_bytes"]) >= bytes }
        let paused = try patch(id, ["state": "paused"])
        XCTAssertEqual(paused.status, 200, paused.text)
        XCTAssertEqual(paused.json["state"] as? String, "paused")
        try waitFor("the origin to see the connection closed") { try originActiveStreams() == 0 }
        // No connection is left to bring a byte: what is counted now stays.
        let received = int(try download(id)["received_bytes"])
        XCTAssertEqual(int(try download(id)["received_bytes"]), received, "bytes kept arriving after the pause")
        XCTAssertEqual(try originActiveStreams(), 0)
        return received
    }

    func testPauseStopsTheTransferAndResumeContinuesWithIfRange() throws {
        let size = 2_000_000
        let hash = try sandbox.makeRandomFile("www/big.bin", size: size)
        let id = try add(["url": originURL("big.bin", "rate=1500000")])
        let received = try pauseAfter(id, bytes: 300_000)
        XCTAssertLessThan(received, Int64(size))
        let part = sandbox.file("downloads/big.bin.part")
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: part)[.size] as? Int64, received)

        let resumed = try patch(id, ["state": "queued"])
        XCTAssertEqual(resumed.status, 200, resumed.text)
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)

        let gets = try originRequests().filter { $0["method"] as? String == "GET" }
        let last = try XCTUnwrap(gets.last)
        XCTAssertEqual(last["range"] as? String, "bytes=\(received)-")
        XCTAssertNotNil(last["if_range"] as? String, "a resumed request must carry If-Range")
        XCTAssertEqual(last["status"] as? Int, 206)
    }

    func testCancelStopsTheTransferAndDeletesThePartFile() throws {
        try sandbox.makeRandomFile("www/cancel.bin", size: 2_000_000)
        let id = try add(["url": originURL("cancel.bin", "rate=1000000")])
        try waitFor("bytes to arrive") { int(try download(id)["received_bytes"]) > 100_000 }
        XCTAssertTrue(FileManager.default.fileExists(atPath: sandbox.file("downloads/cancel.bin.part")))
        let deleted = try api.request("DELETE", "/downloads/\(id)")
        XCTAssertEqual(deleted.status, 204)
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.file("downloads/cancel.bin.part")))
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.file("downloads/cancel.bin")))
        XCTAssertEqual(try api.get("/downloads/\(id)").status, 404)
        try waitFor("the origin to see the connection closed") { try originActiveStreams() == 0 }
    }

    func testDeleteWithDeleteFileRemovesTheFinishedFile() throws {
        try sandbox.makeRandomFile("www/keep.bin", size: 1000)
        let first = try add(["url": originURL("keep.bin")])
        _ = try waitForState(first, "completed")
        XCTAssertEqual(try api.request("DELETE", "/downloads/\(first)").status, 204)
        XCTAssertTrue(FileManager.default.fileExists(atPath: sandbox.file("downloads/keep.bin")), "kept by default")
        let second = try add(["url": originURL("keep.bin"), "filename": "gone.bin"])
        _ = try waitForState(second, "completed")
        XCTAssertEqual(try api.request("DELETE", "/downloads/\(second)?delete_file=true").status, 204)
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.file("downloads/gone.bin")))
    }

    func testAFileChangedWhilePausedIsFetchedAgainFromTheStart() throws {
        try sandbox.makeRandomFile("www/changing.bin", size: 1_500_000)
        let id = try add(["url": originURL("changing.bin", "rate=1000000")])
        let received = try pauseAfter(id, bytes: 200_000)
        XCTAssertGreaterThan(received, 0)
        // Same size, new bytes and a new ETag (a new file: another inode and modification time).
        let newHash = try sandbox.makeRandomFile("www/changing.bin", size: 1_500_000)
        XCTAssertEqual(try patch(id, ["state": "queued"]).status, 200)
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), newHash)
        // The resume's ranged GET met the new version (If-Range did not match) and got it whole, from byte 0 ...
        let gets = try originRequests().filter { $0["method"] as? String == "GET" }
        let restart = try XCTUnwrap(
            gets.firstIndex { $0["range"] is String && $0["status"] as? Int == 200 },
            "the new version must be fetched whole: \(gets)")
        // ... and whatever came after it were ranges of the new version only (SegmentedTests shows them split).
        for get in gets[(restart + 1)...] {
            XCTAssertEqual(get["status"] as? Int, 206, "\(get)")
            XCTAssertEqual(get["if_range"] as? String, gets[restart]["etag_sent"] as? String, "\(get)")
        }
    }

    func testIfRangeCatchesAChangeMadeWhilePaused() throws {
        // Request 1 (the first GET, paused) sees the old file; request 2, the resume's ranged GET, meets a new
        // version. No probe comes between: If-Range tells, and the server then sends the whole new file.
        try sandbox.makeRandomFile("www/old.bin", size: 1_000_000)
        let newHash = try sandbox.makeRandomFile("www/new.bin", size: 1_000_000)
        // One connection: a slow moment (under a sanitizer) must not make another take part of the new body.
        let id = try add(["url": originURL("old.bin", "swap=new.bin&after=1&rate=800000"), "connections": 1])
        let received = try pauseAfter(id, bytes: 100_000)
        XCTAssertEqual(try patch(id, ["state": "queued"]).status, 200)
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), newHash)
        let requests = try originRequests()
        XCTAssertEqual(requests.map { $0["method"] as? String ?? "" }, ["GET", "GET"])
        XCTAssertEqual(requests[1]["range"] as? String, "bytes=\(received)-")
        XCTAssertEqual(requests[1]["if_range"] as? String, requests[0]["etag_sent"] as? String)
        XCTAssertEqual(requests[1]["status"] as? Int, 200)
    }

    func testAServerThatIgnoresRangeIsRestartedFromByteZero() throws {
        // The origin advertises ranges but answers every ranged request with 200 and the whole file.
        let hash = try sandbox.makeRandomFile("www/liar.bin", size: 1_500_000)
        let id = try add(["url": originURL("liar.bin", "ignorerange=1&rate=1000000")])
        _ = try pauseAfter(id, bytes: 200_000)
        XCTAssertEqual(try patch(id, ["state": "queued"]).status, 200)
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        let last = try XCTUnwrap(try originRequests().last(where: { $0["method"] as? String == "GET" }))
        XCTAssertNotNil(last["range"] as? String, "the resume asked for a range")
        XCTAssertEqual(last["status"] as? Int, 200, "and got the whole file, which was taken from byte 0")
    }

    func testAServerWithoutRangesIsNotResumableAndRestartsAfterAPause() throws {
        let hash = try sandbox.makeRandomFile("www/plain.bin", size: 1_000_000)
        let id = try add(["url": originURL("plain.bin", "norange=1&rate=1000000")])
        _ = try pauseAfter(id, bytes: 100_000)
        XCTAssertEqual(try download(id)["resumable"] as? Bool, false)
        XCTAssertEqual(try patch(id, ["state": "queued"]).status, 200)
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        let last = try XCTUnwrap(try originRequests().last(where: { $0["method"] as? String == "GET" }))
        XCTAssertTrue(
            last["range"] is NSNull || last["range"] as? String == "bytes=0-",
            "nothing to resume from: asked again from byte 0")
        XCTAssertEqual(last["status"] as? Int, 200)
    }

    func testPausingBeforeTheStartAndPatchingPriority() throws {
        let hash = try sandbox.makeRandomFile("www/later.bin", size: 10_000)
        let id = try add(["url": originURL("later.bin"), "start_paused": true, "priority": 5])
        let paused = try download(id)
        XCTAssertEqual(paused["state"] as? String, "paused")
        XCTAssertEqual(int(paused["priority"]), 5)
        XCTAssertEqual(try originRequests().count, 0, "a paused download does not touch the origin")
        let changed = try patch(id, ["priority": -2, "max_speed": 1_000_000])
        XCTAssertEqual(int(changed.json["priority"]), -2)
        XCTAssertEqual(int(changed.json["max_speed"]), 1_000_000)
        XCTAssertEqual(try patch(id, ["state": "queued"]).status, 200)
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
    }
}
