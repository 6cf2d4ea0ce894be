import Foundation
import XCTest

/// Origins that fail: each download ends in the right state with the right file or a clear, stable error.
final class FailureTests: HaulTestCase {
    override var serveArguments: [String] { super.serveArguments + ["--stall-timeout", "1"] }

    func testNotFoundFailsWithHTTP404() throws {
        let id = try add(["url": originURL("missing.bin")])
        let failed = try waitForState(id, "failed")
        let error = try XCTUnwrap(failed["error"] as? [String: Any])
        XCTAssertEqual(error["code"] as? String, "http_404")
        XCTAssertTrue((error["message"] as? String ?? "").contains("404"))
        XCTAssertEqual(
            try originRequests().filter { $0["method"] as? String == "GET" }.count, 1,
            "a 404 is not retried")
    }

    func testRedirectLoopFailsWithTooManyRedirects() throws {
        let id = try add(["url": origin.baseURL + "/loop"])
        let failed = try waitForState(id, "failed")
        XCTAssertEqual((failed["error"] as? [String: Any])?["code"] as? String, "too_many_redirects")
        XCTAssertLessThanOrEqual(try originRequests().count, 2 * 12, "redirects are bounded")
    }

    func testACutBodyIsResumedUntilComplete() throws {
        let hash = try sandbox.makeRandomFile("www/cut.bin", size: 1_000_000)
        // Every reply stops after 400 kB: three attempts, each resuming where the last one was cut.
        let id = try add(["url": originURL("cut.bin", "cut=400000")])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertEqual(int(done["attempts"]), 3)
        let ranges = try originRequests().filter { $0["method"] as? String == "GET" }.map { $0["range"] as? String }
        XCTAssertEqual(ranges, ["bytes=0-", "bytes=400000-", "bytes=800000-"])
    }

    func testACutBodyWithoutValidatorsFailsWithConnectionCut() throws {
        try sandbox.makeRandomFile("www/cut2.bin", size: 1_000_000)
        // Without ETag or Last-Modified nothing proves the file unchanged, so every attempt starts over.
        let id = try add(["url": originURL("cut2.bin", "cut=300000&novalidator=1")])
        let failed = try waitForState(id, "failed")
        XCTAssertEqual((failed["error"] as? [String: Any])?["code"] as? String, "connection_cut")
        XCTAssertEqual(int(failed["attempts"]), 4)
        XCTAssertEqual(failed["resumable"] as? Bool, false)
        let gets = try originRequests().filter { $0["method"] as? String == "GET" }
        // Every attempt asks for the file from byte 0 (the first as the range `0-`, which is the whole file).
        XCTAssertTrue(
            gets.allSatisfy { $0["range"] is NSNull || $0["range"] as? String == "bytes=0-" },
            "never resumed without a validator: \(gets.map { $0["range"] ?? "" })")
    }

    func testAStalledTransferTimesOutAndResumes() throws {
        let hash = try sandbox.makeRandomFile("www/stall.bin", size: 250_000)
        // Every reply goes quiet after 100 kB; after a second of silence the transfer is cut and resumed.
        let id = try add(["url": originURL("stall.bin", "stall=100000")])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertEqual(int(done["attempts"]), 3)
        let ranges = try originRequests().filter { $0["method"] as? String == "GET" }.map { $0["range"] as? String }
        XCTAssertEqual(ranges, ["bytes=0-", "bytes=100000-", "bytes=200000-"])
    }

    func testAnUnwritableDestinationFailsWithWriteFailed() throws {
        try sandbox.makeRandomFile("www/w.bin", size: 1000)
        // The destination directory's path is taken by a file.
        try sandbox.makeRandomFile("downloads/blocker", size: 1)
        let id = try add(["url": originURL("w.bin"), "directory": "blocker/sub"])
        let failed = try waitForState(id, "failed")
        let error = try XCTUnwrap(failed["error"] as? [String: Any])
        XCTAssertEqual(error["code"] as? String, "write_failed")
        XCTAssertTrue((error["message"] as? String ?? "").contains("blocker"))
        XCTAssertEqual(try api.get("/healthz").status, 200)
    }

    func testTransientErrorsAreRetried() throws {
        let hash = try sandbox.makeRandomFile("www/flaky.bin", size: 50_000)
        let id = try add(["url": originURL("flaky.bin", "fail=2&status=503")])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
    }

    func testPersistentServerErrorFailsAfterItsAttempts() throws {
        let id = try add(["url": originURL("x.bin", "status=500")])
        let failed = try waitForState(id, "failed")
        XCTAssertEqual((failed["error"] as? [String: Any])?["code"] as? String, "http_500")
        XCTAssertEqual(int(failed["attempts"]), 4)
        // A failed download can be retried.
        XCTAssertEqual(try patch(id, ["state": "queued"]).status, 200)
    }

    func testTLSHandshakeFailureFailsWithTLSFailed() throws {
        // The origin speaks plain HTTP, so the TLS handshake cannot succeed.
        let url = origin.baseURL.replacingOccurrences(of: "http://", with: "https://") + "/files/x.bin"
        let id = try add(["url": url])
        let failed = try waitForState(id, "failed")
        XCTAssertEqual((failed["error"] as? [String: Any])?["code"] as? String, "tls_failed")
        XCTAssertEqual(int(failed["attempts"]), 1, "a TLS failure is not retried")
    }

    func testConnectionRefusedFailsWithConnectFailed() throws {
        let port = try Nginx.freePort()
        let id = try add(["url": "http://127.0.0.1:\(port)/nothing-listens"])
        let failed = try waitForState(id, "failed")
        XCTAssertEqual((failed["error"] as? [String: Any])?["code"] as? String, "connect_failed")
    }
}
