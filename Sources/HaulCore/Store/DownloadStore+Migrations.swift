import FoundationEssentials
import HaulLoop

/// The schema, as numbered migrations written once for SQLite and PostgreSQL (`SQLDialect.ddl` makes the
/// PostgreSQL form), applied in order and recorded.
extension DownloadStore {
    static let migrations: [String] = [
        // 1: downloads and everything needed to resume them.
        """
        CREATE TABLE downloads (
            id TEXT PRIMARY KEY,
            seq INTEGER NOT NULL UNIQUE,
            url TEXT NOT NULL,
            headers TEXT NOT NULL DEFAULT '[]',
            requested_filename TEXT,
            directory TEXT NOT NULL DEFAULT '',
            filename TEXT,
            state TEXT NOT NULL,
            final_url TEXT,
            total_bytes INTEGER,
            received_bytes INTEGER NOT NULL DEFAULT 0,
            accepts_ranges INTEGER NOT NULL DEFAULT 0,
            etag TEXT,
            last_modified TEXT,
            content_type TEXT,
            connections INTEGER NOT NULL,
            priority INTEGER NOT NULL DEFAULT 0,
            max_speed INTEGER,
            error_code TEXT,
            error_message TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            started_at REAL,
            completed_at REAL
        );
        """,
        // 2: the journal of every segment, checksums, and Idempotency-Key answers.
        """
        CREATE TABLE segments (
            download_id TEXT NOT NULL REFERENCES downloads(id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            start INTEGER NOT NULL,
            "end" INTEGER,
            received INTEGER NOT NULL,
            PRIMARY KEY (download_id, idx)
        );
        ALTER TABLE downloads ADD COLUMN checksum TEXT;
        CREATE TABLE idempotency_keys (
            key TEXT PRIMARY KEY,
            download_id TEXT NOT NULL,
            request_hash TEXT NOT NULL,
            status INTEGER NOT NULL,
            created_at REAL NOT NULL
        );
        """,
        // 3: TLS verification turned off per download.
        """
        ALTER TABLE downloads ADD COLUMN insecure INTEGER NOT NULL DEFAULT 0;
        """,
        // 4: the size a client said to expect.
        """
        ALTER TABLE downloads ADD COLUMN expected_bytes INTEGER;
        """,
        // 5: a batch's answer for its Idempotency-Key (download_id is '' for a batch).
        """
        ALTER TABLE idempotency_keys ADD COLUMN answer TEXT;
        """,
        // 6: settings changed at run time (PATCH /settings), as JSON, over the defaults the flags give.
        """
        CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
        """,
        // 7: the node that holds (or last held) a download, until when, and the fence its writes carry.
        """
        ALTER TABLE downloads ADD COLUMN claimed_by TEXT;
        ALTER TABLE downloads ADD COLUMN lease_until REAL;
        ALTER TABLE downloads ADD COLUMN fence INTEGER NOT NULL DEFAULT 0;
        """,
        // 8: the nodes sharing the store: when each was last heard of, and the mark it left in its download
        // directory (a node that finds another's mark in its own shares that node's files).
        """
        CREATE TABLE nodes (name TEXT PRIMARY KEY, seen_at REAL NOT NULL, mark TEXT NOT NULL);
        """,
        // 9: categories, webhooks, and the outbox of their deliveries (written in the transaction of the change each tells of;
        // `sender` is the node that holds an attempt in flight until `next_attempt_at`).
        """
        CREATE TABLE webhooks (
            id TEXT PRIMARY KEY, url TEXT NOT NULL, secret TEXT NOT NULL, events TEXT NOT NULL, category TEXT,
            created_at REAL NOT NULL
        );
        CREATE TABLE webhook_deliveries (
            id TEXT PRIMARY KEY, webhook_id TEXT NOT NULL, event TEXT NOT NULL, download_id TEXT NOT NULL,
            body TEXT NOT NULL, created_at REAL NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL,
            next_attempt_at REAL NOT NULL, last_attempt_at REAL, last_status INTEGER, last_error TEXT, sender TEXT
        );
        CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_attempt_at);
        CREATE INDEX webhook_deliveries_of ON webhook_deliveries (webhook_id, created_at);
        ALTER TABLE downloads ADD COLUMN category TEXT;
        CREATE TABLE categories (
            name TEXT PRIMARY KEY, directory TEXT NOT NULL, connections INTEGER, max_speed INTEGER, priority INTEGER
        );
        """,
        // 10: a download's other sources, as JSON (url, state, reason, validators, bytes, errors).
        """
        ALTER TABLE downloads ADD COLUMN mirrors TEXT;
        """,
        // 11: the file a finished download's name was given to (device:inode:size), which alone the file route
        // serves.
        """
        ALTER TABLE downloads ADD COLUMN file_stamp TEXT;
        """,
        // 12: each change webhooks hear of is kept once, with the download as it was; deliveries refer to it
        // instead of each holding a copy of the body, and are made from it a slice at a time (`fanned_out`).
        // Deliveries are looked up per webhook: each webhook has slots of its own. A delivered one leaves the
        // outbox at once, its record going to `webhook_delivered`, which keeps each webhook's newest hundred.
        """
        CREATE TABLE webhook_changes (
            id TEXT PRIMARY KEY, download_id TEXT NOT NULL, category TEXT, kinds TEXT NOT NULL,
            created_at REAL NOT NULL, resource TEXT NOT NULL, fanned_out INTEGER NOT NULL
        );
        CREATE INDEX webhook_changes_waiting ON webhook_changes (fanned_out, created_at);
        ALTER TABLE webhook_deliveries ADD COLUMN change_id TEXT;
        DROP INDEX webhook_deliveries_due;
        DROP INDEX webhook_deliveries_of;
        CREATE INDEX webhook_deliveries_due ON webhook_deliveries (webhook_id, state, next_attempt_at);
        CREATE INDEX webhook_deliveries_change ON webhook_deliveries (change_id);
        CREATE TABLE webhook_delivered (
            id TEXT PRIMARY KEY, webhook_id TEXT NOT NULL, event TEXT NOT NULL, download_id TEXT NOT NULL,
            created_at REAL NOT NULL, attempts INTEGER NOT NULL, last_status INTEGER, last_attempt_at REAL NOT NULL
        );
        CREATE INDEX webhook_delivered_of ON webhook_delivered (webhook_id, created_at);
        DELETE FROM webhook_deliveries WHERE state = 'delivered';
        """,
        // 13: the proxy a download or a category names ("none" or a URL with its credentials, as headers are kept).
        """
        ALTER TABLE downloads ADD COLUMN proxy TEXT;
        ALTER TABLE categories ADD COLUMN proxy TEXT;
        """,
        // 14: a download's origin credentials and cookies (secrets, as its headers are), User-Agent and Referer.
        """
        ALTER TABLE downloads ADD COLUMN username TEXT;
        ALTER TABLE downloads ADD COLUMN password TEXT;
        ALTER TABLE downloads ADD COLUMN cookies TEXT;
        ALTER TABLE downloads ADD COLUMN user_agent TEXT;
        ALTER TABLE downloads ADD COLUMN referer TEXT;
        """,
        // 15: a waiting download's place once a client moved it in the queue (NULL: creation order).
        """
        ALTER TABLE downloads ADD COLUMN queue_rank INTEGER;
        """,
        // 16: the SFTP host key a download pins.
        """
        ALTER TABLE downloads ADD COLUMN host_key TEXT;
        """,
        // 17: tokens with a scope, by the hash of their secret.
        """
        CREATE TABLE tokens (
            id TEXT PRIMARY KEY, name TEXT NOT NULL, scope TEXT NOT NULL, hash TEXT NOT NULL UNIQUE,
            expires_at REAL, created_at REAL NOT NULL
        );
        """,
        // 18: a token's folder, quota and running limit; the token that added each download (and its name).
        """
        ALTER TABLE tokens ADD COLUMN root TEXT;
        ALTER TABLE tokens ADD COLUMN quota_bytes INTEGER;
        ALTER TABLE tokens ADD COLUMN max_active INTEGER;
        ALTER TABLE downloads ADD COLUMN owner TEXT;
        ALTER TABLE downloads ADD COLUMN owner_name TEXT;
        """,
        // 19: where a category's finished files go, and each download's (and whether its file is there); the
        // operator's hook due for a download, and how the last one ended.
        """
        ALTER TABLE categories ADD COLUMN completed_directory TEXT;
        ALTER TABLE downloads ADD COLUMN completed_directory TEXT;
        ALTER TABLE downloads ADD COLUMN moved INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE downloads ADD COLUMN hook_pending INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE downloads ADD COLUMN hook_status INTEGER;
        ALTER TABLE downloads ADD COLUMN hook_error TEXT;
        ALTER TABLE downloads ADD COLUMN hook_at REAL;
        """,
        // 20: a category's proxy a scoped token named, held to the address policy (the operator's are trusted);
        // why a finished file is not in its completed folder.
        """
        ALTER TABLE categories ADD COLUMN proxy_untrusted INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE downloads ADD COLUMN move_error TEXT;
        """,
        // 21: the order a download's pieces are fetched in, for readers of it as it arrives.
        """
        ALTER TABLE downloads ADD COLUMN sequential INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE downloads ADD COLUMN first_last INTEGER NOT NULL DEFAULT 0;
        """,
        // 22: HLS playlists: the kind of source, the variant asked for, and the playlist's progress.
        """
        ALTER TABLE downloads ADD COLUMN kind TEXT NOT NULL DEFAULT 'auto';
        ALTER TABLE downloads ADD COLUMN variant TEXT;
        ALTER TABLE downloads ADD COLUMN hls TEXT;
        """,
        // 23: BitTorrent: the swarm's and the files' progress.
        """
        ALTER TABLE downloads ADD COLUMN torrent TEXT;
        """,
        // 24: the files of a torrent to fetch.
        """
        ALTER TABLE downloads ADD COLUMN files TEXT;
        """,
        // 25: a torrent's seeding limits and upload limit.
        """
        ALTER TABLE downloads ADD COLUMN seed_ratio REAL;
        ALTER TABLE downloads ADD COLUMN seed_time INTEGER;
        ALTER TABLE downloads ADD COLUMN upload_limit INTEGER;
        ALTER TABLE categories ADD COLUMN seed_ratio REAL;
        ALTER TABLE categories ADD COLUMN seed_time INTEGER;
        """,
        // 26: a download's tags (qBittorrent's, for the clients of its API).
        """
        ALTER TABLE downloads ADD COLUMN tags TEXT;
        """,
    ]
}
