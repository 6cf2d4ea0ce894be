import Foundation
import XCTest

/// A category's finished files move to its completed folder: on the download root's file system by a new name,
/// onto another (tmpfs, `--completed-root`) by copy, sync, name and removal; and a kill -9 at each step of either
/// leaves the file whole, in one place, once the server is started again.
final class MoveTests: HaulTestCase {
    /// On /dev/shm (tmpfs), another file system than the sandbox's.
    private var completedRoot: String!
    /// The crash point of the next start (`HAUL_CRASH_AT`).
    private var crashAt: String?
    private var acrossFileSystems = false

    override var serveEnvironment: [String: String]? {
        var environment = ProcessInfo.processInfo.environment
        environment["HAUL_CRASH_AT"] = crashAt
        return environment
    }

    override var serveArguments: [String] {
        super.serveArguments + (acrossFileSystems ? ["--completed-root", completedRoot] : [])
    }

    override func setUpWithError() throws {
        var template = Array("/dev/shm/haul-completed-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw XCTSkip("no /dev/shm here") }
        completedRoot = String(cString: made)
        try super.setUpWithError()
    }

    override func tearDownWithError() throws {
        try super.tearDownWithError()
        try? FileManager.default.removeItem(atPath: completedRoot)
    }

    /// Restarts the server (crashing at `point` next, or not).
    private func restart(crashingAt point: String?) throws {
        haul.stop(signal: SIGKILL)
        crashAt = point
        try startHaul()
    }

    private func putCategory(_ name: String, _ body: [String: Any]) throws {
        let reply = try api.request("PUT", "/categories/\(name)", json: body)
        XCTAssertEqual(reply.status, 201, reply.text)
    }

    /// Waits until the download's `path` is `path` (the move stored).
    @discardableResult
    private func waitForPath(_ id: String, _ path: String) throws -> [String: Any] {
        var last: [String: Any] = [:]
        try waitFor("\(id) to be at \(path)") {
            last = try self.download(id)
            return last["path"] as? String == path
        }
        return last
    }

    func testAFinishedFileMovesToItsCompletedFolderAndKeepsItsNeighbours() throws {
        try putCategory("tv", ["completed_directory": "done/tv"])
        let hash = try sandbox.makeRandomFile("www/ep.bin", size: 300_000)
        // A file of that name is there already: the moved one gets "ep (1).bin" beside it.
        try FileManager.default.createDirectory(
            atPath: sandbox.file("downloads/done/tv/s1"),
            withIntermediateDirectories: true)
        try Data("someone else's".utf8).write(to: URL(fileURLWithPath: sandbox.file("downloads/done/tv/s1/ep.bin")))
        let id = try add(["url": originURL("ep.bin"), "category": "tv", "directory": "s1"])
        try waitForState(id, "completed")
        try waitForPath(id, "done/tv/s1/ep (1).bin")
        XCTAssertEqual(try sha256(sandbox.file("downloads/done/tv/s1/ep (1).bin")), hash)
        XCTAssertEqual(
            try String(contentsOfFile: sandbox.file("downloads/done/tv/s1/ep.bin"), encoding: .utf8),
            "someone else's")
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.file("downloads/tv/s1/ep.bin")))
        let served = try api.get("/downloads/\(id)/file")
        XCTAssertEqual(served.status, 200)
        XCTAssertEqual(served.body.count, 300_000)
        let category = try api.get("/categories/tv").json
        XCTAssertEqual(category["completed_directory"] as? String, "done/tv")
        // Removing it with its file removes the moved file, not the neighbour.
        XCTAssertEqual(try api.request("DELETE", "/downloads/\(id)?delete_file=true").status, 204)
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.file("downloads/done/tv/s1/ep (1).bin")))
        XCTAssertTrue(FileManager.default.fileExists(atPath: sandbox.file("downloads/done/tv/s1/ep.bin")))
        // A category without a completed folder leaves files where they were written.
        try putCategory("stay", [:])
        let stays = try add(["url": originURL("ep.bin"), "category": "stay"])
        XCTAssertEqual(try waitForState(stays, "completed")["path"] as? String, "stay/ep.bin")
        XCTAssertEqual(try api.request("PUT", "/categories/bad", json: ["completed_directory": "../up"]).status, 422)
    }

    func testARefusedMoveSaysWhyInTheResource() throws {
        // The completed folder is a symbolic link (to somewhere outside the root): the file stays where it was
        // written, whole, and the resource says why.
        try FileManager.default.createDirectory(atPath: sandbox.file("downloads"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: sandbox.file("downloads/linked"), withDestinationPath: "/tmp")
        try putCategory("films", ["completed_directory": "linked"])
        let hash = try sandbox.makeRandomFile("www/film.bin", size: 100_000)
        let id = try add(["url": originURL("film.bin"), "category": "films"])
        try waitForState(id, "completed")
        var last: [String: Any] = [:]
        try waitFor("the move's refusal to be shown") {
            last = try self.download(id)
            return !(last["move_error"] is NSNull) && last["move_error"] != nil
        }
        XCTAssertEqual(last["moved"] as? Bool, false)
        XCTAssertTrue((last["move_error"] as? String ?? "").contains("symbolic link"), "\(last)")
        XCTAssertEqual(try sha256(sandbox.file("downloads/films/film.bin")), hash)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "/tmp/film.bin"))
        // `haul info` says so too.
        let info = try haulCommand(["info", id])
        XCTAssertTrue(info.stdout.contains("symbolic link"), info.output)
        // Stored: still said after a restart (which tries again, and is refused again).
        try restart(crashingAt: nil)
        XCTAssertTrue((try download(id)["move_error"] as? String ?? "").contains("symbolic link"))
    }

    func testAKillAtEachStepOfAMoveOnOneFileSystemLeavesOneWholeFile() throws {
        try putCategory("films", ["completed_directory": "watched"])
        for (index, point) in ["move-linked", "move-unlinked", "move-stored"].enumerated() {
            let name = "f\(index).bin"
            let hash = try sandbox.makeRandomFile("www/\(name)", size: 200_000 + index * 1000)
            try restart(crashingAt: point)
            let id = try add(["url": originURL(name), "category": "films"])
            try waitFor("haul to die at \(point)") { !self.haul.isRunning }
            try restart(crashingAt: nil)
            try waitForPath(id, "watched/\(name)")
            try assertOneWholeFile(
                at: sandbox.file("downloads/watched/\(name)"), hash,
                notAt: sandbox.file("downloads/films/\(name)"), point)
        }
    }

    func testAKillAtEachStepOfAMoveAcrossFileSystemsLeavesOneWholeFile() throws {
        acrossFileSystems = true
        try restart(crashingAt: nil)
        var shm = stat(), disk = stat()
        XCTAssertEqual(stat(completedRoot, &shm), 0)
        XCTAssertEqual(stat(sandbox.file("downloads"), &disk), 0)
        XCTAssertNotEqual(shm.st_dev, disk.st_dev, "the completed root must be on another file system")
        try putCategory("iso", ["completed_directory": "isos"])
        let points = ["move-copying", "move-copied", "move-named", "move-unlinked", "move-stored", nil]
        for (index, point) in points.enumerated() {
            let name = "i\(index).bin"
            // Several MiB: the copy is in progress when it is cut at half.
            let hash = try sandbox.makeRandomFile("www/\(name)", size: 6_000_000 + index * 4096)
            try restart(crashingAt: point)
            let id = try add(["url": originURL(name), "category": "iso"])
            if let point {
                try waitFor("haul to die at \(point)") { !self.haul.isRunning }
                try restart(crashingAt: nil)
            }
            let done = try waitForPath(id, "isos/\(name)")
            XCTAssertEqual(done["state"] as? String, "completed")
            try assertOneWholeFile(
                at: completedRoot + "/isos/\(name)", hash,
                notAt: sandbox.file("downloads/iso/\(name)"), point ?? "no crash")
            let served = try api.get("/downloads/\(id)/file")
            XCTAssertEqual(served.status, 200, "\(point ?? "no crash"): \(served.text.prefix(200))")
            XCTAssertEqual(served.body.count, 6_000_000 + index * 4096)
        }
    }

    /// The file is whole where it went, gone where it was written, and no marker of the move is left.
    private func assertOneWholeFile(
        at path: String, _ hash: String, notAt source: String, _ point: String,
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        XCTAssertEqual(try sha256(path), hash, point, file: file, line: line)
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: source), "\(point): still at \(source)",
            file: file, line: line)
        let folder = (path as NSString).deletingLastPathComponent
        try waitFor("\(point): the marker to go") {
            try FileManager.default.contentsOfDirectory(atPath: folder).allSatisfy { !$0.hasPrefix(".haul-move") }
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: folder)
        let base = (path as NSString).lastPathComponent
        XCTAssertEqual(
            names.filter { $0.hasPrefix(String(base.prefix(2))) }, [base], "\(point): \(names)",
            file: file, line: line)
    }
}
