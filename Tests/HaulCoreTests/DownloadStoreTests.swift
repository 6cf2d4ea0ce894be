import Foundation
import HaulLoop
import HaulTestSupport
import XCTest
@testable import HaulCore

/// Every test runs against both stores: SQLite in a file, and a real PostgreSQL (a database of its own per test).
final class DownloadStoreTests: XCTestCase {
    private var directory: String!

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "haul-store-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// One store: opened (again) by `open`, and reached beneath the store by `raw` to write what an older Haul did.
    private struct Backend {
        let name: String
        let open: () throws -> DownloadStore
        let raw: () throws -> any SQLDatabase
        let setVersion: (any SQLDatabase, Int) throws -> Void
    }

    private func forEachBackend(_ body: (Backend) throws -> Void) throws {
        let path = directory + "/haul.sqlite"
        try body(
            Backend(
                name: "sqlite", open: { try DownloadStore(path: path) },
                raw: { try SQLiteDatabase(path: path) },
                setVersion: { try $0.execute("PRAGMA user_version = \($1)") }))
        let url = try PostgresServer.shared().createDatabase()
        try body(
            Backend(
                name: "postgres", open: { try DownloadStore(postgres: url, node: "n1") },
                raw: { try PostgresDatabase(url: url) },
                setVersion: { db, version in
                    try db.execute(
                        "CREATE TABLE IF NOT EXISTS haul_schema (version BIGINT NOT NULL); "
                            + "DELETE FROM haul_schema; INSERT INTO haul_schema VALUES (\(version))")
                }))
    }

    func testEveryFieldSurvivesReopening() throws {
        let created = Date(timeIntervalSince1970: 1_800_000_000.25)
        var download = Download(
            id: "abc", sequence: 7, url: "https://u:p@h/file.bin",
            headers: [HeaderField(name: "Authorization", value: "Bearer t")],
            requestedFilename: "x.bin", directory: "sub/dir", state: .failed, connections: 4,
            priority: -3, maxSpeed: 1000, createdAt: created)
        download.filename = "x (1).bin"
        download.finalURL = "https://h/final.bin"
        download.totalBytes = 1 << 40
        download.segments = [
            Segment(start: 0, end: 999, received: 800),
            Segment(
                start: 1000, end: (1 << 40) - 1,
                received: 50),
        ]
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
        download.category = "films"
        try forEachBackend { backend in
            do {
                let store = try backend.open()
                try store.save(download)
                try store.saveJournal(
                    id: "abc",
                    [
                        Segment(start: 0, end: 999, received: 700),
                        Segment(start: 1000, end: (1 << 40) - 1, received: 40),
                    ],
                    updatedAt: created.addingTimeInterval(3))
            }
            let reopened = try backend.open()
            XCTAssertEqual(reopened.schemaVersion, DownloadStore.migrations.count, backend.name)
            var expected = download
            // Only the journal is stored: after a restart what was received is what is known to be on disk.
            expected.journal = [
                Segment(start: 0, end: 999, received: 700),
                Segment(
                    start: 1000, end: (1 << 40) - 1,
                    received: 40),
            ]
            expected.segments = expected.journal
            expected.updatedAt = created.addingTimeInterval(3)
            expected.error?.retryable = false
            XCTAssertEqual(try reopened.loadAll(), [expected], backend.name)
            try reopened.delete(id: "abc")
            XCTAssertEqual(try reopened.loadAll(), [], backend.name)
        }
    }

    func testSavingAgainWithTheSameJournalKeepsItsSegments() throws {
        var download = Download(
            id: "seg", sequence: 1, url: "http://h/f", headers: [], requestedFilename: nil,
            directory: "", state: .downloading, connections: 4, priority: 0, maxSpeed: nil,
            createdAt: Date(timeIntervalSince1970: 1_800_000_000))
        download.journal = [Segment(start: 0, end: 499, received: 300), Segment(start: 500, end: 999, received: 20)]
        try forEachBackend { backend in
            var download = download
            do {
                let store = try backend.open()
                try store.save(download)
                // A state change: the row is written again, the journal is as it was (and is not written again).
                download.state = .paused
                try store.save(download)
            }
            let loaded = try backend.open().loadAll()
            XCTAssertEqual(loaded.first?.state, .paused, backend.name)
            XCTAssertEqual(loaded.first?.journal, download.journal, "the second save must not lose the segments")
        }
    }

