import Foundation
import XCTest

/// Nothing Haul writes lands outside the download root: not by a client's name or directory, not by an origin's
/// Content-Disposition, not through a symbolic link planted inside the root.
final class ConfinementTests: HaulTestCase {
    /// Every regular file and link under `directory`, relative to it.
    private func entries(_ directory: String) -> [String] {
        (FileManager.default.enumerator(atPath: directory)?.allObjects as? [String] ?? []).sorted()
    }

    private func field(_ reply: Client.Reply) -> [String] {
        (reply.json["errors"] as? [[String: Any]] ?? []).compactMap { $0["field"] as? String }
    }

    func testPathsInFilenameAndDirectoryAreRejected() throws {
        try sandbox.makeRandomFile("www/f.bin", size: 1000)
        let url = originURL("f.bin")
        let refused: [[String: Any]] = [
            ["url": url, "filename": "../../etc/x"],
            ["url": url, "filename": "/etc/x"],
            ["url": url, "filename": ".."],
            ["url": url, "filename": "a\u{0}b"],
            ["url": url, "filename": "line\nbreak"],
            ["url": url, "directory": "../outside"],
            ["url": url, "directory": "/etc"],
            ["url": url, "directory": "a/../../b"],
            ["url": url, "directory": "ok/\u{1}bad"],
        ]
        for body in refused {
            let reply = try api.request("POST", "/downloads", json: body)
            XCTAssertEqual(reply.status, 422, "\(body): \(reply.text)")
            XCTAssertEqual(reply.header("Content-Type"), "application/problem+json")
            XCTAssertFalse(field(reply).isEmpty, "\(body)")
        }
        XCTAssertEqual(try api.get("/stats").json["downloads"] as? Int, 0)
        XCTAssertEqual(entries(sandbox.path).filter { $0.hasSuffix("/x") || $0 == "x" || $0.hasSuffix("outside") },
                       [])
    }

    func testAServersNameWithAPathStaysInsideTheRoot() throws {
        let hash = try sandbox.makeRandomFile("www/cd.bin", size: 5000)
        let id = try add(["url": originURL("cd.bin", "disposition=attachment;%20filename=%22../../escaped.bin%22")])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(done["path"] as? String, "escaped.bin")
        XCTAssertEqual(try sha256(sandbox.file("downloads/escaped.bin")), hash)
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.file("escaped.bin")))
    }

    func testAPlantedDirectoryLinkIsNeverFollowed() throws {
        try sandbox.makeRandomFile("www/d.bin", size: 5000)
        let outside = sandbox.file("outside")
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: sandbox.file("downloads"), withIntermediateDirectories: true)
        XCTAssertEqual(symlink(outside, sandbox.file("downloads/evil")), 0)
        for directory in ["evil", "evil/deeper"] {
            let id = try add(["url": originURL("d.bin"), "directory": directory, "filename": "d.bin"])
            let failed = try waitForState(id, "failed")
            let error = failed["error"] as? [String: Any]
            XCTAssertEqual(error?["code"] as? String, "write_failed", "\(failed)")
            XCTAssertTrue((error?["message"] as? String ?? "").contains("symbolic link"), "\(failed)")
        }
        XCTAssertEqual(entries(outside), [], "nothing was written through the link")
    }

    func testPlantedFileLinksAreNeitherWrittenThroughNorReplaced() throws {
        let hash = try sandbox.makeRandomFile("www/p.bin", size: 20_000)
        let outside = sandbox.file("outside")
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: sandbox.file("downloads"), withIntermediateDirectories: true)
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: outside + "/victim1"))
        try Data("keep me too".utf8).write(to: URL(fileURLWithPath: outside + "/victim2"))
        // A link where the part file would go, and one where the finished file would go.
        XCTAssertEqual(symlink(outside + "/victim1", sandbox.file("downloads/p.bin.part")), 0)
        XCTAssertEqual(symlink(outside + "/victim2", sandbox.file("downloads/q.bin")), 0)

        let first = try waitForState(try add(["url": originURL("p.bin"), "filename": "p.bin"]), "completed")
        let second = try waitForState(try add(["url": originURL("p.bin"), "filename": "q.bin"]), "completed")
        XCTAssertEqual(first["path"] as? String, "p (1).bin")
        XCTAssertEqual(second["path"] as? String, "q (1).bin")
        XCTAssertEqual(try sha256(try downloadedPath(first)), hash)
        XCTAssertEqual(try sha256(try downloadedPath(second)), hash)
        XCTAssertEqual(try String(contentsOfFile: outside + "/victim1", encoding: .utf8), "keep me")
        XCTAssertEqual(try String(contentsOfFile: outside + "/victim2", encoding: .utf8), "keep me too")
        XCTAssertEqual(entries(outside), ["victim1", "victim2"])
    }
}
