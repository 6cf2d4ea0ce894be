import HaulLoop
import XCTest
@testable import HaulCore

private func response(_ status: Int, _ headers: [(String, String)], url: String = "http://h/f") -> TransferResponse {
    TransferResponse(status: status, headers: headers.map { ($0.0.lowercased(), $0.1) }, effectiveURL: url)
}

final class ProbeTests: XCTestCase {
    func testFirstResponseTable() {
        let full = ProbeResult(
            finalURL: "http://h/final", totalBytes: 5000, acceptsRanges: true, etag: "\"e\"",
            lastModified: "Sun, 29 Nov 2026 10:00:00 GMT", contentType: "application/zip")
        let table: [(TransferResponse, ProbeOutcome)] = [
            (
                response(
                    206,
                    [
                        ("Content-Range", "bytes 0-4999/5000"), ("ETag", "\"e\""),
                        ("Last-Modified", "Sun, 29 Nov 2026 10:00:00 GMT"), ("Content-Type", "application/zip"),
                    ],
                    url: "http://h/final"), .result(full)
            ),
            (
                response(206, [("Content-Range", "bytes 0-99/*")]),
                .result(ProbeResult(finalURL: "http://h/f", totalBytes: nil, acceptsRanges: true))
            ),
            (
                response(206, [("Content-Range", "bytes 0-99/100"), ("ETag", "W/\"weak\"")]),
                .result(ProbeResult(finalURL: "http://h/f", totalBytes: 100, acceptsRanges: true))
            ),
            // A 206 whose body would not start at byte 0 is never written there.
            (response(206, [("Content-Range", "garbage")]), .wrongRange),
            (response(206, [("Content-Range", "bytes 10-99/100")]), .wrongRange),
            (response(206, []), .wrongRange),
            // Range ignored: ranges only if the server says so and tells the length.
            (
                response(200, [("Content-Length", "777")]),
                .result(ProbeResult(finalURL: "http://h/f", totalBytes: 777, acceptsRanges: false))
            ),
            (
                response(200, [("Content-Length", "777"), ("Accept-Ranges", "bytes")]),
                .result(ProbeResult(finalURL: "http://h/f", totalBytes: 777, acceptsRanges: true))
            ),
            (
                response(200, [("Accept-Ranges", "bytes")]),
                .result(ProbeResult(finalURL: "http://h/f", totalBytes: nil, acceptsRanges: false))
            ),
            (
                response(200, [("Content-Length", "-5")]),
                .result(ProbeResult(finalURL: "http://h/f", totalBytes: nil, acceptsRanges: false))
            ),
            (
                response(416, [("Content-Range", "bytes */0")]),
                .result(ProbeResult(finalURL: "http://h/f", totalBytes: 0, acceptsRanges: false))
            ),
            (response(416, [("Content-Range", "bytes */10")]), .httpError(416)),
            (response(404, []), .httpError(404)),
            (response(503, []), .httpError(503)),
            (response(304, []), .httpError(304)),
        ]
        for (index, (reply, expected)) in table.enumerated() {
            XCTAssertEqual(Probe.interpretFirstResponse(reply), expected, "row \(index)")
        }
    }

    func testResumableNeedsRangesSizeAndValidator() {
        let base = ProbeResult(finalURL: "u", totalBytes: 10, acceptsRanges: true, etag: "\"a\"")
        XCTAssertTrue(base.resumable)
        var noRanges = base; noRanges.acceptsRanges = false
        var noSize = base; noSize.totalBytes = nil
        var noValidator = base; noValidator.etag = nil
        var dateOnly = noValidator; dateOnly.lastModified = "Sun, 29 Nov 2026 10:00:00 GMT"
        XCTAssertFalse(noRanges.resumable)
        XCTAssertFalse(noSize.resumable)
        XCTAssertFalse(noValidator.resumable)
        XCTAssertTrue(dateOnly.resumable)
        XCTAssertEqual(dateOnly.validator, "Sun, 29 Nov 2026 10:00:00 GMT")
    }

    func testContentRangeTable() {
        let table: [(String, ContentRange?)] = [
            ("bytes 0-99/100", ContentRange(first: 0, last: 99, complete: 100)),
            ("bytes 10-19/*", ContentRange(first: 10, last: 19, complete: nil)),
            ("bytes */100", ContentRange(first: nil, last: nil, complete: 100)),
            ("BYTES 1-1/2", ContentRange(first: 1, last: 1, complete: 2)),
            ("bytes 5-4/100", nil),
            ("bytes 0-100/100", nil),
            ("bytes */*", nil),
            ("items 0-1/2", nil),
            ("bytes 0-1", nil),
            ("bytes -1-2/3", nil),
        ]
        for (header, expected) in table {
            XCTAssertEqual(ContentRange(header), expected, header)
        }
    }

    func testRangeReplyTable() {
        let cr = { (v: String) in ("Content-Range", v) }
        let table: [(TransferResponse, Int64, Int64?, Int64?, String?, RangeReply)] = [
            (response(206, [cr("bytes 100-999/1000")]), 100, nil, 1000, nil, .accept),
            (response(206, [cr("bytes 100-199/1000")]), 100, 199, 1000, nil, .accept),
            (response(206, [cr("bytes 100-999/1000"), ("ETag", "\"v1\"")]), 100, nil, 1000, "\"v1\"", .accept),
            // The server ignored Range or If-Range saw a new version.
            (response(200, [("Content-Length", "1000")]), 100, nil, 1000, "\"v1\"", .restartWithBody),
            // Same range, other version.
            (response(206, [cr("bytes 100-1099/1100")]), 100, nil, 1000, nil, .changed),
            (response(206, [cr("bytes 100-999/1000"), ("ETag", "\"v2\"")]), 100, nil, 1000, "\"v1\"", .changed),
            // Other range: never written at our offset.
            (response(206, [cr("bytes 0-999/1000")]), 100, nil, 1000, nil, .mismatch),
            (response(206, [cr("bytes 100-500/1000")]), 100, nil, 1000, nil, .mismatch),
            (response(206, [cr("bytes 100-199/1000")]), 100, 299, 1000, nil, .mismatch),
            (response(206, []), 100, nil, 1000, nil, .mismatch),
            (response(416, [cr("bytes */50")]), 100, nil, 1000, nil, .httpError(416)),
            (response(404, []), 100, nil, 1000, nil, .httpError(404)),
        ]
        for (index, (reply, start, end, total, etag, expected)) in table.enumerated() {
            XCTAssertEqual(
                RangeReply.check(reply, start: start, end: end, total: total, etag: etag), expected,
                "row \(index)")
        }
    }
}
