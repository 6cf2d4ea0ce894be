import Foundation
import HaulTestSupport
import XCTest

/// `haul serve --store postgres://...`: a real PostgreSQL (a database of its own per test) holds what SQLite holds
/// for one node, and a crash loses and repeats nothing, as with SQLite.
final class PostgresStoreTests: HaulTestCase {
    private var storeURL: String!

    override var serveArguments: [String] { super.serveArguments + ["--store", storeURL] }

    override func setUpWithError() throws {
        storeURL = try PostgresServer.shared().createDatabase()
        try super.setUpWithError()
    }

    func testAKilledServerResumesFromTheJournalInPostgres() throws {
        let size = 8_000_000
        let hash = try sandbox.makeRandomFile("www/pg.bin", size: size)
        let id = try add(["url": originURL("pg.bin", "rate=2000000"), "connections": 2])
        // Two connections at 2 MB/s each: past 4 MB, more than one checkpoint (every second) is in the store.
        try waitFor("a checkpoint in PostgreSQL") { int(try download(id)["received_bytes"]) > 4_500_000 }
        haul.stop(signal: SIGKILL)
        try startHaul()
        let journaled = int(try download(id)["received_bytes"])
        XCTAssertGreaterThan(journaled, 0, "the checkpoints before the kill are in the store")
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        let sent = try originRequests().filter { ($0["path"] as? String) == "/files/pg.bin" }
            .reduce(Int64(0)) { $0 + int($1["body_bytes"]) }
        // At most about a checkpoint's worth (a second at 4 MB/s) is fetched twice.
        XCTAssertLessThan(sent - Int64(size), 5_000_000, "resumed, not started over")
        let resumed = try originRequests().filter { $0["method"] as? String == "GET" && $0["if_range"] != nil }
        XCTAssertFalse(resumed.isEmpty, "the resumed ranges are asked for with If-Range")
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: sandbox.file("data/haul.sqlite")),
            "with --store, nothing is kept in SQLite")
    }

    func testDownloadsSettingsAndListsLiveInTheDatabase() throws {
        let hash = try sandbox.makeRandomFile("www/one.bin", size: 300_000)
        let done = try waitForState(try add(["url": originURL("one.bin")]), "completed")
        let paused = try add([
            "url": originURL("two.bin"), "start_paused": true, "priority": 4,
            "headers": ["X-Token": "s3cret"],
        ])
        XCTAssertEqual(try api.request("PATCH", "/settings", json: ["max_active": 2]).status, 200)
        haul.stop(signal: SIGTERM)
        try startHaul()
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        let list = try api.get("/downloads?sort=-created").json["downloads"] as? [[String: Any]] ?? []
        XCTAssertEqual(list.map { $0["id"] as? String }, [paused, done["id"] as? String])
        XCTAssertEqual(list.first?["state"] as? String, "paused")
        XCTAssertEqual(list.first?["priority"] as? Int, 4)
        XCTAssertEqual(try api.get("/settings").json["max_active"] as? Int, 2)
    }

    /// What `haul serve --store store` printed when it refused to start.
    private func refusal(store: String, directory: String) -> String {
        do {
            let server = try ServerProcess(
                executable: buildDirectory + "/haul",
                arguments: [
                    "serve", "--listen", "127.0.0.1:0", "--download-dir", sandbox.file(directory),
                    "--store", store,
                ],
                logPath: sandbox.file(directory + ".log"))
            server.stop(signal: SIGKILL)
            XCTFail("haul serve --store \(store) started")
            return ""
        } catch {
            return "\(error)"
        }
    }

    func testASecondServerOnTheSameDatabaseIsRefusedAndAnUnreachableOneNamed() throws {
        // The same node name (the host's, by default) twice on one database.
        let second = refusal(store: storeURL, directory: "downloads2")
        XCTAssertTrue(second.contains("in use by another Haul"), second)
        let wrong = refusal(store: "postgresql://haul:hunter2@127.0.0.1:1/haul", directory: "downloads3")
        XCTAssertTrue(wrong.contains("cannot connect to postgresql://haul:***@127.0.0.1:1/haul"), wrong)
        XCTAssertFalse(wrong.contains("hunter2"), "the password is never printed")
        XCTAssertEqual(try api.get("/healthz").status, 200, "the first server is untouched")
    }
}
