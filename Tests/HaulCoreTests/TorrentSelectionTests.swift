import HaulCore
import XCTest

/// `files`: which of a torrent's files a download fetches.
final class TorrentSelectionTests: XCTestCase {
    private let paths = ["show/big.mkv", "show/cover.jpg", "show/extras/sample.mkv", "show/notes.txt"]

    private func chosen(_ text: String) -> [Int] {
        guard let selection = TorrentSelection(text) else { return [-1] }
        return paths.indices.filter { selection.wants(number: $0 + 1, path: paths[$0]) }.map { $0 + 1 }
    }

    func testNumbersRangesAndGlobsChooseFiles() {
        XCTAssertEqual(chosen("1"), [1])
        XCTAssertEqual(chosen("1,3"), [1, 3])
        XCTAssertEqual(chosen("2-4"), [2, 3, 4])
        XCTAssertEqual(chosen("*.mkv"), [1, 3], "a glob matches the name in any folder")
        XCTAssertEqual(chosen("extras/*"), [3], "and the path under the torrent's folder")
        XCTAssertEqual(chosen("notes.txt, 2"), [2, 4], "items are trimmed")
        XCTAssertEqual(chosen("9"), [])
        XCTAssertEqual(chosen("0"), [], "not a number from 1: a glob, matching no name")
        XCTAssertEqual(chosen("4-2"), [], "a backwards range is a glob too")
    }

    func testWhatIsNoSelection() {
        for text in ["", ",", "1,,2", " ", "a\u{1}b", String(repeating: "1,", count: 2049) + "1"] {
            XCTAssertNil(TorrentSelection(text), text)
        }
    }
}
