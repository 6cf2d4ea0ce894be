import XCTest
@testable import HaulCore

final class LoggerTests: XCTestCase {
    func testValuesAreQuotedOnlyWhenAReaderCouldMisreadThem() {
        let table: [(String, String)] = [
            ("plain", "plain"),
            ("/downloads/{id}", "/downloads/{id}"),
            ("ünïcode", "ünïcode"),
            ("", "\"\""),
            ("two words", "\"two words\""),
            ("a=b", "\"a=b\""),
            ("say \"hi\"", "\"say \\\"hi\\\"\""),
            ("back\\slash", "\"back\\\\slash\""),
            ("line\nbreak", "\"line\\nbreak\""),
            ("bell\u{7}", "\"bell\\u{7}\""),
        ]
        for (value, expected) in table {
            XCTAssertEqual(Logger.quoted(value), expected, value)
        }
    }
}