    func testReadingBesideTheCallerHandsTheSameDownloadsInTheSameOrder() throws {
        // More than a few batches, each with a journal of its own, and one with none.
        let downloads = (0..<3_000).map { n in
            var download = Download(
                id: "d\(n)", sequence: Int64(n + 1), url: "http://h/\(n)", headers: [], requestedFilename: nil,
                directory: "", state: n % 3 == 0 ? .completed : .paused, connections: 2, priority: n % 5,
                maxSpeed: nil, createdAt: Date(timeIntervalSince1970: 1_800_000_000 + Double(n)))
            if n % 7 != 0 {
                download.journal = [
                    Segment(start: 0, end: 99, received: Int64(n % 100)), Segment(start: 100, end: nil, received: 1),
                ]
            }
            download.segments = download.journal
            return download
        }
        try forEachBackend { backend in
            let store = try backend.open()
            try store.transaction { for download in downloads { try store.save(download) } }
            var overlapped: [Download] = []
            try store.forEachOverlapped { overlapped.append($0) }
            XCTAssertEqual(overlapped.count, downloads.count, backend.name)
            XCTAssertEqual(overlapped, try store.loadAll(), backend.name)
            XCTAssertEqual(overlapped.map(\.id), downloads.map(\.id), backend.name)
            XCTAssertEqual(overlapped[1].journal, downloads[1].journal, backend.name)
            // A body that throws stops the reading, and the store answers the caller again at once.
            struct Enough: Error {}
            var handed = 0
            XCTAssertThrowsError(
                try store.forEachOverlapped { _ in
                    handed += 1
                    if handed == 1_500 { throw Enough() }
                }, backend.name)
            XCTAssertEqual(handed, 1_500, backend.name)
            XCTAssertEqual(try store.count(), downloads.count, backend.name)
            XCTAssertEqual(try store.load(id: "d2999")?.sequence, 3_000, backend.name)
        }
    }

    func testOpensTheDatabaseOfTheFirstSchemaAndMigratesIt() throws {
        try forEachBackend { backend in
            do {
                // What the first Haul wrote: schema 1 and one row.
                let db = try backend.raw()
                try db.execute(db.dialect.ddl(DownloadStore.migrations[0]))
                try backend.setVersion(db, 1)
                try db.run(
                    """
                    INSERT INTO downloads (id, seq, url, state, connections, received_bytes, created_at, updated_at)
                    VALUES ('old', 1, 'http://h/f', 'paused', 1, 42, 1800000000, 1800000000)
                    """)
            }
            let store = try backend.open()
            XCTAssertEqual(store.schemaVersion, DownloadStore.migrations.count, backend.name)
            let loaded = try store.loadAll()
            XCTAssertEqual(loaded.map(\.id), ["old"], backend.name)
            XCTAssertEqual(loaded.first?.state, .paused, backend.name)
            XCTAssertEqual(loaded.first?.durableBytes, 42, backend.name)
            XCTAssertEqual(loaded.first?.segments, [Segment(start: 0, end: nil, received: 42)], backend.name)
        }
    }

    func testRefusesADatabaseFromANewerHaul() throws {
        try forEachBackend { backend in
            do {
                let db = try backend.raw()
                try backend.setVersion(db, 999)
            }
            XCTAssertThrowsError(try backend.open(), backend.name) { error in
                XCTAssertTrue("\(error)".contains("newer than this Haul knows"), "\(backend.name): \(error)")
            }
        }
    }

    func testASecondServerOnTheSameStoreIsRefused() throws {
        try forEachBackend { backend in
            let first = try backend.open()
            XCTAssertThrowsError(try backend.open(), backend.name) { error in
                XCTAssertTrue(error is DownloadStore.StoreInUse, "\(backend.name): \(error)")
            }
            withExtendedLifetime(first) {}
            // Once the first one is gone, the store opens again.
        }
    }

