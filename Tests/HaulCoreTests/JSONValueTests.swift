import XCTest
@testable import HaulCore

final class JSONValueTests: XCTestCase {
    func testParsesValidDocuments() throws {
        let table: [(String, JSONValue)] = [
            ("{}", .object([])),
            ("[]", .array([])),
            (
                " {\"a\": [1, -2.5, 3e2, true, false, null]} ",
                .object([("a", .array([.number(1), .number(-2.5), .number(300), .bool(true), .bool(false), .null]))])
            ),
            ("\"\\u00e9\\ud83d\\ude00\\n\\\"\"", .string("é😀\n\"")),
            ("0", .number(0)),
        ]
        for (text, expected) in table {
            XCTAssertEqual(try JSONValue.parse(text), expected, text)
        }
    }

    func testRejectsInvalidDocuments() {
        let invalid = [
            "", "{", "{\"a\":}", "[1,]", "{\"a\" 1}", "01", "1.", "-", "tru", "\"\\x\"", "\"\u{1}\"",
            "\"\\ud800\"", "{} {}", "nan", "[1] x", String(repeating: "[", count: 100),
        ]
        for text in invalid {
            XCTAssertThrowsError(try JSONValue.parse(text), text.debugDescription)
        }
    }

    func testCanonicalFormIgnoresMemberOrderAndSpacing() throws {
        let a = try JSONValue.parse(#"{"b": [ {"y":1, "x":2} ], "a": "s"}"#).canonical().serializedBytes()
        let b = try JSONValue.parse(#"{"a":"s","b":[{"x":2,"y":1}]}"#).canonical().serializedBytes()
        XCTAssertEqual(a, b)
        XCTAssertEqual(String(decoding: a, as: UTF8.self), #"{"a":"s","b":[{"x":2,"y":1}]}"#)
        let other = try JSONValue.parse(#"{"a":"s","b":[{"x":2,"y":2}]}"#).canonical().serializedBytes()
        XCTAssertNotEqual(a, other)
    }

    func testSerializationRoundTripsAndKeepsKeyOrder() throws {
        let value = JSONValue.object([
            ("z", .number(1)), ("a", .string("line\nbreak \"q\" \u{1}")),
            ("n", .null), ("big", .number(1_099_511_627_776)), ("f", .number(0.5)),
        ])
        let text = value.serialized()
        XCTAssertEqual(
            text, "{\"z\":1,\"a\":\"line\\nbreak \\\"q\\\" \\u0001\",\"n\":null,\"big\":1099511627776,\"f\":0.5}")
        XCTAssertEqual(try JSONValue.parse(text), value)
    }
}
