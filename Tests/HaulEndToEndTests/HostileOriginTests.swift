import Foundation
import XCTest

/// Origins that lie or misbehave: every case ends in a clear state, never a crash and never a wrong file under the
/// final name.
final class HostileOriginTests: HaulTestCase {
    override var serveArguments: [String] { ["--retry-wait", "0.1", "--max-attempts", "2", "--stall-timeout", "1"] }

    private var hostile: HostileOrigin!

    override func tearDownWithError() throws {
        hostile?.stop()
        hostile = nil
        try super.tearDownWithError()
    }

    private func serve(_ respond: @escaping @Sendable (HostileOrigin.Request) -> HostileOrigin.Behaviour) throws {
        hostile = try HostileOrigin(respond: respond)
    }

    private func errorCode(_ download: [String: Any]) -> String? {
        (download["error"] as? [String: Any])?["code"] as? String
    }

    private func finalFiles() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: sandbox.file("downloads"))) ?? [])
            .filter { !$0.hasSuffix(".part") }
    }

    func testABodyShorterThanItsContentLengthNeverBecomesAFile() throws {
        let body = [UInt8](repeating: 7, count: 500)
        try serve { request in
            .send(
                HostileOrigin.reply(
                    headers: ["Content-Length: 1000", "Connection: close"],
                    body: request.method == "HEAD" ? [] : body))
        }
        let failed = try waitForState(try add(["url": hostile.baseURL + "/short.bin"]), "failed")
        XCTAssertEqual(errorCode(failed), "connection_cut", "\(failed)")
        XCTAssertEqual(finalFiles(), [])
    }

    func testABodyLongerThanItsContentLengthKeepsTheAnnouncedBytes() throws {
        let body = (0..<300).map { UInt8($0 & 0xff) }
        try serve { request in
            .send(
                HostileOrigin.reply(
                    headers: ["Content-Length: 100", "Connection: close"],
                    body: request.method == "HEAD" ? [] : body))
        }
        let done = try waitForState(try add(["url": hostile.baseURL + "/long.bin"]), "completed")
        let saved = try Data(contentsOf: URL(fileURLWithPath: try downloadedPath(done)))
        XCTAssertEqual(Array(saved), Array(body.prefix(100)))
    }

    func testIdentityIsAskedForAndAnEncodedBodyIsKeptAsSent() throws {
        // Bytes that look like gzip: Haul must neither ask for nor undo a content coding, or sizes and ranges
        // would stop meaning bytes of the file.
        let body: [UInt8] = [0x1f, 0x8b, 0x08, 0x00] + (0..<996).map { UInt8(($0 * 7) & 0xff) }
        try serve { request in
            .send(
                HostileOrigin.reply(
                    headers: [
                        "Content-Length: 1000", "Content-Encoding: gzip",
                        "Connection: close",
                    ],
                    body: request.method == "HEAD" ? [] : body))
        }
        let done = try waitForState(try add(["url": hostile.baseURL + "/enc.bin"]), "completed")
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: try downloadedPath(done)))), body)
        let asked = hostile.requests.map { $0.headers["accept-encoding"] }
        XCTAssertFalse(asked.isEmpty)
        XCTAssertTrue(asked.allSatisfy { $0 == "identity" }, "\(asked)")
    }

    func testHeadersBeyondTheLimitFailClearly() throws {
        let huge = "X-Filler: " + String(repeating: "h", count: 300_000)
        try serve { _ in
            .send(
                HostileOrigin.reply(
                    headers: [huge, "Content-Length: 10", "Connection: close"],
                    body: Array("0123456789".utf8)))
        }
        let failed = try waitForState(try add(["url": hostile.baseURL + "/headers.bin"]), "failed")
        XCTAssertEqual(errorCode(failed), "bad_response", "\(failed)")
        let message = (failed["error"] as? [String: Any])?["message"] as? String ?? ""
        XCTAssertTrue(message.contains("larger than 100 KiB"), message)
        XCTAssertFalse(message.lowercased().contains("out of memory"), message)
        XCTAssertEqual(try api.get("/healthz").status, 200)
        XCTAssertEqual(finalFiles(), [])
    }

    func testAReplyThatIsNotHTTPIsABadResponse() throws {
        try serve { _ in .send(Array("SSH-2.0-OpenSSH_9.2\r\nProtocol mismatch.\r\n".utf8)) }
        let failed = try waitForState(try add(["url": hostile.baseURL + "/ssh"]), "failed")
        XCTAssertEqual(errorCode(failed), "bad_response", "\(failed)")
        let message = (failed["error"] as? [String: Any])?["message"] as? String ?? ""
        XCTAssertTrue(message.contains("not HTTP"), message)
        XCTAssertEqual(finalFiles(), [])
    }

    func testABodyThatNeverEndsForAKnownSizeFails() throws {
        try serve { request in
            if request.method == "HEAD" {
                return .send(HostileOrigin.reply(headers: ["Content-Length: 4096", "Connection: close"]))
            }
            // A chunked body without end, although the probe said 4096 bytes.
            return .sendForever(
                HostileOrigin.reply(headers: ["Transfer-Encoding: chunked"]),
                chunk: Array("1000\r\n".utf8) + [UInt8](repeating: 1, count: 4096) + Array("\r\n".utf8))
        }
        let failed = try waitForState(try add(["url": hostile.baseURL + "/endless.bin"]), "failed", timeout: 20)
        XCTAssertEqual(errorCode(failed), "size_mismatch", "\(failed)")
        XCTAssertEqual(finalFiles(), [])
    }

    func testAServerThatAcceptsAndNeverAnswersTimesOut() throws {
        try serve { _ in .silence }
        let failed = try waitForState(try add(["url": hostile.baseURL + "/silent.bin"]), "failed")
        XCTAssertEqual(errorCode(failed), "timeout", "\(failed)")
        XCTAssertEqual(int(failed["attempts"]), 2)
        XCTAssertEqual(finalFiles(), [])
    }
}

/// A certificate that does not verify fails clearly; `insecure`, asked for per download, is the only way past it.
final class TLSVerificationTests: HaulTestCase {
    func testAnUnverifiableCertificateFailsUnlessTheDownloadSaysInsecure() throws {
        guard Nginx.available else { throw XCTSkip("nginx is not installed") }
        let (certificate, key) = try sandbox.selfSignedCertificate()
        let hash = try sandbox.makeRandomFile("www/tls.bin", size: 200_000)
        let nginx = try Nginx(
            root: sandbox.file("www"), prefix: sandbox.file("nginx"),
            tls: (certificate, key))
        defer { withExtendedLifetime(nginx) {} }
        let url = nginx.baseURL + "/tls.bin"
        XCTAssertTrue(url.hasPrefix("https://"))

        let failed = try waitForState(try add(["url": url]), "failed")
        let error = failed["error"] as? [String: Any]
        XCTAssertEqual(error?["code"] as? String, "tls_failed", "\(failed)")
        XCTAssertTrue((error?["message"] as? String ?? "").contains("certificate"), "\(failed)")
        XCTAssertEqual(failed["insecure"] as? Bool, false)

        let done = try waitForState(try add(["url": url, "insecure": true, "filename": "tls-2.bin"]), "completed")
        XCTAssertEqual(done["insecure"] as? Bool, true)
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
    }
}
