import FoundationEssentials
import Glibc
import HaulLoop

/// Downloads and their options: in SQLite (WAL) in the data directory, or in PostgreSQL (`--store postgres://...`).
/// Schema changes are numbered migrations written once for both, applied in order and recorded (SQLite's
/// `PRAGMA user_version`, PostgreSQL's `haul_schema` table), so a newer Haul opens an older Haul's database.
public final class DownloadStore {
    let db: any SQLDatabase
    /// Where the store is, as messages may show it (no password).
    public let location: String

    /// Another process holds the database.
    public struct StoreInUse: Error, CustomStringConvertible {
        public var path: String
        public var fix = "give each server its own --data-dir"
        public var description: String { "\(path) is in use by another Haul; \(fix)" }
    }

    /// The SQLite database at `path`, created if missing.
    public convenience init(path: String) throws {
        try self.init(database: Self.openSQLite(path), location: path)
    }

    /// The PostgreSQL database at `url` (a libpq connection URI), its schema created or migrated, shared with
    /// other nodes; `node` names this one, and one process per name may use it (a session advisory lock, held as
    /// long as the connection, as SQLite's exclusive lock is).
    public convenience init(postgres url: String, node: String) throws {
        let db = try PostgresDatabase(url: url)
        // A node that just closed its connection (a restart, a store reopened) holds the lock until its backend
        // process has exited, which the server does after the connection is gone: asked again for up to a
        // second before the name is taken to be in use.
        var locked = false
        for attempt in 0..<20 {
            if attempt > 0 { usleep(50_000) }
            locked =
                try db.query(
                    "SELECT pg_try_advisory_lock(?, hashtext(?))",
                    [.integer(Self.nodeLock), .text(node)]
                ).first?.first?.int == 1
            if locked { break }
        }
        guard locked else {
            throw StoreInUse(
                path: db.shownURL,
                fix: "a node named '\(node)' runs on it already; give each node "
                    + "its own --node")
        }
        try self.init(database: db, location: db.shownURL)
    }

    /// Advisory lock keys ("Haul" and "Hau2" in ASCII): one process per node name, one migration at a time.
    private static let nodeLock: Int64 = 0x4861_756C
    private static let migrationLock: Int64 = 0x4861_7532

    private init(database: any SQLDatabase, location: String) throws {
        db = database
        self.location = location
        try migrate()
    }

    private static func openSQLite(_ path: String) throws -> SQLiteDatabase {
        // Private before SQLite opens it: the rows hold secrets (headers, URL passwords), and the -wal and -shm
        // files SQLite makes take this file's mode.
        try Files.makePrivateFile(path)
        for companion in [path + "-wal", path + "-shm"] { try Files.restrict(companion, to: 0o600) }
        let db = try SQLiteDatabase(path: path)
        // One Haul owns its database: the exclusive lock, taken now and held until close, makes a second server on
        // the same data directory fail at start instead of both writing, and spares every transaction its file-lock
        // system calls (and WAL its shared-memory index).
        do {
            try db.execute("PRAGMA locking_mode=EXCLUSIVE; PRAGMA busy_timeout=1000; BEGIN EXCLUSIVE; COMMIT;")
        } catch {
            throw StoreInUse(path: path)
        }
        try db.execute(
            "PRAGMA busy_timeout=5000; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint=256;"
        )
        try db.execute("PRAGMA foreign_keys=ON;")
        return db
    }

    public var schemaVersion: Int {
        let sql = db.dialect == .sqlite ? "PRAGMA user_version" : "SELECT max(version) FROM haul_schema"
        return (try? db.query(sql).first?.first?.int).flatMap { $0 }.map(Int.init) ?? 0
    }

