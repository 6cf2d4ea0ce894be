import Foundation
import XCTest

/// HTTP/2 against nginx on loopback TLS: the segments of one download are streams of one connection where the
/// origin offers h2 by ALPN, and separate HTTP/1.1 connections where it does not.
final class HTTP2Tests: HaulTestCase {
    private func tlsOrigin(http2: Bool, name: String) throws -> Nginx {
        guard Nginx.available else { throw XCTSkip("nginx is not installed") }
        return try Nginx(
            root: sandbox.file("www"), prefix: sandbox.file(name), tls: try sandbox.selfSignedCertificate(),
            http2: http2)
    }

    func testTheSegmentsOfADownloadAreStreamsOfOneHTTP2Connection() throws {
        let hash = try sandbox.makeRandomFile("www/h2.bin", size: 24 << 20)
        let nginx = try tlsOrigin(http2: true, name: "nginx-h2")
        defer { withExtendedLifetime(nginx) {} }
        let done = try waitForState(
            try add(["url": nginx.baseURL + "/h2.bin", "insecure": true, "connections": 8]),
            "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        let gets = nginx.requests().filter { $0.status == 206 || $0.status == 200 }
        XCTAssertGreaterThan(Set(gets.map(\.range)).count, 2, "the file was fetched in segments: \(gets)")
        XCTAssertEqual(Set(gets.map(\.proto)), ["HTTP/2.0"])
        XCTAssertEqual(Set(gets.map(\.connection)).count, 1, "one connection for every segment: \(gets)")
    }

    func testAnOriginWithoutHTTP2GetsAConnectionPerSegment() throws {
        let hash = try sandbox.makeRandomFile("www/h1.bin", size: 24 << 20)
        let nginx = try tlsOrigin(http2: false, name: "nginx-h1")
        defer { withExtendedLifetime(nginx) {} }
        let done = try waitForState(
            try add(["url": nginx.baseURL + "/h1.bin", "insecure": true, "connections": 8]),
            "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        let gets = nginx.requests().filter { $0.status == 206 || $0.status == 200 }
        XCTAssertEqual(Set(gets.map(\.proto)), ["HTTP/1.1"])
        XCTAssertGreaterThan(Set(gets.map(\.connection)).count, 2, "segments on connections of their own: \(gets)")
    }
}
