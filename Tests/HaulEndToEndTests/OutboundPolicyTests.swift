import Foundation
import XCTest

/// `--deny-private-networks`: checked on the address connected to, so neither a name nor a redirect gets around it.
final class DenyPrivateNetworksTests: HaulTestCase {
    override var serveArguments: [String] { super.serveArguments + ["--deny-private-networks"] }

    func testLoopbackByAddressAndByNameIsRefusedWithAClearCode() throws {
        try sandbox.makeRandomFile("www/a.bin", size: 1000)
        let port = origin.baseURL.split(separator: ":").last!
        for url in [originURL("a.bin"), "http://localhost:\(port)/files/a.bin"] {
            let failed = try waitForState(try add(["url": url]), "failed")
            let error = failed["error"] as? [String: Any]
            XCTAssertEqual(error?["code"] as? String, "blocked_address", "\(url): \(failed)")
            XCTAssertTrue((error?["message"] as? String ?? "").contains("loopback"), "\(failed)")
            XCTAssertEqual(int(failed["attempts"]), 1, "a refused address is not retried")
        }
        XCTAssertEqual(try originRequests().count, 0, "the origin was never contacted")
    }
}

final class AllowedNetworkRedirectTests: HaulTestCase {
    var inner: ServerProcess!

    /// The origin at 127.0.0.1 stands for a public server (an exception); 127.0.0.2 and ::1 stay private.
    override var serveArguments: [String] {
        super.serveArguments + ["--deny-private-networks", "--allow-networks", "127.0.0.1/32"]
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        inner = try otherOrigin(at: "127.0.0.2", name: "inner")
    }

    override func tearDownWithError() throws {
        inner?.stop(signal: SIGKILL)
        try super.tearDownWithError()
    }

    func testARedirectToAPrivateAddressIsRefused() throws {
        let hash = try sandbox.makeRandomFile("www/r.bin", size: 3000)
        let done = try waitForState(try add(["url": originURL("r.bin")]), "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash, "the allowed network is fetched from")

        let innerPort = inner.baseURL.split(separator: ":").last!
        for target in ["http://127.0.0.2:\(innerPort)/files/r.bin", "http://[::1]:\(innerPort)/files/r.bin"] {
            let escaped = target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let url = origin.baseURL + "/redirect-to?url=" + escaped
            let failed = try waitForState(try add(["url": url, "filename": "r-\(target.count).bin"]), "failed")
            let error = failed["error"] as? [String: Any]
            XCTAssertEqual(error?["code"] as? String, "blocked_address", "\(target): \(failed)")
        }
        XCTAssertEqual(try Client(base: inner.baseURL).get("/_requests").text, "[]", "nothing reached 127.0.0.2")
    }

    func testOnlyHttpAndHttpsAreFollowed() throws {
        for target in ["file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://127.0.0.1/x"] {
            let escaped = target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let failed = try waitForState(
                try add([
                    "url": origin.baseURL + "/redirect-to?url=" + escaped,
                    "filename": "s\(target.count).bin",
                ]), "failed")
            let error = failed["error"] as? [String: Any]
            XCTAssertEqual(error?["code"] as? String, "unsupported_scheme", "\(target): \(failed)")
        }
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: sandbox.file("downloads"))
                .filter { !$0.hasSuffix(".part") }, [])
    }
}
