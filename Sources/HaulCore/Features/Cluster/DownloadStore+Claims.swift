import FoundationEssentials
import HaulLoop

/// What a write of a download holds over its row in a store several nodes share.
public enum WriteClaim: Sendable, Equatable {
    /// The only node (SQLite): the write always lands.
    case sole
    /// This node's claim with this fence: the write lands only while the row still carries it, so a node that was
    /// paused or cut off can never write over the node that took the download over.
    case fenced(Int64)
    /// A client's change to a download this node does not run: the write lands and ends whoever's claim (the
    /// fence moves on, so the holder's next write fails, and the lease ends, so a node that sees the holder's
    /// files may claim it). `claimed_by` stays: it says where the files are.
    case overriding
}

/// A download a node holds: its id and the fence its writes carry.
public struct Claim: Sendable, Equatable, Hashable {
    public let id: String
    public let fence: Int64

    public init(id: String, fence: Int64) {
        self.id = id
        self.fence = fence
    }
}

/// Claims, leases and fences, the way PostgreSQL job queues (que, River, pg-boss) hand out work: a node takes rows
/// with `FOR UPDATE SKIP LOCKED`, holds each for a lease it renews, and every write it makes carries the row's fence.
/// Times are the database's clock, so the nodes' clocks never need to agree.
extension DownloadStore {
    /// Whether several nodes may share this store (PostgreSQL).
    public var isShared: Bool { db.dialect == .postgres }

    private static let now = "extract(epoch from clock_timestamp())"
    /// A token's `max_active` is not reached by its downloads any node holds (a claim counts until its lease ends).
    private static let ownerHasRoom = """
        COALESCE((SELECT t.max_active FROM tokens t WHERE t.id = d.owner), 2147483647) >
            (SELECT count(*) FROM downloads r WHERE r.owner = d.owner
                AND r.state IN ('queued', 'probing', 'downloading', 'verifying') AND r.lease_until >= \(now))
        """
    /// `Download.queueOrder` in SQL: the place a client moved it to, else creation order.
    private static let queueOrder = "COALESCE(queue_rank, seq * \(QueueOrder.step))"

    /// Takes up to `limit` downloads for `node`: queued ones no live claim holds, and running ones whose holder's
    /// lease ran out (a node that died or lost the database), highest priority first, then by place in the queue.
    /// Only new ones, and ones last held by a node of `peers` (those whose download directory `node` shares: their
    /// part files are where it can go on with them). Rows another node is claiming at this moment are passed over,
    /// not waited for.
    public func claim(node: String, limit: Int, lease: Double, peers: [String]) throws -> [Claim] {
        guard limit > 0 else { return [] }
        let rows = try db.query(
            """
            UPDATE downloads SET claimed_by = ?, lease_until = \(Self.now) + ?, fence = fence + 1
            WHERE id IN (SELECT id FROM downloads d
                         WHERE state IN ('queued', 'probing', 'downloading', 'verifying')
                           AND (lease_until IS NULL OR lease_until < \(Self.now))
                           AND (claimed_by IS NULL OR claimed_by = ANY(?::text[]))
                           AND (owner IS NULL OR \(Self.ownerHasRoom))
                         ORDER BY priority DESC, \(Self.queueOrder), seq LIMIT ? FOR UPDATE SKIP LOCKED)
            RETURNING id, fence, priority, \(Self.queueOrder) AS queue_order, seq
            """, [.text(node), .real(lease), .text(Self.array(peers + [node])), .integer(Int64(limit))])
        var claimed: [(claim: Claim, priority: Int64, order: Int64, sequence: Int64)] = []
        for row in rows {
            guard let id = row["id"].string, let fence = row["fence"].int else { continue }
            claimed.append(
                (
                    Claim(id: id, fence: fence), row["priority"].int ?? 0, row["queue_order"].int ?? 0,
                    row["seq"].int ?? 0
                ))
        }
        // RETURNING keeps no order: the claims start in the order they were chosen.
        claimed.sort { ($1.priority, $0.order, $0.sequence) < ($0.priority, $1.order, $1.sequence) }
        return claimed.map(\.claim)
    }

    /// Extends the leases of `claims`; returns the ids `node` still holds (the others went to another node, or a
    /// client's change ended the claim).
    public func renew(node: String, _ claims: [Claim], lease: Double) throws -> Set<String> {
        guard !claims.isEmpty else { return [] }
        let ids = Self.array(claims.map(\.id))
        let fences = "{" + claims.map { String($0.fence) }.joined(separator: ",") + "}"
        return Set(
            try db.query(
                """
                UPDATE downloads d SET lease_until = \(Self.now) + ?
                FROM unnest(?::text[], ?::bigint[]) AS m(id, fence)
                WHERE d.id = m.id AND d.fence = m.fence AND d.claimed_by = ?
                RETURNING d.id
                """, [.real(lease), .text(ids), .text(fences), .text(node)]
            ).compactMap { $0["id"].string })
    }

