import XCTest
@testable import HaulCore

final class FileNameTests: XCTestCase {
    func testContentDispositionTable() {
        let table: [(header: String, expected: String?)] = [
            ("attachment; filename=\"report.pdf\"", "report.pdf"),
            ("attachment; filename=report.pdf", "report.pdf"),
            ("inline; FILENAME=\"a b.txt\"", "a b.txt"),
            ("attachment; filename=\"quoted \\\"name\\\".txt\"", "quoted \"name\".txt"),
            ("attachment; filename*=UTF-8''na%C3%AFve%20file.txt", "naïve file.txt"),
            ("attachment; filename=\"fallback.txt\"; filename*=UTF-8''%E2%82%AC%20rates.txt", "€ rates.txt"),
            ("attachment; filename*=UTF-8''%E2%82%AC.txt; filename=\"fallback.txt\"", "€.txt"),
            ("attachment; filename*=iso-8859-1'en'%A3%20rates.txt", "£ rates.txt"),
            ("attachment; filename*=UTF-8''bad%ZZ; filename=ok.txt", "ok.txt"),
            ("attachment; filename*=koi8-r''x.txt; filename=plain.txt", "plain.txt"),
            ("attachment; filename=\"semi;colon.txt\"; size=10", "semi;colon.txt"),
            ("attachment", nil),
            ("attachment; filename=\"\"", nil),
            ("", nil),
        ]
        for (header, expected) in table {
            XCTAssertEqual(ContentDisposition.filename(from: header), expected, header)
        }
    }

    func testSanitizeTable() {
        let table: [(proposed: String, expected: String?)] = [
            ("report.pdf", "report.pdf"),
            ("../../etc/passwd", "passwd"),
            ("..\\..\\windows\\system32.dll", "system32.dll"),
            ("/absolute/path.bin", "path.bin"),
            (".hidden", "hidden"),
            ("...", nil),
            ("", nil),
            ("   ", nil),
            ("name\u{0}with\u{1}control\u{7f}.txt", "namewithcontrol.txt"),
            ("a<b>c:d\"e|f?g*h.txt", "abcdefgh.txt"),
            ("trailing dots...", "trailing dots"),
            ("CON", "_CON"),
            ("con.txt", "_con.txt"),
            ("lpt1", "_lpt1"),
            ("console.txt", "console.txt"),
            ("naïve €.txt", "naïve €.txt"),
            ("dir/", "dir"),
        ]
        for (proposed, expected) in table {
            XCTAssertEqual(FileName.sanitize(proposed), expected, proposed.debugDescription)
        }
    }

    func testALongNameWithALongExtensionIsNeverCutToAHiddenName() {
        // Found by the fuzzer: a first character that did not fit left only the "extension".
        let long =
            "\u{FFFD}" + String(repeating: "\u{301}", count: 100) + ".1 206-" + String(repeating: "\u{FFFD}", count: 90)
        let safe = FileName.sanitize(long)!
        XCTAssertLessThanOrEqual(safe.utf8.count, FileName.maxBytes)
        XCTAssertFalse(safe.hasPrefix("."), safe)
        XCTAssertEqual(safe.unicodeScalars.first, "\u{FFFD}")
        let dots = FileName.sanitize(String(repeating: "a", count: 239) + " ." + String(repeating: "b", count: 30))!
        XCTAssertLessThanOrEqual(dots.utf8.count, FileName.maxBytes)
        XCTAssertFalse(dots.hasSuffix(" ") || dots.hasSuffix("."), dots)
    }

    func testLongNamesKeepTheirExtensionAndWholeCharacters() {
        let long = String(repeating: "é", count: 300) + ".tar.gz"
        let safe = FileName.sanitize(long)!
        XCTAssertLessThanOrEqual(safe.utf8.count, FileName.maxBytes)
        XCTAssertTrue(safe.hasSuffix(".tar.gz"))
        XCTAssertTrue(safe.dropLast(7).allSatisfy { $0 == "é" })
    }

    func testDeriveTable() {
        let table: [(disposition: String?, url: String, expected: String)] = [
            ("attachment; filename=\"from-header.zip\"", "http://h/x/y.bin", "from-header.zip"),
            (nil, "http://h/dir/file.iso", "file.iso"),
            (nil, "http://h/dir/my%20file%20%281%29.iso?sig=abc", "my file (1).iso"),
            (nil, "http://h/dir/..%2F..%2Fetc%2Fpasswd", "passwd"),
            (nil, "http://example.com/", "example.com"),
            (nil, "http://example.com", "example.com"),
            (nil, "https://h/a/%2e%2e", "h"),
            ("attachment; filename=\"..\"", "http://h/real.txt", "real.txt"),
        ]
        for (disposition, url, expected) in table {
            XCTAssertEqual(FileName.derive(contentDisposition: disposition, finalURL: url), expected, url)
        }
    }

    func testCandidatesNumberBeforeTheExtension() {
        XCTAssertEqual(FileName.candidate("file.bin", 0), "file.bin")
        XCTAssertEqual(FileName.candidate("file.bin", 1), "file (1).bin")
        XCTAssertEqual(FileName.candidate("archive.tar.gz", 2), "archive (2).tar.gz")
        XCTAssertEqual(FileName.candidate("README", 1), "README (1)")
        XCTAssertEqual(FileName.candidate("v1.2.3.txt", 1), "v1.2.3 (1).txt")
    }
}
