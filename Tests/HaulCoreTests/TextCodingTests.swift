import Foundation
@testable import HaulCore
import HaulLoop
import XCTest

/// The byte-level replacements for what the server took from the ICU-backed half of Foundation, checked against
/// Foundation itself where it has the same function (the tests may link all of Foundation; the server does not).
final class TextCodingTests: XCTestCase {
    func testPercentDecodingAgreesWithFoundation() {
        let cases = [
            "plain", "a%20b", "%E2%82%AC", "caf%C3%A9", "%2F..%2F", "%", "%4", "%zz", "a%2", "%C3", "%ff%fe",
            "100%25", "%00", "+", "%2B", "", "é%41",
        ]
        for text in cases {
            XCTAssertEqual(PercentEncoding.decode(text), text.removingPercentEncoding, text)
            XCTAssertEqual(PercentEncoding.decode(text[...]), text.removingPercentEncoding, text)
        }
    }

    func testPercentEncodingKeepsOnlyUnreservedBytesAndTheExtras() {
        XCTAssertEqual(PercentEncoding.encode("a b/c?d=e&f"), "a%20b%2Fc%3Fd%3De%26f")
        XCTAssertEqual(PercentEncoding.encode("queued,paused", keeping: ","), "queued,paused")
        XCTAssertEqual(PercentEncoding.encode("é€"), "%C3%A9%E2%82%AC")
        XCTAssertEqual(PercentEncoding.encode("A-Z_a.z~09"), "A-Z_a.z~09")
        for text in ["x y", "ü/ß", "%41", "line\nbreak"] {
            XCTAssertEqual(PercentEncoding.decode(PercentEncoding.encode(text)), text)
        }
    }

