import XCTest
@testable import HaulAPI

/// The tags conditional GETs compare: one body, one tag; any change of a byte or of the length, another.
final class ETagTests: XCTestCase {
    func testEqualBodiesGetEqualTagsAndEveryChangedByteAnother() {
        let body = (0..<203).map { UInt8(truncatingIfNeeded: $0 &* 37) }
        let tag = ETag.of(body)
        XCTAssertEqual(tag, ETag.of(Array(body)))
        XCTAssertEqual(tag.utf8.count, 18)
        XCTAssertTrue(tag.hasPrefix("\"") && tag.hasSuffix("\""))
        var seen: Set<String> = [tag]
        // Every position, the last few (past the eight-byte steps) included.
        for index in body.indices {
            var changed = body
            changed[index] ^= 1
            seen.insert(ETag.of(changed))
        }
        seen.insert(ETag.of(Array(body.dropLast())))
        seen.insert(ETag.of(body + [0]))
        seen.insert(ETag.of([]))
        seen.insert(ETag.of([0]))
        XCTAssertEqual(seen.count, body.count + 5)
    }

    func testAWeakOrListedTagMatches() {
        let tag = ETag.of(Array("hello".utf8))
        XCTAssertTrue(ETag.matches(tag, tag))
        XCTAssertTrue(ETag.matches("W/" + tag, tag))
        XCTAssertTrue(ETag.matches("\"other\", " + tag, tag))
        XCTAssertTrue(ETag.matches("*", tag))
        XCTAssertFalse(ETag.matches(ETag.of(Array("hellO".utf8)), tag))
    }
}
