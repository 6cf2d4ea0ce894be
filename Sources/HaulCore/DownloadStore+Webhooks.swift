import FoundationEssentials
import HaulLoop

/// Webhooks and their outbox. A delivery is inserted in the transaction that stores the change it tells of, so a
/// crash loses neither or both; it leaves the outbox (as delivered or failed, kept for `GET .../deliveries`) only
/// after an attempt's result is stored, so every one is sent at least once.
extension DownloadStore {
    public func insertWebhook(_ hook: Webhook) throws {
        try db.run("INSERT INTO webhooks (id, url, secret, events, category, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                   [.text(hook.id), .text(hook.url), .text(hook.secret),
                    .text(hook.events.map(\.rawValue).joined(separator: ",")), text(hook.category),
                    .real(hook.createdAt.timeIntervalSince1970)])
    }

    public func webhooks() throws -> [Webhook] {
        try db.query("SELECT id, url, secret, events, category, created_at FROM webhooks ORDER BY created_at, id")
            .compactMap { row in
                guard let id = row[0].string, let url = row[1].string, let secret = row[2].string,
                      let events = row[3].string, let created = row[5].double else { return nil }
                return Webhook(id: id, url: url, secret: secret,
                               events: events.split(separator: ",").compactMap { WebhookEvent(rawValue: String($0)) },
                               category: row[4].string, createdAt: Date(timeIntervalSince1970: created))
            }
    }

    /// Removes the webhook and its outbox; false when there was none.
    public func deleteWebhook(id: String) throws -> Bool {
        var found = false
        try transaction {
            found = !(try db.query("DELETE FROM webhooks WHERE id = ? RETURNING id", [.text(id)])).isEmpty
            try db.run("DELETE FROM webhook_deliveries WHERE webhook_id = ?", [.text(id)])
        }
        return found
    }

    /// Adds to the outbox; call inside the transaction that stores the change.
    public func insertDeliveries(_ deliveries: [WebhookDelivery]) throws {
        for d in deliveries {
            try db.run("INSERT INTO webhook_deliveries (id, webhook_id, event, download_id, body, created_at, state, "
                       + "attempts, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?)",
                       [.text(d.id), .text(d.webhookID), .text(d.event.rawValue), .text(d.downloadID), .text(d.body),
                        .real(d.createdAt.timeIntervalSince1970), .real(d.nextAttemptAt.timeIntervalSince1970)])
        }
    }

    private static let deliveryColumns = "id, webhook_id, event, download_id, body, created_at, state, attempts, "
        + "next_attempt_at, last_attempt_at, last_status, last_error"

    private static func delivery(_ row: [SQLValue]) -> WebhookDelivery? {
        guard let id = row[0].string, let hook = row[1].string, let event = row[2].string.flatMap(WebhookEvent.init),
              let download = row[3].string, let body = row[4].string, let created = row[5].double,
              let state = row[6].string.flatMap(WebhookDelivery.State.init), let next = row[8].double else { return nil }
        var d = WebhookDelivery(id: id, webhookID: hook, event: event, downloadID: download, body: body,
                                createdAt: Date(timeIntervalSince1970: created))
        d.state = state
        d.attempts = Int(row[7].int ?? 0)
        d.nextAttemptAt = Date(timeIntervalSince1970: next)
        d.lastAttemptAt = row[9].double.map(Date.init(timeIntervalSince1970:))
        d.lastStatus = row[10].int.map(Int.init)
        d.lastError = row[11].string
        return d
    }

    /// Takes up to `limit` pending deliveries due at `now`, oldest first, for `node` to send: each is held until
    /// `now + hold` (an attempt's time limit and more), after which, if no result was stored, it is due again
    /// (the node died mid-attempt). With several nodes, rows another node is taking are passed over.
    public func takeDueDeliveries(node: String, now: Date, hold: Double, limit: Int) throws -> [WebhookDelivery] {
        let lock = db.dialect == .postgres ? " FOR UPDATE SKIP LOCKED" : ""
        return try db.query("""
            UPDATE webhook_deliveries SET next_attempt_at = ?, sender = ?
            WHERE id IN (SELECT id FROM webhook_deliveries WHERE state = 'pending' AND next_attempt_at <= ?
                         ORDER BY next_attempt_at, created_at LIMIT ?\(lock))
            RETURNING \(Self.deliveryColumns)
            """, [.real(now.timeIntervalSince1970 + hold), .text(node), .real(now.timeIntervalSince1970),
                  .integer(Int64(limit))]).compactMap(Self.delivery).sorted { $0.createdAt < $1.createdAt }
    }

    /// Makes every pending delivery due at once but those another node holds in flight: `node` restarted, so no
    /// attempt of its own is still running, and a receiver that was down may be back (waiting out a backoff of
    /// up to an hour would only delay them).
    public func releaseDeliveries(node: String, now: Date) throws {
        try db.run("UPDATE webhook_deliveries SET next_attempt_at = ?, sender = NULL "
                   + "WHERE state = 'pending' AND (sender = ? OR sender IS NULL)",
                   [.real(now.timeIntervalSince1970), .text(node)])
    }

    /// Stores an attempt's outcome (its state, count, next time, status and error).
    public func recordAttempt(_ d: WebhookDelivery) throws {
        try db.run("""
            UPDATE webhook_deliveries SET state = ?, attempts = ?, next_attempt_at = ?, last_attempt_at = ?,
                last_status = ?, last_error = ?, sender = NULL WHERE id = ?
            """, [.text(d.state.rawValue), .integer(Int64(d.attempts)), .real(d.nextAttemptAt.timeIntervalSince1970),
                  real(d.lastAttemptAt), integer(d.lastStatus.map(Int64.init)), text(d.lastError), .text(d.id)])
    }

    /// The webhook's latest deliveries, newest first.
    public func deliveries(webhookID: String, limit: Int) throws -> [WebhookDelivery] {
        try db.query("SELECT \(Self.deliveryColumns) FROM webhook_deliveries WHERE webhook_id = ? "
                     + "ORDER BY created_at DESC, id DESC LIMIT ?", [.text(webhookID), .integer(Int64(limit))])
            .compactMap(Self.delivery)
    }

    /// How many deliveries the outbox holds, by state.
    public func deliveryCounts() throws -> [WebhookDelivery.State: Int] {
        var counts: [WebhookDelivery.State: Int] = [:]
        for row in try db.query("SELECT state, count(*) FROM webhook_deliveries GROUP BY state") {
            if let state = row[0].string.flatMap(WebhookDelivery.State.init) { counts[state] = Int(row[1].int ?? 0) }
        }
        return counts
    }

    /// Forgets deliveries that ended before `cutoff` (delivered or given up): the outbox keeps what is recent.
    public func pruneDeliveries(before cutoff: Date) throws {
        try db.run("DELETE FROM webhook_deliveries WHERE state <> 'pending' AND last_attempt_at < ?",
                   [.real(cutoff.timeIntervalSince1970)])
    }
}
