import Foundation
import HaulLoop
import XCTest
@testable import HaulCore

final class DownloadStoreTests: XCTestCase {
    private var directory: String!

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "haul-store-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func testEveryFieldSurvivesReopening() throws {
        let created = Date(timeIntervalSince1970: 1_800_000_000.25)
        var download = Download(id: "abc", sequence: 7, url: "https://u:p@h/file.bin",
                                headers: [HeaderField(name: "Authorization", value: "Bearer t")],
                                requestedFilename: "x.bin", directory: "sub/dir", state: .failed, connections: 4,
                                priority: -3, maxSpeed: 1000, createdAt: created)
        download.filename = "x (1).bin"
        download.finalURL = "https://h/final.bin"
        download.totalBytes = 1 << 40
        download.segments = [Segment(start: 0, end: 999, received: 800), Segment(start: 1000, end: (1 << 40) - 1,
                                                                               received: 50)]
        download.journal = [Segment(start: 0, end: 999, received: 500), Segment(start: 1000, end: (1 << 40) - 1)]
        download.checksum = "sha256:" + String(repeating: "a", count: 64)
        download.acceptsRanges = true
        download.etag = "\"e\""
        download.lastModified = "Sun, 29 Nov 2026 10:00:00 GMT"
        download.contentType = "application/zip"
        download.error = DownloadError(.http(503), "the server answered HTTP 503")
        download.attempts = 5
        download.startedAt = created.addingTimeInterval(1)
        download.completedAt = nil
        download.updatedAt = created.addingTimeInterval(2)
        download.insecure = true
        download.expectedBytes = 1 << 40
        do {
            let store = try DownloadStore(path: directory + "/haul.sqlite")
            try store.save(download)
            try store.saveJournal(id: "abc", [Segment(start: 0, end: 999, received: 700),
                                              Segment(start: 1000, end: (1 << 40) - 1, received: 40)],
                                  updatedAt: created.addingTimeInterval(3))
        }
        let reopened = try DownloadStore(path: directory + "/haul.sqlite")
        XCTAssertEqual(reopened.schemaVersion, DownloadStore.migrations.count)
        var expected = download
        // Only the journal is stored: after a restart what was received is what is known to be on disk.
        expected.journal = [Segment(start: 0, end: 999, received: 700), Segment(start: 1000, end: (1 << 40) - 1,
                                                                               received: 40)]
        expected.segments = expected.journal
        expected.updatedAt = created.addingTimeInterval(3)
        expected.error?.retryable = false
        XCTAssertEqual(try reopened.loadAll(), [expected])
        try reopened.delete(id: "abc")
        XCTAssertEqual(try reopened.loadAll(), [])
    }

    func testSavingAgainWithTheSameJournalKeepsItsSegments() throws {
        var download = Download(id: "seg", sequence: 1, url: "http://h/f", headers: [], requestedFilename: nil,
                                directory: "", state: .downloading, connections: 4, priority: 0, maxSpeed: nil,
                                createdAt: Date(timeIntervalSince1970: 1_800_000_000))
        download.journal = [Segment(start: 0, end: 499, received: 300), Segment(start: 500, end: 999, received: 20)]
        do {
            let store = try DownloadStore(path: directory + "/haul.sqlite")
            try store.save(download)
            // A state change: the row is written again, the journal is as it was (and is not written again).
            download.state = .paused
            try store.save(download)
        }
        let loaded = try DownloadStore(path: directory + "/haul.sqlite").loadAll()
        XCTAssertEqual(loaded.first?.state, .paused)
        XCTAssertEqual(loaded.first?.journal, download.journal, "the second save must not lose the segments")
    }

    func testOpensTheDatabaseOfTheFirstSchemaAndMigratesIt() throws {
        let path = directory + "/haul.sqlite"
        do {
            // What the first Haul wrote: schema 1 and one row.
            let db = try SQLiteDatabase(path: path)
            try db.execute(DownloadStore.migrations[0])
            try db.execute("PRAGMA user_version = 1")
            try db.run("""
                INSERT INTO downloads (id, seq, url, state, connections, received_bytes, created_at, updated_at)
                VALUES ('old', 1, 'http://h/f', 'paused', 1, 42, 1800000000, 1800000000)
                """)
        }
        let store = try DownloadStore(path: path)
        XCTAssertEqual(store.schemaVersion, DownloadStore.migrations.count)
        let loaded = try store.loadAll()
        XCTAssertEqual(loaded.map(\.id), ["old"])
        XCTAssertEqual(loaded.first?.state, .paused)
        XCTAssertEqual(loaded.first?.durableBytes, 42)
        XCTAssertEqual(loaded.first?.segments, [Segment(start: 0, end: nil, received: 42)])
    }

    func testRefusesADatabaseFromANewerHaul() throws {
        let path = directory + "/haul.sqlite"
        do {
            let db = try SQLiteDatabase(path: path)
            try db.execute("PRAGMA user_version = 999")
        }
        XCTAssertThrowsError(try DownloadStore(path: path))
    }

    func testEachColumnIsWrittenAndReadByTheSameEntry() {
        // Every column of the table has one entry, and names are unique: the list drives both directions.
        let names = DownloadColumn.all.map(\.name)
        XCTAssertEqual(Set(names).count, names.count)
        for name in ["id", "seq", "url", "state", "insecure", "expected_bytes"] { XCTAssertTrue(names.contains(name)) }
    }
}