    func testSettingsIdempotencyKeysAndCountsOnEitherStore() throws {
        try forEachBackend { backend in
            let store = try backend.open()
            XCTAssertNil(try store.settings(), backend.name)
            try store.saveSettings("{\"max_active\":3}")
            try store.saveSettings("{\"max_active\":4}")
            XCTAssertEqual(try store.settings(), "{\"max_active\":4}", backend.name)
            try store.rememberIdempotencyAnswer(key: "k1", downloadID: "d1", requestHash: "h", status: 201)
            // The first answer stays: a second remember with the same key changes nothing.
            try store.rememberIdempotencyAnswer(key: "k1", downloadID: "d2", requestHash: "h2", status: 200)
            XCTAssertEqual(try store.idempotencyAnswer(key: "k1")?.downloadID, "d1", backend.name)
            try store.rememberBatchAnswer(key: "b1", requestHash: "hb", answer: "[1]")
            XCTAssertEqual(try store.batchAnswer(key: "b1")?.answer, "[1]", backend.name)
            // Text with quotes, a question mark and non-ASCII goes through as bound values, not SQL.
            var odd = Download(
                id: "q?'\"", sequence: 1, url: "http://h/a?b='c'&d=\"é\"", headers: [],
                requestedFilename: "名前 ?.bin", directory: "", state: .queued, connections: 1,
                priority: 0, maxSpeed: nil, createdAt: Date(timeIntervalSince1970: 1_800_000_000))
            odd.updatedAt = odd.createdAt
            try store.save(odd)
            XCTAssertEqual(try store.count(), 1, backend.name)
            XCTAssertEqual(try store.loadAll().first?.url, odd.url, backend.name)
            XCTAssertEqual(try store.loadAll().first?.requestedFilename, odd.requestedFilename, backend.name)
        }
    }

    // MARK: claims (PostgreSQL: several nodes)

    private func queued(_ id: String, sequence: Int64, priority: Int = 0) -> Download {
        var download = Download(
            id: id, sequence: sequence, url: "http://h/\(id)", headers: [],
            requestedFilename: nil, directory: "", state: .queued, connections: 1,
            priority: priority, maxSpeed: nil, createdAt: Date(timeIntervalSince1970: 1_800_000_000))
        download.updatedAt = download.createdAt
        return download
    }

