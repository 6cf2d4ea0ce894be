import Foundation
import XCTest

/// Whole downloads against TestOrigin and nginx: the file's bytes, its name, and the resource's fields.
final class DownloadTests: HaulTestCase {
    func testDownloadFromTestOriginCompletesWithTheSourceBytes() throws {
        let hash = try sandbox.makeRandomFile("www/data.bin", size: 3_000_017)
        let id = try add(["url": originURL("data.bin")])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertEqual(done["filename"] as? String, "data.bin")
        XCTAssertEqual(done["path"] as? String, "data.bin")
        XCTAssertEqual(int(done["total_bytes"]), 3_000_017)
        XCTAssertEqual(int(done["received_bytes"]), 3_000_017)
        XCTAssertEqual((done["progress"] as? NSNumber)?.doubleValue, 1)
        XCTAssertEqual(done["resumable"] as? Bool, true)
        XCTAssertEqual(done["final_url"] as? String, originURL("data.bin"))
        XCTAssertNotNil(done["completed_at"] as? String)
        let segments = try XCTUnwrap(done["segments"] as? [[String: Any]])
        XCTAssertEqual(segments.count, 1)
        XCTAssertEqual(int(segments.first?["end"]), 3_000_016)
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.file("downloads/data.bin.part")))
        // One request: a GET from byte 0, whose headers were the probe and whose body is the file.
        let requests = try originRequests().map { "\($0["method"] as? String ?? "") \($0["range"] as? String ?? "-")" }
        XCTAssertEqual(requests, ["GET bytes=0-"])
    }

    func testDownloadFromNginx() throws {
        try XCTSkipUnless(Nginx.available, "nginx is not installed")
        let hash = try sandbox.makeRandomFile("www/nginx.bin", size: 5_242_880)
        let nginx = try Nginx(root: sandbox.file("www"), prefix: sandbox.file("nginx"))
        let id = try add(["url": nginx.baseURL + "/nginx.bin"])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertEqual(done["resumable"] as? Bool, true)
        XCTAssertEqual(int(done["total_bytes"]), 5_242_880)
    }

    func testProgressIsReportedWhileDownloading() throws {
        let hash = try sandbox.makeRandomFile("www/slow.bin", size: 1_500_000)
        let id = try add(["url": originURL("slow.bin", "rate=600000")])
        var seen: [String: Any] = [:]
        try waitFor("a speed to be measured") {
            seen = try download(id)
            return (seen["speed"] as? NSNumber)?.doubleValue ?? 0 > 0
        }
        XCTAssertEqual(seen["state"] as? String, "downloading")
        XCTAssertEqual(int(seen["active_connections"]), 1)
        XCTAssertNotNil(seen["eta_seconds"] as? NSNumber)
        let progress = (seen["progress"] as? NSNumber)?.doubleValue ?? -1
        XCTAssertGreaterThan(progress, 0)
        XCTAssertLessThan(progress, 1)
        // Roughly the origin's pace, far from zero and from loopback speed.
        let speed = (seen["speed"] as? NSNumber)?.doubleValue ?? 0
        XCTAssertGreaterThan(speed, 100_000)
        XCTAssertLessThan(speed, 3_000_000)
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertEqual(int(done["active_connections"]), 0)
    }

    func testEmptyFile() throws {
        let hash = try sandbox.makeRandomFile("www/empty.txt", size: 0)
        let id = try add(["url": originURL("empty.txt")])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertEqual(int(done["total_bytes"]), 0)
    }

    func testRedirectsAreFollowedAndTheFinalURLRecorded() throws {
        let hash = try sandbox.makeRandomFile("www/moved.bin", size: 100_000)
        let id = try add(["url": origin.baseURL + "/redirect/3/files/moved.bin"])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertEqual(done["final_url"] as? String, originURL("moved.bin"))
        XCTAssertEqual(done["filename"] as? String, "moved.bin")
    }

    func testAServerThatRefusesHeadIsNeverAskedOne() throws {
        // Presigned URLs are signed for GET only, and some servers refuse HEAD: the probe is the GET itself.
        let hash = try sandbox.makeRandomFile("www/nohead.bin", size: 200_000)
        let id = try add(["url": originURL("nohead.bin", "nohead=1")])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertEqual(done["resumable"] as? Bool, true)
        XCTAssertEqual(try originRequests().map { $0["method"] as? String }, ["GET"])
    }

    func testUnknownLengthWithoutRangesDownloadsAndIsNotResumable() throws {
        let hash = try sandbox.makeRandomFile("www/stream.bin", size: 300_000)
        let id = try add(["url": originURL("stream.bin", "nolength=1&norange=1")])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertEqual(int(done["total_bytes"]), 300_000, "known once every byte is there")
        XCTAssertEqual(done["resumable"] as? Bool, false)
    }

    func testAChunkedBodyKeepsTheSizeTheRangedProbeFound() throws {
        // HEAD gives no length, the one-byte ranged GET's Content-Range does; the body then comes chunked.
        let hash = try sandbox.makeRandomFile("www/chunked.bin", size: 300_000)
        let id = try add(["url": originURL("chunked.bin", "nolength=1&rate=300000")])
        try waitFor("the transfer to start") { int(try download(id)["received_bytes"]) > 0 }
        XCTAssertEqual(int(try download(id)["total_bytes"]), 300_000)
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertEqual(done["resumable"] as? Bool, true)
    }

    func testContentDispositionNamesTheFile() throws {
        let hash = try sandbox.makeRandomFile("www/opaque", size: 1000)
        let disposition = "attachment; filename=\"fallback.txt\"; filename*=UTF-8''na%C3%AFve%20r%C3%A9sum%C3%A9.txt"
        let encoded = disposition.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let id = try add(["url": originURL("opaque", "disposition=\(encoded)")])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(done["filename"] as? String, "naïve résumé.txt")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
    }

    func testHostileContentDispositionStaysInsideTheDownloadDirectory() throws {
        try sandbox.makeRandomFile("www/evil", size: 10)
        let encoded = "attachment; filename=\"../../escape.sh\"".addingPercentEncoding(
            withAllowedCharacters: .alphanumerics)!
        let id = try add(["url": originURL("evil", "disposition=\(encoded)")])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(done["filename"] as? String, "escape.sh")
        XCTAssertTrue(FileManager.default.fileExists(atPath: sandbox.file("downloads/escape.sh")))
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.file("escape.sh")))
    }

    func testAnExistingFileIsNeverOverwritten() throws {
        let hash = try sandbox.makeRandomFile("www/same.bin", size: 50_000)
        let existing = try sandbox.makeRandomFile("downloads/same.bin", size: 10)
        let id = try add(["url": originURL("same.bin")])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(done["filename"] as? String, "same (1).bin")
        XCTAssertEqual(try sha256(sandbox.file("downloads/same (1).bin")), hash)
        XCTAssertEqual(try sha256(sandbox.file("downloads/same.bin")), existing)
    }

    func testChosenFilenameAndDirectory() throws {
        let hash = try sandbox.makeRandomFile("www/x.bin", size: 4096)
        let id = try add(["url": originURL("x.bin"), "filename": "chosen.dat", "directory": "sub/dir"])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(done["path"] as? String, "sub/dir/chosen.dat")
        XCTAssertEqual(try sha256(sandbox.file("downloads/sub/dir/chosen.dat")), hash)
    }

    func testSameURLAndDestinationWhileUnfinishedAnswersTheExistingDownload() throws {
        try sandbox.makeRandomFile("www/dup.bin", size: 1000)
        let id = try add(["url": originURL("dup.bin"), "start_paused": true])
        let again = try api.request("POST", "/downloads", json: ["url": originURL("dup.bin")])
        XCTAssertEqual(again.status, 200)
        XCTAssertEqual(again.json["id"] as? String, id)
        XCTAssertEqual(again.header("Location"), "/downloads/\(id)")
    }

    func testListFiltersByStateAndPages() throws {
        try sandbox.makeRandomFile("www/l.bin", size: 1000)
        var ids: [String] = []
        for n in 0..<3 {
            ids.append(try add(["url": originURL("l.bin"), "filename": "l\(n).bin", "start_paused": true]))
        }
        let page1 = try api.get("/downloads?state=paused&limit=2")
        XCTAssertEqual(page1.status, 200)
        let first = try XCTUnwrap(page1.json["downloads"] as? [[String: Any]])
        XCTAssertEqual(first.compactMap { $0["id"] as? String }, Array(ids.prefix(2)))
        let cursor = try XCTUnwrap(page1.json["next_cursor"] as? String)
        let page2 = try api.get("/downloads?state=paused&limit=2&cursor=\(cursor)")
        let second = try XCTUnwrap(page2.json["downloads"] as? [[String: Any]])
        XCTAssertEqual(second.compactMap { $0["id"] as? String }, [ids[2]])
        XCTAssertTrue(page2.json["next_cursor"] is NSNull)
        let none = try api.get("/downloads?state=completed,failed")
        XCTAssertEqual((none.json["downloads"] as? [Any])?.count, 0)
    }

    func testSecretsAreSentToTheOriginButNeverEchoed() throws {
        try sandbox.makeRandomFile("www/secret.bin", size: 1000)
        let url = origin.baseURL.replacingOccurrences(of: "http://", with: "http://user:hunter2@") + "/files/secret.bin"
        let id = try add(["url": url, "headers": ["Cookie": "session=s3cret", "X-Trace": "t1"]])
        _ = try waitForState(id, "completed")
        let text = try api.get("/downloads/\(id)").text + (try api.get("/downloads").text)
        XCTAssertFalse(text.contains("hunter2"))
        XCTAssertFalse(text.contains("s3cret"))
        let get = try XCTUnwrap(try originRequests().last(where: { $0["method"] as? String == "GET" }))
        let headers = try XCTUnwrap(get["headers"] as? [String: String])
        XCTAssertEqual(headers["authorization"], "Basic " + Data("user:hunter2".utf8).base64EncodedString())
        XCTAssertEqual(headers["x-trace"], "t1")
        XCTAssertEqual(headers["cookie"], "session=s3cret")
    }
}

/// With one slot, downloads wait their turn in order.
final class QueueTests: HaulTestCase {
    override var serveArguments: [String] { super.serveArguments + ["--max-active", "1"] }

    func testAtMostMaxActiveRunAndTheRestWaitInOrder() throws {
        let hashA = try sandbox.makeRandomFile("www/a.bin", size: 400_000)
        let hashB = try sandbox.makeRandomFile("www/b.bin", size: 100_000)
        let a = try add(["url": originURL("a.bin", "rate=400000")])
        let b = try add(["url": originURL("b.bin")])
        _ = try waitForState(a, "downloading")
        XCTAssertEqual(try download(b)["state"] as? String, "queued")
        let doneA = try waitForState(a, "completed")
        let doneB = try waitForState(b, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(doneA)), hashA)
        XCTAssertEqual(try sha256(try downloadedPath(doneB)), hashB)
        let startB = try XCTUnwrap(doneB["started_at"] as? String)
        let endA = try XCTUnwrap(doneA["completed_at"] as? String)
        XCTAssertGreaterThanOrEqual(startB, endA)
    }
}
