import HaulCore
import HaulLoop
import XCTest

/// The field grammar guards every header on its way to curl, whoever built the request: a client's stored header,
/// an origin's ETag going back as If-Range.
final class HTTPFieldTests: XCTestCase {
    func testTokensAndValues() {
        for name in ["X-Token", "Cookie", "a", "!#$%&'*+-.^_`|~09azAZ"] { XCTAssertTrue(HTTPField.isToken(name), name) }
        for name in ["", "X Token", "X:Token", "X-Tökén", "X\r\nHost", "(x)", "a/b", "\"q\""] {
            XCTAssertFalse(HTTPField.isToken(name), name)
        }
        for value in ["", "plain", "a\tb", "café", "quoted \"x\"; y=1"] {
            XCTAssertTrue(HTTPField.isValue(value), value)
        }
        for value in ["a\r\nb", "a\nb", "a\rb", "a\u{0}b", "a\u{7f}", "\u{1b}[1m", " lead", "trail ", "\t"] {
            XCTAssertFalse(HTTPField.isValue(value), value)
        }
        XCTAssertEqual(HTTPField.line(name: "X-Empty", value: ""), "X-Empty;")
        XCTAssertEqual(HTTPField.line(name: "X-A", value: "1"), "X-A: 1")
        XCTAssertNil(HTTPField.line(name: "X-A", value: "1\r\nHost: evil"))
    }

    func testATransferRefusesAHeaderThatBreaksTheGrammar() {
        var request = TransferRequest(url: "http://127.0.0.1:9/x")
        request.headers = [("X-A", "1\r\nHost: evil.example")]
        XCTAssertThrowsError(try Transfer(request))
        request.headers = [("Bad Name", "1")]
        XCTAssertThrowsError(try Transfer(request))
        request.headers = [("X-A", "1")]
        request.ifRange = "\"abc\"\r\nX-Injected: 1"
        XCTAssertThrowsError(try Transfer(request))
        request.ifRange = "\"abc\""
        XCTAssertNoThrow(try Transfer(request))
    }

    func testValidatorsFromAnOriginAreKeptOnlyWhenTheyAreValidFields() {
        XCTAssertEqual(Probe.strongETag("\"abc-1\""), "\"abc-1\"")
        XCTAssertEqual(Probe.strongETag("  \"abc\" "), "\"abc\"")
        XCTAssertNil(Probe.strongETag("W/\"abc\""))
        XCTAssertNil(Probe.strongETag("\"ab\rX-Injected: 1\""))
        XCTAssertNil(Probe.strongETag("\"a\"b\""))
        XCTAssertNil(Probe.strongETag("\"a\u{0}\""))
        XCTAssertEqual(Probe.lastModified("Tue, 01 Dec 2026 00:00:00 GMT"), "Tue, 01 Dec 2026 00:00:00 GMT")
        XCTAssertNil(Probe.lastModified("Tue\r\nX-Injected: 1"))
        XCTAssertNil(Probe.lastModified(""))
    }
}