    private func migrate() throws {
        func checkNotNewer(_ current: Int) throws {
            guard current <= Self.migrations.count else {
                throw DatabaseError("database schema \(current) is newer than this Haul knows")
            }
        }
        switch db.dialect {
        case .sqlite:
            let current = schemaVersion
            try checkNotNewer(current)
            for (index, sql) in Self.migrations.enumerated() where index >= current {
                try db.transaction {
                    try db.execute(sql)
                    try db.execute("PRAGMA user_version = \(index + 1)")
                }
            }
        case .postgres:
            // PostgreSQL's DDL is transactional: all of it or none. Nodes starting together take turns; the later
            // ones find nothing left to do.
            try db.transaction {
                try db.run("SELECT pg_advisory_xact_lock(?)", [.integer(Self.migrationLock)])
                try db.execute("CREATE TABLE IF NOT EXISTS haul_schema (version BIGINT NOT NULL)")
                let current = schemaVersion
                try checkNotNewer(current)
                for sql in Self.migrations.dropFirst(current) { try db.execute(db.dialect.ddl(sql)) }
                try db.run("DELETE FROM haul_schema")
                try db.run("INSERT INTO haul_schema (version) VALUES (?)", [.integer(Int64(Self.migrations.count))])
                try db.execute(Self.postgresExtras)
            }
        }
    }

    /// Runs `body` in one transaction (one commit for many saves).
    public func transaction(_ body: () throws -> Void) throws {
        try forgettingOnFailure { try db.transaction(body) }
    }

    /// Runs `body`; when it fails (its transaction rolled back), what `writtenJournals` learned may not be on disk.
    private func forgettingOnFailure(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch {
            writtenJournals.removeAll()
            throw error
        }
    }

    /// Inserts or updates the whole download with its journal. Returns false when `claim` no longer holds (another
    /// node took the download over): then nothing was written.
    @discardableResult
    public func save(_ d: Download, claim: WriteClaim = .sole) throws -> Bool {
        var landed = true
        try forgettingOnFailure {
            try db.transactionIfNeeded {
                let values = DownloadColumn.written.map { $0.write!(d) }
                switch claim {
                case .sole: try db.run(Self.upsert, values)
                case .fenced(let fence): landed = !(try db.query(Self.fencedUpsert, values + [.integer(fence)])).isEmpty
                case .overriding: landed = !(try db.query(Self.overridingUpsert, values)).isEmpty
                }
                if landed { try writeSegments(d.id, d.journal) }
            }
        }
        // A finished download's journal is written for good: nothing to compare the next save with.
        if d.state.isFinished { writtenJournals.removeValue(forKey: d.id) }
        return landed
    }

    /// An upsert, not INSERT OR REPLACE: a replace deletes the row first, and the delete cascades to its segments,
    /// which a save that leaves the journal alone would then never write back.
    private static let upsert =
        "INSERT INTO downloads (\(DownloadColumn.written.map(\.name).joined(separator: ", ")))"
        + " VALUES (" + Array(repeating: "?", count: DownloadColumn.written.count).joined(separator: ", ")
        + ") ON CONFLICT(id) DO UPDATE SET "
        + DownloadColumn.written.filter { $0.name != "id" }.map { "\($0.name) = excluded.\($0.name)" }
        .joined(separator: ", ")
    /// Only while the row carries the writer's fence.
    private static let fencedUpsert = upsert + " WHERE downloads.fence = ? RETURNING id"
    /// Moves the fence on and ends the claim: whoever held it can write no more.
    private static let overridingUpsert = upsert + ", fence = downloads.fence + 1, lease_until = NULL RETURNING id"

    /// The journal last written for each unfinished download this run: a save whose journal did not change (most
    /// state changes) leaves the segments table alone. Only once the transaction commits is it trusted; a rolled
    /// back one forgets what it wrote.
    private var writtenJournals: [String: [Segment]] = [:]

    private func writeSegments(_ id: String, _ journal: [Segment]) throws {
        if writtenJournals[id] == journal { return }
        writtenJournals[id] = journal
        try db.run("DELETE FROM segments WHERE download_id = ?", [.text(id)])
        for (index, segment) in journal.enumerated() {
            try db.run(
                "INSERT INTO segments (download_id, idx, start, \"end\", received) VALUES (?, ?, ?, ?, ?)",
                [
                    .text(id), .integer(Int64(index)), .integer(segment.start), integer(segment.end),
                    .integer(segment.received),
                ])
        }
    }