    func testClaimsAreDisjointAndFencedAndALapsedLeaseIsTakenOver() throws {
        let url = try PostgresServer.shared().createDatabase()
        let a = try DownloadStore(postgres: url, node: "a")
        let b = try DownloadStore(postgres: url, node: "b")
        for index in 0..<10 {
            try a.save(queued("d\(index)", sequence: Int64(index + 1), priority: index == 7 ? 5 : 0))
        }
        let fromA = try a.claim(node: "a", limit: 4, lease: 30, peers: ["b"])
        XCTAssertEqual(fromA.map(\.id), ["d7", "d0", "d1", "d2"], "highest priority first, then oldest")
        let fromB = try b.claim(node: "b", limit: 10, lease: 30, peers: ["a"])
        XCTAssertEqual(Set(fromB.map(\.id)), Set((0..<10).map { "d\($0)" }).subtracting(fromA.map(\.id)))
        XCTAssertEqual(
            try a.claim(node: "a", limit: 10, lease: 30, peers: ["b"]), [], "a claimed download is nobody else's")
        XCTAssertEqual(try b.load(id: "d7")?.node, "a")

        // The holder writes with its fence; a client's change on another node ends the claim.
        var d7 = try XCTUnwrap(try a.load(id: "d7"))
        d7.state = .downloading
        XCTAssertTrue(try a.save(d7, claim: .fenced(fromA[0].fence)))
        XCTAssertTrue(
            try a.saveJournal(
                id: "d7", [Segment(start: 0, end: 99, received: 10)], updatedAt: Date(),
                claim: .fenced(fromA[0].fence)))
        var paused = try XCTUnwrap(try b.load(id: "d0"))
        paused.state = .paused
        XCTAssertTrue(try b.save(paused, claim: .overriding))
        XCTAssertEqual(try a.renew(node: "a", fromA, lease: 30), ["d7", "d1", "d2"], "d0's claim ended")
        XCTAssertFalse(
            try a.save(try XCTUnwrap(try a.load(id: "d0")), claim: .fenced(fromA[1].fence)),
            "the old holder can write no more")
        XCTAssertEqual(try a.load(id: "d0")?.state, .paused)

        // a stops renewing (dead, or cut off): once its lease ran out, b takes its running download over.
        _ = try a.renew(node: "a", [fromA[0]], lease: 0.2)
        XCTAssertEqual(try b.claim(node: "b", limit: 10, lease: 30, peers: ["a"]), [], "not before the lease ends")
        usleep(400_000)
        let c = try DownloadStore(postgres: url, node: "c")
        XCTAssertEqual(
            try c.claim(node: "c", limit: 10, lease: 30, peers: []), [],
            "a node that does not share a's directory leaves a's download where its files are")
        let takeover = try b.claim(node: "b", limit: 1, lease: 30, peers: ["a"])
        XCTAssertEqual(takeover.map(\.id), ["d7"])
        XCTAssertGreaterThan(takeover[0].fence, fromA[0].fence)
        let taken = try XCTUnwrap(try b.load(id: "d7"))
        XCTAssertEqual(taken.node, "b")
        XCTAssertEqual(taken.journal, [Segment(start: 0, end: 99, received: 10)], "b goes on from a's journal")
        d7.state = .completed
        XCTAssertFalse(try a.save(d7, claim: .fenced(fromA[0].fence)), "a's late write is refused")
        XCTAssertFalse(
            try a.saveJournal(
                id: "d7", [Segment(start: 0, end: 99, received: 90)], updatedAt: Date(),
                claim: .fenced(fromA[0].fence)))
        XCTAssertEqual(try b.load(id: "d7")?.state, .downloading)
        XCTAssertEqual(try b.load(id: "d7")?.journal, [Segment(start: 0, end: 99, received: 10)])
        XCTAssertEqual(try a.renew(node: "a", [fromA[0]], lease: 30), [])
    }

    func testHeartbeatsTellWhichNodesAreAlive() throws {
        let url = try PostgresServer.shared().createDatabase()
        let a = try DownloadStore(postgres: url, node: "a")
        let b = try DownloadStore(postgres: url, node: "b")
        XCTAssertEqual(try a.heartbeat(node: "a", mark: "ma", lease: 10).map(\.name), ["a"])
        let both = try b.heartbeat(node: "b", mark: "mb", lease: 10)
        XCTAssertEqual(
            both,
            [
                DownloadStore.NodeRecord(name: "a", mark: "ma", alive: true),
                DownloadStore.NodeRecord(name: "b", mark: "mb", alive: true),
            ])
        try a.leave(node: "a")
        XCTAssertEqual(
            try b.heartbeat(node: "b", mark: "mb", lease: 10).filter(\.alive).map(\.name), ["b"],
            "a node that left is not counted, but stays known (its downloads may be taken over)")
    }

