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

    /// The writer places commas itself, in nested objects and arrays, empty ones included.
    func testWriterPlacesCommasInNestedDocuments() throws {
        var w = JSONWriter()
        w.object { w in
            w.key("empty")
            w.object { _ in }
            w.key("list")
            w.array { w in
                w.integer(-12)
                w.array { _ in }
                w.object { w in
                    w.key("k")
                    w.string(nil)
                }
                w.number(2.5)
                w.bool(false)
            }
            w.key(text: "dynamic \"name\"")
            w.integer(Int64.min)
            w.key("raw")
            w.raw(Array(#"{"a":[1]}"#.utf8))
            w.key("last")
            w.number(Double.nan)
        }
        let text = String(decoding: w.bytes, as: UTF8.self)
        XCTAssertEqual(
            text,
            #"{"empty":{},"list":[-12,[],{"k":null},2.5,false],"dynamic \"name\"":-9223372036854775808,"#
                + #""raw":{"a":[1]},"last":null}"#)
        XCTAssertNoThrow(try JSONValue.parse(w.bytes))
    }

    /// Escapes: quotes, backslashes, every control character, U+2028 and U+2029; other characters (the lead byte
    /// of those two included) pass as UTF-8.
    func testWriterEscapesWhatJSONAndJavaScriptNeed() throws {
        let controls = String(decoding: (0..<0x20).map { UInt8($0) }, as: UTF8.self)
        let text = "a\"b\\c" + controls + "\u{2028}\u{2029}\u{2027}€é😀"
        var w = JSONWriter()
        w.string(text)
        let written = String(decoding: w.bytes, as: UTF8.self)
        XCTAssertTrue(written.hasPrefix(#""a\"b\\c\u0000\u0001"#), written)
        XCTAssertTrue(written.contains(#"\b"#) == false && written.contains(#"\u0008"#))
        XCTAssertTrue(written.contains(#"\t\n\u000b\u000c\r"#), written)
        XCTAssertTrue(written.hasSuffix(#"\u2028\u2029"# + "\u{2027}€é😀\""), written)
        XCTAssertEqual(try JSONValue.parse(w.bytes), .string(text))
        for value in [0, 9, 10, -1, 99, 100, 1_234_567_890_123, Int64.max] {
            var n = JSONWriter()
            n.integer(value)
            XCTAssertEqual(String(decoding: n.bytes, as: UTF8.self), String(value))
        }
    }
}
