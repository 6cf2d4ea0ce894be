import XCTest
@testable import HaulCore

/// The index of ids by their first two characters answers as a walk of every id with `hasPrefix` would.
final class IDPrefixIndexTests: XCTestCase {
    func testFindsWhatAWalkFindsWhateverTheIdsCharacters() {
        let ids = [
            "5sbz0abcdefghjk", "5sbz1abcdefghjk", "5szz", "5s", "5", "ab-c", "AB_c", "a\u{301}bc", "ab\u{301}c",
            "abc", "ab", "日本語", "日本", "5sé", "\r\nxy", "e\u{301}\u{302}z",
        ]
        var index = IDPrefixIndex()
        for id in ids { index.insert(id) }
        let prefixes = [
            "5s", "5sb", "5sbz1", "ab", "ab\u{301}", "a\u{301}", "a\u{301}b", "AB", "日本", "日本語", "5sé", "\r\nx",
            "e\u{301}\u{302}", "zz", "abc",
        ]
        for prefix in prefixes {
            // A prefix of one character (a letter and its marks) is shorter than the key: a walk it is.
            let expected = prefix.count < 2 ? nil : Set(ids.filter { $0.hasPrefix(prefix) })
            XCTAssertEqual(index.ids(prefixed: prefix), expected, prefix)
        }
        // Shorter than the key: a walk it is.
        XCTAssertNil(index.ids(prefixed: "5"))
        XCTAssertNil(index.ids(prefixed: ""))
        for id in ["5sbz0abcdefghjk", "ab\u{301}c", "日本", "5"] { index.remove(id) }
        let left = ids.filter { !["5sbz0abcdefghjk", "ab\u{301}c", "日本", "5"].contains($0) }
        for prefix in prefixes {
            let expected = prefix.count < 2 ? nil : Set(left.filter { $0.hasPrefix(prefix) })
            XCTAssertEqual(index.ids(prefixed: prefix), expected, prefix)
        }
        // Removing what is not there changes nothing.
        index.remove("nothere")
        XCTAssertEqual(index.ids(prefixed: "5s"), ["5sbz1abcdefghjk", "5szz", "5s", "5sé"])
        XCTAssertEqual(index.ids(prefixed: "ab"), ["ab-c", "abc", "ab"])
    }
}
