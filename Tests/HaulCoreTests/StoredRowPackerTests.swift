import Foundation
import HaulLoop
import HaulTestSupport
import XCTest
@testable import HaulCore

/// Start-up packs a stored row of the usual shape straight into a packed download's bytes: they must be the bytes
/// the download read whole packs to, and a row of any other shape must be read whole, on SQLite and PostgreSQL.
final class StoredRowPackerTests: XCTestCase {
    private var directory: String!

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "haul-packer-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func download(_ n: Int, _ change: (inout Download) -> Void = { _ in }) -> Download {
        var d = Download(
            id: "r\(n)", sequence: Int64(n), url: "http://127.0.0.1:9/m/\(n).bin", headers: [],
            requestedFilename: nil, directory: "", state: .paused, connections: 4, priority: 0, maxSpeed: nil,
            createdAt: Date(timeIntervalSince1970: 1_800_000_000.123_456 + Double(n)))
        change(&d)
        d.segments = d.journal
        return d
    }

    /// Rows the packer takes (`true`) and rows it leaves to be read whole (`false`).
    private var cases: [(Download, Bool)] {
        [
            (download(1), true),
            (
                download(2) { d in
                    d.state = .queued
                    d.queueRank = -42
                    d.priority = -3
                    d.category = "tv"
                    d.owner = "tok1"
                    d.ownerName = "sonarr"
                    d.tags = "a,b"
                    d.directory = "tv/shows"
                    d.requestedFilename = ""
                    d.connections = 16
                    d.maxSpeed = Int64.max
                    d.insecure = true
                    d.sequential = true
                    d.firstLast = true
                    d.kind = .file
                    d.node = "node-1"
                    d.fence = Int64.min
                    d.attempts = 5
                }, true
            ),
            (
                download(3) { d in
                    d.state = .completed
                    d.filename = "3.bin"
                    d.finalURL = d.url
                    d.totalBytes = 1 << 40
                    d.journal = [Segment(start: 0, end: (1 << 39) - 1, received: 1 << 39)]
                    d.journal.append(Segment(start: 1 << 39, end: (1 << 40) - 1, received: 1 << 39))
                    d.etag = "\"abc\""
                    d.lastModified = "Wed, 21 Oct 2015 07:28:00 GMT"
                    d.contentType = "application/octet-stream"
                    d.fileStamp = FileStamp(device: UInt64.max, inode: 1, size: 1 << 40)
                    d.acceptsRanges = true
                    d.startedAt = Date(timeIntervalSince1970: 1e9 + 0.5)
                    d.completedAt = Date(timeIntervalSince1970: 2e9)
                    d.updatedAt = Date(timeIntervalSince1970: -1.5)
                    d.completedDirectory = "done"
                    d.moved = true
                    d.moveSettled = true
                }, true
            ),
            (
                download(4) { d in
                    d.state = .paused
                    d.finalURL = "https://cdn.test/final"
                    d.journal = [Segment(start: 0, end: nil, received: 7)]
                    d.hookPending = true
                    d.moved = true
                    d.completedDirectory = "later"
                    d.kind = .hls
                }, true
            ),
            // An unknown state reads as failed either way.
            (download(5) { d in d.state = .failed }, true),
            (download(6) { d in d.url = "http://127.0.0.1:9/パス/é.bin" }, true),
            (download(7) { d in d.filename = "naïve.bin" }, true),
            (download(8) { d in d.headers = [HeaderField(name: "Authorization", value: "Bearer x")] }, false),
            (download(9) { d in d.mirrors = [Mirror(url: "http://mirror.test/a")] }, false),
            (download(10) { d in d.error = DownloadError(.http(404), "not found") }, false),
            (download(11) { d in d.checksum = "sha256:00" }, false),
            (download(12) { d in d.expectedBytes = 10 }, false),
            (download(13) { d in d.userAgent = "x" }, false),
            (download(14) { d in d.hookStatus = 0 }, false),
        ]
    }

    private func backends() throws -> [(String, () throws -> DownloadStore)] {
        let path = directory + "/haul.sqlite"
        let url = try PostgresServer.shared().createDatabase()
        return [
            ("sqlite", { try DownloadStore(path: path) }),
            ("postgres", { try DownloadStore(postgres: url, node: "n1") }),
        ]
    }

    func testRowsOfTheUsualShapePackToTheBytesOfTheDownloadReadWhole() throws {
        let cases = self.cases
        for (name, open) in try backends() {
            let store = try open()
            try store.transaction { for (download, _) in cases { try store.save(download) } }
            let whole = try store.loadAll()
            var stored: [StoredDownload] = []
            try store.forEachStoredOverlapped { stored.append($0) }
            XCTAssertEqual(stored.count, cases.count, name)
            for (index, item) in stored.enumerated() {
                let (download, packs) = cases[index]
                switch item {
                case .packed(let row):
                    let packed = row.packed
                    XCTAssertTrue(packs, "\(name): \(download.id) should have been read whole")
                    XCTAssertEqual(packed, PackedDownload(whole[index]), "\(name): \(download.id)")
                    XCTAssertEqual(packed.download, whole[index], "\(name): \(download.id)")
                    // What the start reads of the bytes to tell whether it has more to do than index it.
                    XCTAssertEqual(packed.state, whole[index].state, "\(name): \(download.id)")
                    XCTAssertEqual(packed.hookPending, whole[index].hookPending, "\(name): \(download.id)")
                    XCTAssertEqual(packed.moveSettled, whole[index].moveSettled, "\(name): \(download.id)")
                    XCTAssertEqual(
                        packed.hasCompletedDirectory, whole[index].completedDirectory != nil, "\(name): \(download.id)")
                case .whole(let read):
                    XCTAssertFalse(packs, "\(name): \(download.id) should have been packed")
                    XCTAssertEqual(read, whole[index], "\(name): \(download.id)")
                }
            }
            // What went in came back: the packed ones too.
            XCTAssertEqual(stored.map(\.download.id), cases.map(\.0.id), name)
            XCTAssertEqual(stored[2].download.journal, cases[2].0.journal, name)
        }
    }

    /// A database from before segments kept only a byte count: the packed journal is made from it as the whole
    /// read makes it; a state this Haul does not know reads as failed. A text that is not UTF-8 is read whole (and
    /// repaired); one with a NUL stops at it either way.
    func testAByteCountWithoutSegmentsAndAnUnknownStatePackAsTheyReadWhole() throws {
        let path = directory + "/haul.sqlite"
        do {
            // Closed before the database is changed beneath it: the store holds it exclusively.
            let store = try DownloadStore(path: path)
            try store.save(download(1) { d in d.totalBytes = 1000 })
            try store.save(download(2))
            try store.save(download(3))
            try store.save(download(4))
        }
        let raw = try SQLiteDatabase(path: path)
        try raw.execute("DELETE FROM segments")
        try raw.execute("UPDATE downloads SET received_bytes = 300 WHERE id = 'r1'")
        try raw.execute("UPDATE downloads SET state = 'sleeping' WHERE id = 'r2'")
        try raw.execute("UPDATE downloads SET filename = CAST(X'6E61C3' AS TEXT) WHERE id = 'r3'")
        try raw.execute("UPDATE downloads SET filename = CAST(X'6E6100C3A9' AS TEXT) WHERE id = 'r4'")
        raw.close()
        let store = try DownloadStore(path: path)
        let whole = try store.loadAll()
        XCTAssertEqual(whole[0].journal, [Segment(start: 0, end: 999, received: 300)])
        XCTAssertEqual(whole[1].state, .failed)
        XCTAssertEqual(whole[2].filename, "na\u{FFFD}")
        XCTAssertEqual(whole[3].filename, "na")
        var stored: [StoredDownload] = []
        try store.forEachStoredOverlapped { stored.append($0) }
        XCTAssertEqual(stored.count, 4)
        for (index, item) in stored.enumerated() {
            switch item {
            case .packed(let row):
                let packed = row.packed
                XCTAssertNotEqual(index, 2, "a text that is not UTF-8 was packed")
                XCTAssertEqual(packed, PackedDownload(whole[index]))
            case .whole(let download):
                XCTAssertEqual(index, 2, "r\(index + 1) was read whole")
                XCTAssertEqual(download, whole[index])
            }
        }
    }
}
