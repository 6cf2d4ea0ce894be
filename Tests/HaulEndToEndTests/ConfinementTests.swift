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
        XCTAssertEqual(
            entries(sandbox.path).filter { $0.hasSuffix("/x") || $0 == "x" || $0.hasSuffix("outside") },
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
            XCTAssertTrue((error?["message"] as? String ?? "").hasPrefix("evil is a symbolic link"), "\(failed)")
            XCTAssertFalse((error?["message"] as? String ?? "").contains(sandbox.path), "no server path: \(failed)")
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

    // MARK: hard links and files of other users

    private func linkCount(_ path: String) -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_nlink) : -1
    }

    private func error(_ download: [String: Any]) -> (code: String, message: String) {
        let error = download["error"] as? [String: Any]
        return (error?["code"] as? String ?? "", error?["message"] as? String ?? "")
    }

    /// An outside file with known content, standing for something the server's user can write but must not.
    private func victim(_ name: String) throws -> String {
        let outside = sandbox.file("outside")
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: outside + "/" + name))
        return outside + "/" + name
    }

    func testAHardLinkPlantedAsThePartFileIsPassedOver() throws {
        let hash = try sandbox.makeRandomFile("www/p.bin", size: 20_000)
        let target = try victim("hard")
        try FileManager.default.createDirectory(atPath: sandbox.file("downloads"), withIntermediateDirectories: true)
        XCTAssertEqual(link(target, sandbox.file("downloads/p.bin.part")), 0)
        let done = try waitForState(try add(["url": originURL("p.bin"), "filename": "p.bin"]), "completed")
        XCTAssertEqual(done["path"] as? String, "p (1).bin")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertEqual(try String(contentsOfFile: target, encoding: .utf8), "keep me")
        XCTAssertEqual(linkCount(target), 2, "the planted link is left alone, not removed")
    }

    func testAPartFileOfAnotherUserIsPassedOver() throws {
        let hash = try sandbox.makeRandomFile("www/q.bin", size: 20_000)
        try FileManager.default.createDirectory(atPath: sandbox.file("downloads"), withIntermediateDirectories: true)
        let planted = sandbox.file("downloads/q.bin.part")
        try Data("someone else's".utf8).write(to: URL(fileURLWithPath: planted))
        guard chown(planted, 65534, 65534) == 0 else { throw XCTSkip("cannot chown here (not root)") }
        let done = try waitForState(try add(["url": originURL("q.bin"), "filename": "q.bin"]), "completed")
        XCTAssertEqual(done["path"] as? String, "q (1).bin")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertEqual(try String(contentsOfFile: planted, encoding: .utf8), "someone else's")
    }

    func testResumingIntoAHardLinkPlantedWhilePausedStartsOverUnderAFreshName() throws {
        let hash = try sandbox.makeRandomFile("www/r.bin", size: 400_000)
        let id = try add(["url": originURL("r.bin", "rate=100000"), "filename": "r.bin", "connections": 1])
        try waitFor("bytes to arrive") { int(try download(id)["received_bytes"]) > 0 }
        XCTAssertEqual(try patch(id, ["state": "paused"]).status, 200)
        let part = sandbox.file("downloads/r.bin.part")
        let target = try victim("resume")
        XCTAssertEqual(unlink(part), 0)
        XCTAssertEqual(link(target, part), 0)
        XCTAssertEqual(try patch(id, ["state": "queued"]).status, 200)
        let done = try waitForState(id, "completed")
        XCTAssertEqual(done["path"] as? String, "r (1).bin")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertEqual(try String(contentsOfFile: target, encoding: .utf8), "keep me")
    }

    func testAPartFileLinkedFromElsewhereNeverGetsTheFinalName() throws {
        try sandbox.makeRandomFile("www/s.bin", size: 300_000)
        let id = try add(["url": originURL("s.bin", "rate=200000"), "filename": "s.bin", "connections": 1])
        try waitFor("bytes to arrive") { int(try download(id)["received_bytes"]) > 0 }
        try FileManager.default.createDirectory(atPath: sandbox.file("outside"), withIntermediateDirectories: true)
        XCTAssertEqual(link(sandbox.file("downloads/s.bin.part"), sandbox.file("outside/copy")), 0)
        let failed = try waitForState(id, "failed")
        XCTAssertEqual(error(failed).code, "write_failed", "\(failed)")
        XCTAssertTrue(error(failed).message.contains("s.bin.part has 2 hard links"), error(failed).message)
        XCTAssertFalse(error(failed).message.contains(sandbox.path), "no server path in messages")
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.file("downloads/s.bin")))
    }

    func testAPartFileReplacedWhileDownloadingFailsClearly() throws {
        try sandbox.makeRandomFile("www/t.bin", size: 300_000)
        let id = try add(["url": originURL("t.bin", "rate=200000"), "filename": "t.bin", "connections": 1])
        try waitFor("bytes to arrive") { int(try download(id)["received_bytes"]) > 0 }
        let part = sandbox.file("downloads/t.bin.part")
        XCTAssertEqual(rename(part, sandbox.file("downloads/moved")), 0)
        try Data("a different file".utf8).write(to: URL(fileURLWithPath: part))
        let failed = try waitForState(id, "failed")
        XCTAssertEqual(error(failed).code, "write_failed", "\(failed)")
        XCTAssertTrue(error(failed).message.contains("t.bin.part was replaced or removed"), error(failed).message)
        XCTAssertFalse(error(failed).message.contains("-1"), error(failed).message)
        XCTAssertEqual(try String(contentsOfFile: part, encoding: .utf8), "a different file")
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.file("downloads/t.bin")))
    }

    func testAFileWhereADirectoryShouldBeIsCalledWhatItIs() throws {
        try sandbox.makeRandomFile("www/u.bin", size: 1000)
        try FileManager.default.createDirectory(atPath: sandbox.file("downloads"), withIntermediateDirectories: true)
        try Data("x".utf8).write(to: URL(fileURLWithPath: sandbox.file("downloads/afile")))
        let failed = try waitForState(try add(["url": originURL("u.bin"), "directory": "afile/sub"]), "failed")
        XCTAssertEqual(error(failed).code, "write_failed", "\(failed)")
        XCTAssertEqual(error(failed).message, "afile is a file where a directory is needed")
    }
}
