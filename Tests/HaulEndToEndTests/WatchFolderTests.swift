import Foundation
import XCTest

/// `--watch-dir`: a list of links dropped into the folder is added once, when it is written and closed (inotify),
/// with aria2's input-file options, and renamed NAME.added, or NAME.failed with the reason of each refused line.
final class WatchFolderTests: HaulTestCase {
    override var serveArguments: [String] { super.serveArguments + ["--watch-dir", sandbox.file("watch")] }

    private func downloads() throws -> [[String: Any]] {
        try api.get("/downloads?limit=1000").json["downloads"] as? [[String: Any]] ?? []
    }

    private func waitForFile(_ name: String) throws -> String {
        let path = sandbox.file("watch/" + name)
        try waitFor("\(name) to appear") { FileManager.default.fileExists(atPath: path) }
        return try String(contentsOfFile: path, encoding: .utf8)
    }

    func testAListWrittenSlowlyIsAddedOnceWhenClosed() throws {
        let hashA = try sandbox.makeRandomFile("www/a.bin", size: 40_000)
        let hashB = try sandbox.makeRandomFile("www/b.bin", size: 50_000)
        let path = sandbox.file("watch/list.txt")
        FileManager.default.createFile(atPath: path, contents: nil)
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: path))
        handle.write(Data("# tonight's files\n\(originURL("a.bin"))\n".utf8))
        // Longer than the folder's settling time, while the file is still open.
        Thread.sleep(forTimeInterval: 1.2)
        XCTAssertEqual(try downloads().count, 0, "nothing is added before the list is closed")
        handle.write(
            Data("\(originURL("b.bin"))\tftp://127.0.0.1:1/b.bin\n  dir=films\n  out=renamed.bin\n  split=2\n".utf8))
        Thread.sleep(forTimeInterval: 0.8)
        XCTAssertEqual(try downloads().count, 0)
        try handle.close()
        let report = try waitForFile("list.added")
        XCTAssertTrue(report.contains("tonight's files") && report.contains("2 added"), report)
        // The report is written first, then the list removed (a crash between reads it again, adding nothing).
        try waitFor("list.txt to go") { !FileManager.default.fileExists(atPath: path) }
        let all = try downloads()
        XCTAssertEqual(all.count, 2)
        let b = try XCTUnwrap(all.first { ($0["url"] as? String)?.hasSuffix("b.bin") == true })
        XCTAssertEqual(b["connections"] as? Int, 2)
        XCTAssertEqual((b["mirrors"] as? [[String: Any]])?.count, 1)
        let done = try waitForState(try XCTUnwrap(b["id"] as? String), "completed")
        XCTAssertEqual(done["path"] as? String, "films/renamed.bin")
        XCTAssertEqual(try sha256(sandbox.file("downloads/films/renamed.bin")), hashB)
        let a = try XCTUnwrap(all.first { ($0["url"] as? String)?.hasSuffix("a.bin") == true })
        try waitForState(try XCTUnwrap(a["id"] as? String), "completed")
        XCTAssertEqual(try sha256(sandbox.file("downloads/a.bin")), hashA)
        // Nothing more came of the several writes and closes.
        Thread.sleep(forTimeInterval: 0.8)
        XCTAssertEqual(try downloads().count, 2)
    }

    func testBadLinesAreReportedAndTheGoodOnesAdded() throws {
        _ = try sandbox.makeRandomFile("www/good.bin", size: 1000)
        let list = """
              dir=nowhere
            \(originURL("good.bin"))
            gopher://127.0.0.1/x
            \(originURL("good.bin"))
              on-download-complete=/bin/sh
            \(originURL("good.bin"))
              dir=../../etc
            """
        // Moved in whole, as a program writing elsewhere first would.
        try list.write(toFile: sandbox.file("staging.txt"), atomically: false, encoding: .utf8)
        XCTAssertEqual(rename(sandbox.file("staging.txt"), sandbox.file("watch/mixed.txt")), 0)
        let report = try waitForFile("mixed.failed")
        XCTAssertTrue(report.contains("1 added, 4 refused"), report)
        for line in [
            "line 1: an option line before any URL", "line 3:", "line 4: option on-download-complete",
            "line 6:",
        ] {
            XCTAssertTrue(report.contains("# " + line), "\(line) in \(report)")
        }
        XCTAssertEqual(try downloads().count, 1)
    }

    func testAListThereAtStartIsAdded() throws {
        haul.stop(signal: SIGTERM)
        _ = try sandbox.makeRandomFile("www/early.bin", size: 1000)
        try "\(originURL("early.bin"))\n".write(
            toFile: sandbox.file("watch/early.txt"), atomically: true,
            encoding: .utf8)
        // Not a list: left alone.
        try "\(originURL("early.bin"))\n".write(
            toFile: sandbox.file("watch/notes.md"), atomically: true,
            encoding: .utf8)
        try startHaul()
        XCTAssertTrue(try waitForFile("early.added").contains("1 added"))
        XCTAssertTrue(FileManager.default.fileExists(atPath: sandbox.file("watch/notes.md")))
        XCTAssertEqual(try downloads().count, 1)
    }
}
