import Foundation
import XCTest

/// The database holds the Authorization and Cookie headers and URL passwords clients gave: only the server's user
/// may read it, on a fresh start and after an upgrade from a version that left it world-readable.
final class SecretsAtRestTests: HaulTestCase {
    private func mode(_ path: String) -> mode_t? {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode & 0o777 : nil
    }

    func testTheDataDirectoryAndDatabaseArePrivate() throws {
        _ = try add([
            "url": "http://127.0.0.1:9/secret.bin", "headers": ["Authorization": "Bearer abc"],
            "start_paused": true,
        ])
        XCTAssertEqual(mode(sandbox.file("data")), 0o700)
        XCTAssertEqual(mode(sandbox.file("data/haul.sqlite")), 0o600)
        try waitFor("the write-ahead log") {
            FileManager.default.fileExists(atPath: sandbox.file("data/haul.sqlite-wal"))
        }
        XCTAssertEqual(mode(sandbox.file("data/haul.sqlite-wal")), 0o600)
        if let shm = mode(sandbox.file("data/haul.sqlite-shm")) { XCTAssertEqual(shm, 0o600) }
        // Downloads are the user's files, readable as usual.
        XCTAssertEqual(mode(sandbox.file("downloads")), 0o755)
    }

    func testAnOlderWorldReadableDatabaseIsTightenedOnStart() throws {
        _ = try add(["url": "http://127.0.0.1:9/old.bin", "start_paused": true])
        haul.stop(signal: SIGTERM)
        for path in ["data", "data/haul.sqlite", "data/haul.sqlite-wal"] {
            chmod(sandbox.file(path), path == "data" ? 0o755 : 0o644)
        }
        try startHaul()
        XCTAssertEqual(mode(sandbox.file("data")), 0o700)
        XCTAssertEqual(mode(sandbox.file("data/haul.sqlite")), 0o600)
        if let wal = mode(sandbox.file("data/haul.sqlite-wal")) { XCTAssertEqual(wal, 0o600) }
        XCTAssertEqual(try api.get("/stats").json["downloads"] as? Int, 1, "the download is still there")
    }
}
