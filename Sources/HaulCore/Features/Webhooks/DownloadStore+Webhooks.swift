import FoundationEssentials
import HaulLoop

/// Webhooks and their outbox. A change a webhook asked to hear of is stored once (`webhook_changes`, with the
/// download as it was) in the transaction that stores the change, so a crash loses neither or both. Its deliveries,
/// one small row per webhook that wants it, are made from it later, a slice at a time (`fanOut`), and each
/// leaves the outbox (as delivered or failed) only after an attempt's result is stored: every one is sent at
/// least once.
extension DownloadStore {
    public func insertWebhook(_ hook: Webhook) throws {
        try db.run(
            "INSERT INTO webhooks (id, url, secret, events, category, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            [
                .text(hook.id), .text(hook.url), .text(hook.secret),
                .text(hook.events.map(\.rawValue).joined(separator: ",")), text(hook.category),
                .real(hook.createdAt.timeIntervalSince1970),
            ])
    }

    public func webhooks() throws -> [Webhook] {
        try db.query("SELECT id, url, secret, events, category, created_at FROM webhooks ORDER BY created_at, id")
            .compactMap { row in
                guard let id = row["id"].string, let url = row["url"].string, let secret = row["secret"].string,
                    let events = row["events"].string, let created = row["created_at"].double
                else { return nil }
                return Webhook(
                    id: id, url: url, secret: secret,
                    events: events.split(separator: ",").compactMap { WebhookEvent(rawValue: String($0)) },
                    category: row["category"].string, createdAt: Date(timeIntervalSince1970: created))
            }
    }

    /// Removes the webhook and its outbox; false when there was none.
    public func deleteWebhook(id: String) throws -> Bool {
        var found = false
        try transaction {
            found = !(try db.query("DELETE FROM webhooks WHERE id = ? RETURNING id", [.text(id)])).isEmpty
            try db.run("DELETE FROM webhook_deliveries WHERE webhook_id = ?", [.text(id)])
            try db.run("DELETE FROM webhook_delivered WHERE webhook_id = ?", [.text(id)])
        }
        return found
    }

    /// Keeps changes for the webhooks to hear of; call inside the transaction that stores them.
    public func insertChanges(_ changes: [WebhookChange]) throws {
        for c in changes {
            try db.run(
                "INSERT INTO webhook_changes (id, download_id, category, kinds, created_at, resource, fanned_out) "
                    + "VALUES (?, ?, ?, ?, ?, ?, 0)",
                [
                    .text(c.id), .text(c.downloadID), text(c.category),
                    .text(c.kinds.map(\.rawValue).joined(separator: ",")), .real(c.createdAt.timeIntervalSince1970),
                    .text(c.resource),
                ])
        }
    }

    /// Makes the deliveries of the oldest changes not yet fanned out, one per webhook of `hooks` that wants the
    /// event (and existed when it happened), in one transaction, until about `limit` deliveries are made.
    /// Returns how many were made and whether changes are left. With several nodes, a change another node is
    /// fanning out is passed over.
    public func fanOut(to hooks: [Webhook], limit: Int) throws -> (made: Int, more: Bool) {
        let lock = db.dialect == .postgres ? " FOR UPDATE SKIP LOCKED" : ""
        // A change has one delivery per webhook and event at most: this many changes always fit the limit.
        let perChange = max(1, hooks.count * 2)
        let take = max(1, limit / perChange)
        var made = 0
        var more = false
        try transaction {
            let rows = try db.query(
                "SELECT id, download_id, category, kinds, created_at FROM webhook_changes "
                    + "WHERE fanned_out = 0 ORDER BY created_at, id LIMIT ?\(lock)",
                [.integer(Int64(take + 1))])
            more = rows.count > take
            var done: [String] = []
            for row in rows.prefix(take) {
                guard let id = row["id"].string, let download = row["download_id"].string,
                    let kinds = row["kinds"].string, let created = row["created_at"].double
                else { continue }
                // Compared as stored (seconds since 1970): a Date rebuilt from them may differ from the webhook's
                // own in the last bit, and a webhook made in the same instant as a change would then miss it.
                for hook in hooks where hook.createdAt.timeIntervalSince1970 <= created {
                    for kind in kinds.split(separator: ",").compactMap({ WebhookEvent(rawValue: String($0)) })
                    where hook.wants(kind, category: row["category"].string) {
                        try db.run(
                            "INSERT INTO webhook_deliveries (id, webhook_id, event, download_id, body, "
                                + "created_at, state, attempts, next_attempt_at, change_id) "
                                + "VALUES (?, ?, ?, ?, '', ?, 'pending', 0, ?, ?)",
                            [
                                .text(HaulID.ordered()), .text(hook.id), .text(kind.rawValue), .text(download),
                                .real(created), .real(created), .text(id),
                            ])
                        made += 1
                    }
                }
                done.append(id)
            }
            for id in done {
                try db.run("UPDATE webhook_changes SET fanned_out = 1 WHERE id = ?", [.text(id)])
            }
        }
        return (made, more)
    }

    /// Whether changes wait to be fanned out (at start, after a crash between a change and its fan-out).
    public func hasChangesToFanOut() throws -> Bool {
        !(try db.query("SELECT 1 FROM webhook_changes WHERE fanned_out = 0 LIMIT 1")).isEmpty
    }

    /// The stored resource of each change of `ids` that is still kept.
    public func changeResources(_ ids: [String]) throws -> [String: String] {
        var found: [String: String] = [:]
        for id in Set(ids) {
            if let resource = try db.query(
                "SELECT resource FROM webhook_changes WHERE id = ?",
                [.text(id)]
            ).first?.first?.string {
                found[id] = resource
            }
        }
        return found
    }

    private static let deliveryColumns =
        "id, webhook_id, event, download_id, body, created_at, state, attempts, "
        + "next_attempt_at, last_attempt_at, last_status, last_error, change_id"

    private static func delivery(_ row: SQLRow) -> WebhookDelivery? {
        guard let id = row["id"].string, let hook = row["webhook_id"].string,
            let event = row["event"].string.flatMap(WebhookEvent.init), let download = row["download_id"].string,
            let body = row["body"].string, let created = row["created_at"].double,
            let state = row["state"].string.flatMap(WebhookDelivery.State.init),
            let next = row["next_attempt_at"].double
        else { return nil }
        var d = WebhookDelivery(
            id: id, webhookID: hook, event: event, downloadID: download, body: body,
            createdAt: Date(timeIntervalSince1970: created))
        d.state = state
        d.attempts = Int(row["attempts"].int ?? 0)
        d.nextAttemptAt = Date(timeIntervalSince1970: next)
        d.lastAttemptAt = row["last_attempt_at"].double.map(Date.init(timeIntervalSince1970:))
        d.lastStatus = row["last_status"].int.map(Int.init)
        d.lastError = row["last_error"].string
        d.changeID = row["change_id"].string
        return d
    }

    /// Takes up to `limit` pending deliveries of each webhook in `limits` due at `now`, oldest first, for `node` to
    /// send, in one transaction: each is held until `now + hold` (an attempt's time limit and more), after which,
    /// if no result was stored, it is due again (the node died mid-attempt). With several nodes, rows another node
    /// is taking are passed over.
    public func takeDueDeliveries(
        node: String, now: Date, hold: Double, limits: [(webhookID: String, limit: Int)]
    )
        throws -> [WebhookDelivery]
    {
        let lock = db.dialect == .postgres ? " FOR UPDATE SKIP LOCKED" : ""
        var taken: [WebhookDelivery] = []
        try db.transactionIfNeeded {
            for (hook, limit) in limits where limit > 0 {
                taken += try db.query(
                    """
                    UPDATE webhook_deliveries SET next_attempt_at = ?, sender = ?
                    WHERE id IN (SELECT id FROM webhook_deliveries WHERE webhook_id = ? AND state = 'pending'
                                 AND next_attempt_at <= ? ORDER BY next_attempt_at, created_at LIMIT ?\(lock))
                    RETURNING \(Self.deliveryColumns)
                    """,
                    [
                        .real(now.timeIntervalSince1970 + hold), .text(node), .text(hook),
                        .real(now.timeIntervalSince1970), .integer(Int64(limit)),
                    ]
                ).compactMap(Self.delivery)
            }
        }
        return taken.sorted { $0.createdAt < $1.createdAt }
    }

    /// The same, for one webhook.
    public func takeDueDeliveries(
        node: String, now: Date, hold: Double, webhookID: String, limit: Int
    ) throws
        -> [WebhookDelivery]
    {
        try takeDueDeliveries(node: node, now: now, hold: hold, limits: [(webhookID, limit)])
    }

    /// Makes every pending delivery due at once but those another node holds in flight: `node` restarted, so no
    /// attempt of its own is still running, and a receiver that was down may be back (waiting out a backoff of
    /// up to an hour would only delay them).
    public func releaseDeliveries(node: String, now: Date) throws {
        try db.run(
            "UPDATE webhook_deliveries SET next_attempt_at = ?, sender = NULL "
                + "WHERE state = 'pending' AND (sender = ? OR sender IS NULL)",
            [.real(now.timeIntervalSince1970), .text(node)])
    }

    /// Stores attempts' outcomes (state, count, next time, status and error), in one transaction. A delivered one
    /// leaves the outbox for the record of recent deliveries (`pruneDelivered` keeps each webhook's newest).
    public func recordAttempts(_ deliveries: [WebhookDelivery]) throws {
        try db.transactionIfNeeded {
            for d in deliveries {
                if d.state == .delivered {
                    try db.run("DELETE FROM webhook_deliveries WHERE id = ?", [.text(d.id)])
                    try db.run(
                        """
                        INSERT INTO webhook_delivered (id, webhook_id, event, download_id, created_at, attempts,
                            last_status, last_attempt_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING
                        """,
                        [
                            .text(d.id), .text(d.webhookID), .text(d.event.rawValue), .text(d.downloadID),
                            .real(d.createdAt.timeIntervalSince1970), .integer(Int64(d.attempts)),
                            integer(d.lastStatus.map(Int64.init)),
                            .real((d.lastAttemptAt ?? d.createdAt).timeIntervalSince1970),
                        ])
                    continue
                }
                try db.run(
                    """
                    UPDATE webhook_deliveries SET state = ?, attempts = ?, next_attempt_at = ?, last_attempt_at = ?,
                        last_status = ?, last_error = ?, sender = NULL WHERE id = ?
                    """,
                    [
                        .text(d.state.rawValue), .integer(Int64(d.attempts)),
                        .real(d.nextAttemptAt.timeIntervalSince1970), real(d.lastAttemptAt),
                        integer(d.lastStatus.map(Int64.init)), text(d.lastError), .text(d.id),
                    ])
            }
        }
    }

    public func recordAttempt(_ d: WebhookDelivery) throws { try recordAttempts([d]) }

    /// Forgets up to `limit` records of `webhookID`'s delivered ones but its newest `keep`; returns how many went.
    @discardableResult
    public func pruneDelivered(webhookID: String, keep: Int, limit: Int) throws -> Int {
        guard
            let oldestKept = try db.query(
                "SELECT created_at FROM webhook_delivered WHERE webhook_id = ? "
                    + "ORDER BY created_at DESC LIMIT 1 OFFSET ?",
                [.text(webhookID), .integer(Int64(keep - 1))]
            ).first?.first?.double
        else { return 0 }
        return try db.query(
            "DELETE FROM webhook_delivered WHERE id IN (SELECT id FROM webhook_delivered "
                + "WHERE webhook_id = ? AND created_at < ? LIMIT ?) RETURNING id",
            [.text(webhookID), .real(oldestKept), .integer(Int64(limit))]
        ).count
    }

    /// The latest deliveries of one webhook, or of every webhook about one download, newest first: those in the
    /// outbox and the recent delivered ones.
    public func deliveries(of subject: WebhookDelivery.Subject, limit: Int) throws -> [WebhookDelivery] {
        let (condition, key) =
            switch subject {
            case .webhook(let id): ("webhook_id = ?", SQLValue.text(id))
            case .download(let id): ("download_id = ?", SQLValue.text(id))
            }
        var list = try db.query(
            "SELECT \(Self.deliveryColumns) FROM webhook_deliveries WHERE \(condition) "
                + "ORDER BY created_at DESC, id DESC LIMIT ?", [key, .integer(Int64(limit))]
        )
        .compactMap(Self.delivery)
        list += try db.query(
            "SELECT id, webhook_id, event, download_id, created_at, attempts, last_status, "
                + "last_attempt_at FROM webhook_delivered WHERE \(condition) "
                + "ORDER BY created_at DESC LIMIT ?", [key, .integer(Int64(limit))]
        ).compactMap { row in
            guard let id = row["id"].string, let hook = row["webhook_id"].string,
                let event = row["event"].string.flatMap(WebhookEvent.init),
                let download = row["download_id"].string, let created = row["created_at"].double
            else { return nil }
            var d = WebhookDelivery(
                id: id, webhookID: hook, event: event, downloadID: download, body: "",
                createdAt: Date(timeIntervalSince1970: created))
            d.state = .delivered
            d.attempts = Int(row["attempts"].int ?? 0)
            d.lastStatus = row["last_status"].int.map(Int.init)
            d.lastAttemptAt = row["last_attempt_at"].double.map(Date.init(timeIntervalSince1970:))
            return d
        }
        return Array(list.sorted { ($0.createdAt, $0.id) > ($1.createdAt, $1.id) }.prefix(limit))
    }

    /// How many deliveries the outbox holds, by state (delivered: those the ring of recent ones keeps).
    public func deliveryCounts() throws -> [WebhookDelivery.State: Int] {
        var counts: [WebhookDelivery.State: Int] = [:]
        for row in try db.query("SELECT state, count(*) AS n FROM webhook_deliveries GROUP BY state") {
            if let state = row["state"].string.flatMap(WebhookDelivery.State.init) {
                counts[state] = Int(row["n"].int ?? 0)
            }
        }
        counts[.delivered] = Int(try db.query("SELECT count(*) FROM webhook_delivered").first?.first?.int ?? 0)
        return counts
    }

    /// Forgets up to `limit` given-up deliveries that ended before `cutoff`; returns how many went.
    @discardableResult
    public func pruneDeliveries(before cutoff: Date, limit: Int = 100_000) throws -> Int {
        try db.query(
            "DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM webhook_deliveries "
                + "WHERE state = 'failed' AND last_attempt_at < ? LIMIT ?) RETURNING id",
            [.real(cutoff.timeIntervalSince1970), .integer(Int64(limit))]
        ).count
    }

    /// Forgets up to `limit` changes every delivery of which has left the outbox (or that no webhook wanted);
    /// returns how many went.
    @discardableResult
    public func pruneChanges(limit: Int = 100_000) throws -> Int {
        try db.query(
            "DELETE FROM webhook_changes WHERE id IN (SELECT id FROM webhook_changes WHERE fanned_out = 1 "
                + "AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.change_id = webhook_changes.id) "
                + "LIMIT ?) RETURNING id", [.integer(Int64(limit))]
        ).count
    }
}
