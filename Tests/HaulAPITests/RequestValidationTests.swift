import Foundation
import HaulCore
import HaulLoop
import XCTest
@testable import HaulAPI

/// What a client sends is checked before anything is stored or fetched: header fields against RFC 9110's grammar,
/// the Host header, the body's media type. Tables of hostile input, each with the answer it must get.
final class RequestValidationTests: XCTestCase {
    private func post(
        _ body: [String: Any], contentType: String? = "application/json"
    ) throws
        -> (download: NewDownload?, status: Int)
    {
        let data = try JSONSerialization.data(withJSONObject: body)
        var headers: [(name: String, value: String)] = []
        if let contentType { headers.append(("Content-Type", contentType)) }
        return API.decodeNewDownload(
            HTTPRequest(
                method: "POST", target: "/downloads", headers: headers,
                body: Array(data)))
    }

    private let url = "http://127.0.0.1:9/f.bin"

    /// Three letters or digits per number below 62^3: distinct names for a body of 100,000 members under 1 MiB.
    private func shortName(_ n: Int) -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        return String([alphabet[n / 3844], alphabet[n / 62 % 62], alphabet[n % 62]])
    }

    func testHeaderValuesWithLineBreaksOrControlsAreRefused() throws {
        let refused: [[String: String]] = [
            ["X-Evil": "a\r\nHost: evil.example"],
            ["X-Evil": "a\nGET /smuggled HTTP/1.1"],
            ["X-Evil": "a\rb"],
            ["X-Evil": "a\u{0}b"],
            ["X-Evil": "a\u{1}b"],
            ["X-Evil": "a\u{7f}b"],
            ["X-Evil": "a\u{1b}[31m"],
            ["X Evil": "name with a space"],
            ["X-Evil:": "colon in the name"],
            ["": "empty name"],
            ["X-Évil": "non-token name"],
            ["X-Evil\r\nHost": "x"],
        ]
        for headers in refused {
            let (download, status) = try post(["url": url, "headers": headers])
            XCTAssertEqual(status, 422, "\(headers)")
            XCTAssertNil(download, "\(headers)")
        }
    }

    func testReservedNamesAreRefusedWhateverTheirCase() throws {
        for name in [
            "Host", "HOST", "host", "Range", "rAnGe", "If-Range", "Content-Length", "Transfer-Encoding",
            "Connection", "Accept-Encoding", "TE", "Upgrade", "Keep-Alive", "Expect", "Trailer",
        ] {
            let (_, status) = try post(["url": url, "headers": [name: "x"]])
            XCTAssertEqual(status, 422, name)
        }
        let (_, twice) = try post(["url": url, "headers": ["X-Token": "a", "x-token": "b"]])
        XCTAssertEqual(twice, 422, "one name given twice")
    }

    func testValidHeadersPassWithOptionalWhitespaceTrimmed() throws {
        let (download, status) = try post([
            "url": url,
            "headers": [
                "Authorization": "Bearer abc.def", "Cookie": "a=1; b=2", "X-Empty": "", "X-Tab": "a\tb",
                "X-Spaced": "  padded  ", "X-Utf8": "café",
            ],
        ])
        XCTAssertEqual(status, 201)
        let headers = Dictionary(uniqueKeysWithValues: (download?.headers ?? []).map { ($0.name, $0.value) })
        XCTAssertEqual(headers["X-Spaced"], "padded")
        XCTAssertEqual(headers["X-Empty"], "")
        XCTAssertEqual(headers["X-Tab"], "a\tb")
        XCTAssertEqual(headers["X-Utf8"], "café")
    }

    func testTheNumberAndSizeOfHeadersAreCapped() throws {
        let sixtyFour = Dictionary(uniqueKeysWithValues: (0..<64).map { ("X-H\($0)", "v") })
        XCTAssertEqual(try post(["url": url, "headers": sixtyFour]).status, 201)
        let sixtyFive = Dictionary(uniqueKeysWithValues: (0..<65).map { ("X-H\($0)", "v") })
        XCTAssertEqual(try post(["url": url, "headers": sixtyFive]).status, 422)
        let big = ["X-Big": String(repeating: "b", count: 16 * 1024)]
        XCTAssertEqual(try post(["url": url, "headers": big]).status, 422)
        let fits = ["X-Big": String(repeating: "b", count: 16 * 1024 - 5)]
        XCTAssertEqual(try post(["url": url, "headers": fits]).status, 201)
    }

    func testAHundredThousandHeadersGetAShortAnswer() throws {
        // Written by hand: compact enough to stay under the 1 MiB body limit.
        let many = (0..<100_000).map { "\"\(shortName($0))\":\"\"" }.joined(separator: ",")
        let body = Array("{\"url\":\"\(url)\",\"headers\":{\(many)}}".utf8)
        XCTAssertLessThan(body.count, RequestBody.maxBytes)
        let request = HTTPRequest(
            method: "POST", target: "/downloads", headers: [("Content-Type", "application/json")],
            body: body)
        XCTAssertEqual(API.decodeNewDownload(request).status, 422)
        // Unknown members by the hundred thousand: the answer lists a bounded number of them.
        // ("url" is one of the generated names: a name given twice is refused before its fields are read.)
        var members = (0..<100_000).map(shortName).filter { $0 != "url" }.map { "\"\($0)\":1" }
        members.append("\"url\": \"\(url)\"")
        let unknown = HTTPRequest(
            method: "POST", target: "/downloads",
            headers: [("Content-Type", "application/json")],
            body: Array("{\(members.joined(separator: ","))}".utf8))
        do {
            _ = try API.newDownload(from: unknown)
            XCTFail("accepted")
        } catch {
            XCTAssertEqual(error.status, 422)
            XCTAssertLessThanOrEqual(error.fieldErrors.count, RequestBody.maxListedErrors + 1)
            XCTAssertLessThan(error.response(instance: "/downloads").body.count, 16 * 1024)
        }
    }

    func testOnlyApplicationJSONIsABody() throws {
        for type in ["application/json", "application/json; charset=utf-8", "Application/JSON", "application/json;"] {
            XCTAssertEqual(try post(["url": url], contentType: type).status, 201, type)
        }
        for type: String? in [
            nil, "application/jsonx", "application/json-patch+json", "text/plain",
            "application/x-www-form-urlencoded", "application/vnd.api+json", "json", "",
        ] {
            XCTAssertEqual(try post(["url": url], contentType: type).status, 415, type ?? "none")
        }
    }

    func testHostHeadersAreReadStrictly() {
        let accepted: [(String, String, Int?)] = [
            ("127.0.0.1:8080", "127.0.0.1", 8080), ("localhost", "localhost", nil), ("LOCALHOST:1", "localhost", 1),
            ("[::1]:8080", "[::1]", 8080), ("[::1]", "[::1]", nil), ("haul.lan:", "haul.lan", nil),
            ("my_host.example", "my_host.example", nil),
        ]
        for (value, name, port) in accepted {
            let parsed = HostHeader(value)
            XCTAssertEqual(parsed?.name, name, value)
            XCTAssertEqual(parsed?.port, port, value)
        }
        for value in [
            "127.0.0.1:8080@evil.com", "a, b", "", " localhost", "localhost ", "evil.com#127.0.0.1",
            "127.0.0.1:99999", "127.0.0.1:80:80", "[::1", "[]", "[evil.com]", "host/path", "h%2fst",
            "127.0.0.1:8o", "user@127.0.0.1",
        ] {
            XCTAssertNil(HostHeader(value), value)
        }
    }

    func testRequestsWithoutOneGoodHostAreRefused() {
        func problem(_ headers: [(String, String)], version: Int = 11) -> String? {
            HostHeader.problem(
                in: HTTPRequest(
                    method: "GET", target: "/stats",
                    headers: headers.map { (name: $0.0, value: $0.1) }, version: version))
        }
        XCTAssertNil(problem([("Host", "127.0.0.1:8080")]))
        XCTAssertNotNil(problem([]), "HTTP/1.1 requires Host")
        XCTAssertNil(problem([], version: 10), "HTTP/1.0 may omit it")
        XCTAssertNotNil(problem([("Host", "127.0.0.1"), ("host", "127.0.0.1")]), "two Host headers")
        XCTAssertNotNil(problem([("Host", "127.0.0.1:8080@evil.com")]))
    }
}
