import XCTest
@testable import HaulAPI

/// How a finished file is served: which bytes a Range header asks for, and which types are passed on.
final class FileResponseTests: XCTestCase {
    func testRanges() {
        let cases: [(String?, FileResponse.RangeRequest)] = [
            (nil, .whole), ("bytes=0-99", .part(0, 99)), ("bytes=100-", .part(100, 999)),
            ("bytes=-100", .part(900, 999)),
            ("bytes=-5000", .part(0, 999)), ("bytes=990-5000", .part(990, 999)), ("BYTES=1-1", .part(1, 1)),
            (" bytes=2-3 ", .part(2, 3)), ("bytes = 2-3", .whole), ("bytes=1000-", .unsatisfiable),
            ("bytes=-0", .unsatisfiable),
            ("bytes=0-1,5-6", .whole), ("items=0-1", .whole), ("bytes=5-1", .whole), ("bytes=x-1", .whole),
            ("bytes=-", .whole), ("bytes=+1-2", .whole), ("bytes=99999999999999999999-", .whole),
        ]
        for (header, expected) in cases {
            XCTAssertEqual(FileResponse.range(header, size: 1000), expected, header ?? "nil")
        }
        XCTAssertEqual(FileResponse.range("bytes=0-", size: 0), .unsatisfiable, "an empty file has no byte 0")
    }

    func testOnlyTypesABrowserShowsArePassedOn() {
        for (origin, served) in [
            ("image/png", "image/png"), ("video/mp4; codecs=x", "video/mp4"),
            ("application/pdf", "application/pdf"), ("text/html", "application/octet-stream"),
            ("image/svg+xml", "application/octet-stream"),
            ("application/javascript", "application/octet-stream"),
            ("text/plain", "application/octet-stream"), ("nonsense", "application/octet-stream"),
            ("image/p ng", "application/octet-stream"),
        ] {
            XCTAssertEqual(FileResponse.contentType(origin), served, origin)
        }
        XCTAssertEqual(FileResponse.contentType(nil), "application/octet-stream")
        XCTAssertEqual(
            FileResponse.disposition("a\"b\\c.txt"),
            "attachment; filename=\"a_b_c.txt\"; filename*=UTF-8''a%22b%5Cc.txt")
    }
}