    /// Records a checkpoint only: the journal, the cheap write made while a transfer runs. Returns false when
    /// `claim` no longer holds: then nothing was written.
    @discardableResult
    public func saveJournal(
        id: String, _ journal: [Segment], updatedAt: Date, claim: WriteClaim = .sole
    ) throws
        -> Bool
    {
        var landed = true
        try forgettingOnFailure {
            try db.transactionIfNeeded {
                let values: [SQLValue] = [
                    .integer(journal.reduce(0) { $0 + $1.received }),
                    .real(updatedAt.timeIntervalSince1970), .text(id),
                ]
                if case .fenced(let fence) = claim {
                    landed =
                        !(try db.query(
                            "UPDATE downloads SET received_bytes = ?, updated_at = ? "
                                + "WHERE id = ? AND fence = ? RETURNING id",
                            values + [.integer(fence)])).isEmpty
                } else {
                    try db.run("UPDATE downloads SET received_bytes = ?, updated_at = ? WHERE id = ?", values)
                }
                if landed { try writeSegments(id, journal) }
            }
        }
        return landed
    }

    /// The first answer given to an `Idempotency-Key`.
    public func idempotencyAnswer(key: String) throws -> (downloadID: String, requestHash: String, status: Int)? {
        guard
            let row = try db.query(
                "SELECT download_id, request_hash, status FROM idempotency_keys WHERE key = ?",
                [.text(key)]
            ).first,
            let id = row["download_id"].string, let hash = row["request_hash"].string,
            let status = row["status"].int
        else { return nil }
        return (id, hash, Int(status))
    }