    func testHTTPDatesInAllThreeFormsAgreeWithFoundation() {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        for text in [
            "Sun, 06 Nov 1994 08:49:37 GMT", "Thu, 01 Jan 1970 00:00:00 GMT", "Tue, 29 Feb 2028 23:59:59 GMT",
            "Wed, 31 Dec 2036 12:00:00 GMT", "Mon, 01 Mar 2100 00:00:01 GMT",
        ] {
            XCTAssertEqual(HTTPDate.parse(text), formatter.date(from: text), text)
        }
        let expected = formatter.date(from: "Sun, 06 Nov 1994 08:49:37 GMT")
        XCTAssertEqual(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT"), expected)
        XCTAssertEqual(HTTPDate.parse("Sun Nov  6 08:49:37 1994"), expected)
        XCTAssertEqual(HTTPDate.parse("sun, 06 NOV 1994 08:49:37 GMT"), expected)
        for text in [
            "", "Sun, 06 Nov 1994 08:49:37", "Sun, 06 Nov 1994 08:49:37 PST", "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49 GMT", "Sun, 06 Nov -994 08:49:37 GMT", "Sun, 29 Feb 2100 00:00:00 GMT",
            "soon", "Sun Nov 6 08:49:37 94",
        ] {
            XCTAssertNil(HTTPDate.parse(text), text)
        }
    }

    func testHTTPDatesAreWrittenAsIMFFixdate() {
        XCTAssertEqual(HTTPDate.format(Date(timeIntervalSince1970: 784_111_777)), "Sun, 06 Nov 1994 08:49:37 GMT")
        XCTAssertEqual(HTTPDate.format(Date(timeIntervalSince1970: 0)), "Thu, 01 Jan 1970 00:00:00 GMT")
        XCTAssertEqual(HTTPDate.format(Date(timeIntervalSince1970: 951_782_400)), "Tue, 29 Feb 2000 00:00:00 GMT")
        for seconds in stride(from: -86_400.0 * 400, to: 86_400 * 365 * 80, by: 86_400 * 37.3) {
            let date = Date(timeIntervalSince1970: seconds.rounded(.down))
            XCTAssertEqual(HTTPDate.parse(HTTPDate.format(date)), date, "\(seconds)")
        }
        XCTAssertEqual(
            Timestamp.parse(Timestamp.rfc3339(Date(timeIntervalSince1970: 1_795_640_000.25))),
            Date(timeIntervalSince1970: 1_795_640_000.25))
        XCTAssertEqual(Timestamp.parse("2026-12-01T10:00:00Z"), Date(timeIntervalSince1970: 1_796_119_200))
        XCTAssertNil(Timestamp.parse("2026-12-01 10:00:00Z"))
        XCTAssertNil(Timestamp.parse("2026-13-01T10:00:00.000Z"))
    }

    func testRetryAfterTakesSecondsOrADate() {
        let now = Date(timeIntervalSince1970: 784_111_700)
        XCTAssertEqual(RetryAfter.seconds("120", now: now), 120)
        XCTAssertEqual(RetryAfter.seconds(" 7 ", now: now), 7)
        XCTAssertEqual(RetryAfter.seconds("Sun, 06 Nov 1994 08:49:37 GMT", now: now), 77)
        XCTAssertEqual(RetryAfter.seconds("Sun, 06 Nov 1994 08:00:00 GMT", now: now), 0, "a date in the past: now")
        XCTAssertNil(RetryAfter.seconds("-5", now: now))
        XCTAssertNil(RetryAfter.seconds("inf", now: now))
        XCTAssertNil(RetryAfter.seconds("later", now: now))
    }

    func testDecimalsPrintAsPrintfDoesBarHalves() {
        for (value, places) in [
            (0.4123, 3), (12.5, 2), (7.0, 0), (0.0, 2), (9.999, 2), (1023.96, 1), (0.0004, 3),
            (-1.26, 1), (123456.789, 3), (3.14159, 4), (0.1 + 0.2, 2),
        ] {
            XCTAssertEqual(
                Decimals.format(value, places: places), String(format: "%.\(places)f", value),
                "\(value) to \(places) places")
        }
        // printf rounds a tie to even on the exact binary value; these round halves away from zero.
        XCTAssertEqual(Decimals.format(2.5, places: 0), "3")
        XCTAssertEqual(Decimals.format(-1.25, places: 1), "-1.3")
        XCTAssertEqual(Decimals.format(0.0005, places: 3), "0.001")
        XCTAssertEqual(Decimals.format(-0.001, places: 2), "0.00", "no negative zero")
        XCTAssertEqual(Decimals.format(.infinity, places: 2), "inf")
    }

    func testTrimmingAndAbsolutePaths() {
        XCTAssertEqual(" \t bytes 0-9/10 \t".trimmingSpaces(), "bytes 0-9/10")
        XCTAssertEqual("   ".trimmingSpaces(), "")
        XCTAssertEqual("[::1]".trimming { $0 == "[" || $0 == "]" }, "::1")
        XCTAssertEqual(Files.absolute("/var//lib/./haul/"), "/var/lib/haul")
        XCTAssertEqual(Files.absolute("/a/b/../c"), "/a/c")
        XCTAssertEqual(Files.absolute("/.."), "/")
        XCTAssertEqual(Files.absolute("downloads"), FileManager.default.currentDirectoryPath + "/downloads")
    }

    /// A search without case: ASCII compared as bytes, other text by Unicode's lowercasing.
    func testContainsIgnoringCase() {
        XCTAssertTrue("Big.Buck.BUNNY.mkv".containsIgnoringCase("buck.bunny"))
        XCTAssertTrue("abc".containsIgnoringCase("abc"))
        XCTAssertTrue("xabc".containsIgnoringCase("bc"), "at the very end")
        XCTAssertTrue("anything".containsIgnoringCase(""))
        XCTAssertFalse("ab".containsIgnoringCase("abc"), "longer than the text")
        XCTAssertFalse("a-b-c".containsIgnoringCase("abc"))
        // '@' and '[' sit just before 'A' and after 'Z': only letters fold, '@' is no '`' and '[' no '{'.
        XCTAssertFalse("@[".containsIgnoringCase("`"))
        XCTAssertFalse("@[".containsIgnoringCase("{"))
        XCTAssertTrue("Ünïcode Film".containsIgnoringCase("ünïcode"))
        XCTAssertTrue("Ünïcode Film".containsIgnoringCase("film"))
        XCTAssertTrue("200 \u{212A}elvin".containsIgnoringCase("kelvin"), "the Kelvin sign lowercases to k")
        XCTAssertFalse("Ünïcode".containsIgnoringCase("unicode"))
    }

    /// A download's search looks at its name and at its URL as shown: never at the URL's password.
    func testADownloadIsFoundByNameAndURLButNotByItsPassword() {
        var download = Download(
            id: "d1", sequence: 1, url: "https://alice:S3cret@Files.Example/Media/clip.MP4", headers: [],
            requestedFilename: nil, directory: "", state: .paused, connections: 1, priority: 0, maxSpeed: nil,
            createdAt: Date(timeIntervalSince1970: 0))
        XCTAssertTrue(download.matches(search: "files.example"))
        XCTAssertTrue(download.matches(search: "clip.mp4"))
        XCTAssertFalse(download.matches(search: "s3cret"))
        XCTAssertFalse(download.matches(search: "holiday"))
        download.requestedFilename = "Holiday.mp4"
        XCTAssertTrue(download.matches(search: "holiday"))
        XCTAssertTrue(download.matches(search: "media/clip"), "the URL still")
    }
}