    func testNodesClaimingAtOnceNeverShareADownload() throws {
        let url = try PostgresServer.shared().createDatabase()
        let setup = try DownloadStore(postgres: url, node: "setup")
        try setup.transaction {
            for index in 0..<300 { try setup.save(queued("c\(index)", sequence: Int64(index + 1))) }
        }
        let results = LockedClaims()
        let group = DispatchGroup()
        for node in ["n1", "n2", "n3"] {
            DispatchQueue.global().async(group: group) {
                do {
                    let store = try DownloadStore(postgres: url, node: node)
                    while true {
                        let claims = try store.claim(node: node, limit: 7, lease: 30, peers: [])
                        if claims.isEmpty { break }
                        results.add(node, claims.map(\.id))
                    }
                } catch {
                    results.fail("\(node): \(error)")
                }
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success)
        let (byNode, errors) = results.taken
        XCTAssertEqual(errors, [])
        let all = byNode.values.flatMap { $0 }
        XCTAssertEqual(all.count, 300, "each download claimed once")
        XCTAssertEqual(Set(all).count, 300)
        XCTAssertEqual(try setup.loadAll().filter { $0.node == nil }.count, 0)
    }

    func testTheOutboxHoldsADeliveryInFlightAndGivesItBackAfterARestart() throws {
        try forEachBackend { backend in
            let store = try backend.open()
            let created = Date(timeIntervalSince1970: 1_800_000_000)
            let hook = Webhook(
                id: "w1", url: "http://127.0.0.1:1/hook", secret: "whsec_x", events: [.completed, .removed],
                category: "films", createdAt: created)
            try store.insertWebhook(hook)
            XCTAssertEqual(try store.webhooks(), [hook], backend.name)
            let changes = (0..<3).map { index in
                WebhookChange(
                    id: "c\(index)", downloadID: "x\(index)", category: "films", kinds: [.state, .completed],
                    createdAt: created.addingTimeInterval(Double(index)), resource: "{\"n\":\(index)}")
            }
            try store.transaction { try store.insertChanges(changes) }
            XCTAssertEqual(try store.fanOut(to: [hook], limit: 1000).made, 3, "one delivery per change: completed")
            let now = created.addingTimeInterval(10)
            let taken = try store.takeDueDeliveries(node: "n1", now: now, hold: 30, webhookID: "w1", limit: 2)
            XCTAssertEqual(taken.map(\.downloadID), ["x0", "x1"], backend.name)
            XCTAssertEqual(taken.map(\.changeID), ["c0", "c1"])
            XCTAssertEqual(try store.changeResources(["c0", "c9"]), ["c0": "{\"n\":0}"])
            // Held while in flight: not taken again, by this node or another, until the hold runs out.
            XCTAssertEqual(
                try store.takeDueDeliveries(node: "n2", now: now, hold: 30, webhookID: "w1", limit: 5)
                    .map(\.downloadID), ["x2"])
            XCTAssertEqual(
                try store.takeDueDeliveries(
                    node: "n2", now: now.addingTimeInterval(29), hold: 30,
                    webhookID: "w1", limit: 5), [])
            var delivered = taken[0]
            delivered.state = .delivered
            delivered.attempts = 1
            delivered.lastStatus = 204
            delivered.lastAttemptAt = now
            try store.recordAttempts([delivered])
            // n1 restarts: what it held is due again at once; what n2 holds is not.
            try store.releaseDeliveries(node: "n1", now: now.addingTimeInterval(1))
            XCTAssertEqual(
                try store.takeDueDeliveries(
                    node: "n1", now: now.addingTimeInterval(1), hold: 30,
                    webhookID: "w1", limit: 5
                ).map(\.downloadID), ["x1"],
                backend.name)
            let recorded = try store.deliveries(of: .webhook("w1"), limit: 10)
            XCTAssertEqual(recorded.map(\.downloadID), ["x2", "x1", "x0"])
            XCTAssertEqual(recorded.last?.state, .delivered)
            XCTAssertEqual(recorded.last?.lastStatus, 204)
            XCTAssertEqual(try store.deliveryCounts(), [.pending: 2, .delivered: 1], backend.name)
            // The delivered one left the outbox (its record stays): its change is no longer needed.
            XCTAssertEqual(try store.pruneChanges(), 1)
            XCTAssertEqual(try store.changeResources(["c0", "c1"]).keys.sorted(), ["c1"])
            // The records of delivered ones keep each webhook's newest.
            var later = taken[1]
            later.state = .delivered
            later.attempts = 2
            later.lastAttemptAt = now.addingTimeInterval(5)
            try store.recordAttempts([later])
            XCTAssertEqual(try store.deliveries(of: .webhook("w1"), limit: 10).map(\.downloadID), ["x2", "x1", "x0"])
            XCTAssertEqual(try store.pruneDelivered(webhookID: "w1", keep: 1, limit: 10), 1)
            XCTAssertEqual(try store.deliveries(of: .webhook("w1"), limit: 10).map(\.downloadID), ["x2", "x1"])
            XCTAssertEqual(try store.deliveryCounts()[.delivered], 1)
            // A removed webhook takes its outbox with it.
            XCTAssertTrue(try store.deleteWebhook(id: "w1"))
            XCTAssertFalse(try store.deleteWebhook(id: "w1"))
            XCTAssertEqual(try store.deliveries(of: .webhook("w1"), limit: 10), [])
        }
    }

    /// A change reaches only the webhooks that want it and existed when it happened, and the fan-out goes a
    /// slice at a time.
    func testChangesAreFannedOutInSlicesToTheWebhooksThatWantThem() throws {
        try forEachBackend { backend in
            let store = try backend.open()
            let t0 = Date(timeIntervalSince1970: 1_800_000_000)
            let every = Webhook(
                id: "wa", url: "http://h/a", secret: "s", events: [.state], category: nil, createdAt: t0)
            let films = Webhook(
                id: "wf", url: "http://h/f", secret: "s", events: [.state, .completed],
                category: "films", createdAt: t0)
            let late = Webhook(
                id: "wl", url: "http://h/l", secret: "s", events: [.state], category: nil,
                createdAt: t0.addingTimeInterval(1000))
            for hook in [every, films, late] { try store.insertWebhook(hook) }
            let changes = (0..<10).map { index in
                WebhookChange(
                    id: "c\(index)", downloadID: "d\(index)", category: index < 5 ? "films" : nil,
                    kinds: [.state, .completed], createdAt: t0.addingTimeInterval(Double(index)),
                    resource: "{}")
            }
            try store.transaction { try store.insertChanges(changes) }
            XCTAssertTrue(try store.hasChangesToFanOut())
            var made = 0
            var slices = 0
            while true {
                let slice = try store.fanOut(to: [every, films, late], limit: 12)
                made += slice.made
                slices += 1
                if !slice.more { break }
            }
            XCTAssertGreaterThan(slices, 1, backend.name)
            XCTAssertFalse(try store.hasChangesToFanOut())
            // 10 for `every`, 2 x 5 for `films` (state and completed of its own category), none for the late one.
            XCTAssertEqual(made, 20, backend.name)
            XCTAssertEqual(try store.deliveries(of: .webhook("wf"), limit: 100).count, 10)
            XCTAssertEqual(try store.deliveries(of: .webhook("wl"), limit: 100).count, 0)
        }
    }

    func testRowsAreReadByColumnNameWhateverTheOrderSelected() throws {
        // Both databases name a row's values as the query selects them, aliases and RETURNING included; a statement
        // run again (prepared once, its names cached) names the new rows the same way.
        try forEachBackend { backend in
            let db = try backend.raw()
            try db.execute("CREATE TABLE t (a INTEGER, b TEXT, c REAL)")
            try db.run("INSERT INTO t (a, b, c) VALUES (?, ?, ?)", [.integer(7), .text("seven"), .real(0.5)])
            for _ in 0..<2 {
                let row = try XCTUnwrap(try db.query("SELECT c, b, a, a * 2 AS twice FROM t").first, backend.name)
                XCTAssertEqual(row["a"], .integer(7), backend.name)
                XCTAssertEqual(row["b"], .text("seven"), backend.name)
                XCTAssertEqual(row["c"].double, 0.5, backend.name)
                XCTAssertEqual(row["twice"], .integer(14), backend.name)
                XCTAssertEqual(row.first?.double, 0.5, backend.name)
            }
            let returned = try db.query("UPDATE t SET b = ? RETURNING b, a", [.text("eight")])
            XCTAssertEqual(returned.map { $0["b"] }, [.text("eight")], backend.name)
            XCTAssertEqual(returned.first?.columns.names, ["b", "a"], backend.name)
        }
    }

    func testEachColumnIsWrittenAndReadByTheSameEntry() {
        // Every column of the table has one entry, and names are unique: the list drives both directions.
        let names = DownloadColumn.all.map(\.name)
        XCTAssertEqual(Set(names).count, names.count)
        for name in ["id", "seq", "url", "state", "insecure", "expected_bytes"] { XCTAssertTrue(names.contains(name)) }
    }
}

private final class LockedClaims: @unchecked Sendable {
    private let lock = NSLock()
    private var byNode: [String: [String]] = [:]
    private var errors: [String] = []

    func add(_ node: String, _ ids: [String]) { lock.withLock { byNode[node, default: []] += ids } }
    func fail(_ message: String) { lock.withLock { errors.append(message) } }
    var taken: ([String: [String]], [String]) { lock.withLock { (byNode, errors) } }
}