    public func rememberIdempotencyAnswer(key: String, downloadID: String, requestHash: String, status: Int) throws {
        try db.run(
            "INSERT INTO idempotency_keys (key, download_id, request_hash, status, created_at) "
                + "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [
                .text(key), .text(downloadID), .text(requestHash),
                .integer(Int64(status)), .real(Date().timeIntervalSince1970),
            ])
    }

    /// The answer a batch with this `Idempotency-Key` got: its request's hash and the answer (nil for a key
    /// used by a single download).
    public func batchAnswer(key: String) throws -> (requestHash: String, answer: String?)? {
        guard
            let row = try db.query(
                "SELECT request_hash, answer FROM idempotency_keys WHERE key = ?",
                [.text(key)]
            ).first, let hash = row["request_hash"].string
        else { return nil }
        return (hash, row["answer"].string)
    }

    public func rememberBatchAnswer(key: String, requestHash: String, answer: String) throws {
        try db.run(
            "INSERT INTO idempotency_keys (key, download_id, request_hash, status, created_at, answer) "
                + "VALUES (?, '', ?, 200, ?, ?) ON CONFLICT DO NOTHING",
            [.text(key), .text(requestHash), .real(Date().timeIntervalSince1970), .text(answer)])
    }

    /// The settings a client changed (JSON), or nil.
    public func settings() throws -> String? {
        try db.query("SELECT value FROM settings WHERE name = 'server'").first?.first?.string
    }

    public func saveSettings(_ json: String) throws {
        try db.run(
            "INSERT INTO settings (name, value) VALUES ('server', ?) "
                + "ON CONFLICT (name) DO UPDATE SET value = excluded.value", [.text(json)])
    }

    public func delete(id: String) throws {
        writtenJournals.removeValue(forKey: id)
        try db.run("DELETE FROM downloads WHERE id = ?", [.text(id)])
    }

    public func loadAll() throws -> [Download] {
        var downloads: [Download] = []
        try forEach { downloads.append($0) }
        return downloads
    }

    /// Whether the database answers at all (a round trip).
    public func ping() throws {
        _ = try db.query("SELECT 1", [])
    }

    /// The number of stored downloads.
    public func count() throws -> Int {
        Int(try db.query("SELECT count(*) FROM downloads").first?.first?.int ?? 0)
    }

    /// Hands every stored download to `body`, in creation order, one row at a time: at start-up with 100,000
    /// downloads, holding every row decoded at once cost more memory than the downloads themselves. Each download
    /// comes with its segments from one join in the same order (a row per segment), so no table of journals by id
    /// is built on the side.
    public func forEach(_ body: (Download) throws -> Void) throws {
        try read(id: nil, packing: false) { try body($0.download) }
    }

    /// As `forEach`, with the rows stepped and decoded on a thread of their own while `body` runs on the caller's:
    /// start-up's two halves (reading rows, indexing downloads) on two cores. The caller uses the store for nothing
    /// else until this returns: SQLite's one connection (held exclusively) is that thread's meanwhile. PostgreSQL's
    /// rows come in turn on the caller's thread, as `forEach` hands them.
    public func forEachOverlapped(_ body: (Download) throws -> Void) throws {
        try forEachStoredOverlapped { try body($0.download) }
    }

    /// The most of the database file start-up reads through a memory map (past it, by copies).
    static let startUpMap = 1 << 30

    /// As `forEachOverlapped`, a download of the usual shape packed straight from its row (`StoredRowPacker`).
    func forEachStoredOverlapped(_ body: (StoredDownload) throws -> Void) throws {
        guard db.dialect == .sqlite else { return try read(id: nil, packing: true, body) }
        // Read through a map of the file: SQLite steps through the pages in the kernel's cache instead of copying
        // each out (at a million downloads, 2% of the start-up on a quiet machine). Unmapped
        // after, so the file's pages (190 MiB at a million) are not counted in the process's memory while it runs.
        try? db.execute("PRAGMA mmap_size=\(DownloadStore.startUpMap)")
        defer { try? db.execute("PRAGMA mmap_size=0") }
        try Overlap.run(produce: { [self] yield in try read(id: nil, packing: true, yield) }, consume: body)
    }

    /// The download `id` as stored now (another node may have changed it), or nil when there is none.
    public func load(id: String) throws -> Download? {
        var found: Download?
        try read(id: id, packing: false) { found = $0.download }
        return found
    }

    /// The downloads (or the one `id`) in creation order, each with its segments from one join (`StoredRowReader`).
    private func read(id: String?, packing: Bool, _ body: (StoredDownload) throws -> Void) throws {
        let columns = DownloadColumn.all.map { "d.\($0.name)" }.joined(separator: ", ")
        let sql =
            "SELECT \(columns), s.start, s.\"end\", s.received FROM downloads d "
            + "LEFT JOIN segments s ON s.download_id = d.id " + (id == nil ? "" : "WHERE d.id = ? ")
            + "ORDER BY d.seq, s.idx"
        var reader = StoredRowReader(packing: packing)
        try db.forEachRawRow(sql, id.map { [.text($0)] } ?? []) { row in
            if let download = try reader.read(row) { try body(download) }
        }
        if let download = reader.finish() { try body(download) }
    }

    static func encode(_ headers: [HeaderField]) -> String {
        JSONValue.array(headers.map { .array([.string($0.name), .string($0.value)]) }).serialized()
    }

    static func decodeHeaders(_ text: String) -> [HeaderField] {
        // What most downloads store: no parse for it (a million rows read at start-up).
        if text == "[]" { return [] }
        guard case .array(let items)? = try? JSONValue.parse(text) else { return [] }
        return items.compactMap { item in
            guard case .array(let pair) = item, pair.count == 2, let name = pair[0].stringValue,
                let value = pair[1].stringValue
            else { return nil }
            return HeaderField(name: name, value: value)
        }
    }
}

func text(_ s: String?) -> SQLValue { s.map { .text($0) } ?? .null }
func integer(_ i: Int64?) -> SQLValue { i.map { .integer($0) } ?? .null }
func real(_ d: Date?) -> SQLValue { d.map { .real($0.timeIntervalSince1970) } ?? .null }