    /// Ends the leases of `node`'s unfinished downloads at once (a clean shutdown): the other nodes need not wait
    /// for them to run out. `claimed_by` stays: it tells where each download last ran.
    public func releaseClaims(node: String) throws {
        guard isShared else { return }
        try db.run(
            "UPDATE downloads SET lease_until = NULL WHERE claimed_by = ? "
                + "AND state IN ('queued', 'probing', 'downloading', 'verifying')", [.text(node)])
    }

    /// A connection of its own for notifications (PostgreSQL), listening for changed downloads (each payload is a
    /// download's id, on `haul_downloads`) and changed settings (`haul_settings`).
    public func openListener() throws -> (any SQLListener)? {
        try db.openListener(["haul_downloads", "haul_settings", "haul_webhooks", "haul_categories"])
    }

    /// The database session of this store's connection: notifications it caused itself carry it.
    public var session: Int32? { db.session }

    /// The next `count` creation numbers, unique over every node.
    public func allocateSequences(_ count: Int) throws -> [Int64]? {
        guard isShared, count > 0 else { return nil }
        return try db.query(
            "SELECT nextval('haul_download_seq') FROM generate_series(1, ?)",
            [.integer(Int64(count))]
        ).compactMap { $0.first?.int }
    }

    /// A PostgreSQL array literal of `texts`, each quoted.
    private static func array(_ texts: [String]) -> String {
        "{"
            + texts.map { "\"" + $0.replacing("\\", with: "\\\\").replacing("\"", with: "\\\"") + "\"" }
            .joined(separator: ",") + "}"
    }

    /// A node sharing the store, as its heartbeats left it.
    public struct NodeRecord: Sendable, Equatable {
        public let name: String
        public let mark: String
        /// Heard of within the last lease.
        public let alive: Bool
    }

    /// Says `node` is alive (its mark with it) and returns every node the store knows of.
    public func heartbeat(node: String, mark: String, lease: Double) throws -> [NodeRecord] {
        try db.run(
            "INSERT INTO nodes (name, seen_at, mark) VALUES (?, \(Self.now), ?) "
                + "ON CONFLICT (name) DO UPDATE SET seen_at = excluded.seen_at, mark = excluded.mark",
            [.text(node), .text(mark)])
        return try db.query(
            "SELECT name, mark, seen_at > \(Self.now) - ? AS alive FROM nodes ORDER BY name",
            [.real(lease)]
        ).compactMap { row in
            guard let name = row["name"].string, let mark = row["mark"].string else { return nil }
            return NodeRecord(name: name, mark: mark, alive: row["alive"].int == 1)
        }
    }

    /// A clean stop: the other nodes count this one out at once.
    public func leave(node: String) throws {
        try db.run("UPDATE nodes SET seen_at = 0 WHERE name = ?", [.text(node)])
    }

    /// What PostgreSQL gets beyond the shared migrations, made again at every start (each statement is idempotent):
    /// the creation-number sequence, and a trigger that tells every listening node which download changed.
    static let postgresExtras = """
        CREATE SEQUENCE IF NOT EXISTS haul_download_seq;
        SELECT setval('haul_download_seq', m) FROM (SELECT max(seq) AS m FROM downloads) s
            WHERE m IS NOT NULL AND m > (SELECT last_value FROM haul_download_seq);
        CREATE OR REPLACE FUNCTION haul_download_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            -- A lease renewed is no news to the other nodes.
            IF TG_OP = 'UPDATE' AND NEW.fence = OLD.fence AND NEW.updated_at = OLD.updated_at
               AND NEW.state = OLD.state AND NEW.received_bytes = OLD.received_bytes
               AND NEW.claimed_by IS NOT DISTINCT FROM OLD.claimed_by THEN
                RETURN NULL;
            END IF;
            PERFORM pg_notify('haul_downloads', CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END);
            RETURN NULL;
        END $$;
        CREATE OR REPLACE TRIGGER haul_download_changed AFTER INSERT OR UPDATE OR DELETE ON downloads
            FOR EACH ROW EXECUTE FUNCTION haul_download_changed();
        """ + ["settings", "webhooks", "categories"].map(statementNotice).joined()

    /// A trigger that tells the channel `haul_TABLE` of any change to `table`: the nodes read it all again.
    private static func statementNotice(_ table: String) -> String {
        """
        CREATE OR REPLACE FUNCTION haul_\(table)_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('haul_\(table)', '');
            RETURN NULL;
        END $$;
        CREATE OR REPLACE TRIGGER haul_\(table)_changed AFTER INSERT OR UPDATE OR DELETE ON \(table)
            FOR EACH STATEMENT EXECUTE FUNCTION haul_\(table)_changed();

        """
    }
}
