import FoundationEssentials
import HaulLoop

/// What the engine keeps of webhooks: the list (as stored), the deliveries of changes that wait for the group
/// commit (stored with the download they tell of), and the attempts in flight.
final class WebhookOutbox {
    var hooks: [Webhook] = []
    /// By download id: written in the transaction that stores that download, dropped if that write is refused.
    var waiting: [String: [WebhookDelivery]] = [:]
    var inFlight: [TransferID: WebhookAttempt] = [:]
    var timer: ClockTimer?
    /// The next retry this node waits for, when sooner than the timer's next second: (when, its timer).
    var retry: (at: Double, timer: ClockTimer)?
    var counter = 0
    var stopping = false
    var prunedAt = -Double.infinity
}

/// One POST of one delivery: reads the status, throws the body away.
final class WebhookAttempt: FetchDelegate {
    unowned let engine: Engine
    var delivery: WebhookDelivery
    var status: Int?

    init(engine: Engine, delivery: WebhookDelivery) {
        self.engine = engine
        self.delivery = delivery
    }

    func transfer(_ id: TransferID, responded response: TransferResponse) -> Bool {
        status = response.status
        return true
    }

    func transfer(_ id: TransferID, received chunk: TransferChunk) -> ChunkDecision { .consumed }

    func transfer(_ id: TransferID, ended result: TransferResult) {
        // Not from inside the fetcher's callback: the next attempts start from here.
        engine.later { [engine] in engine.attemptEnded(id, result) }
    }
}

/// Webhooks: a change that a webhook asked for puts one delivery per webhook in the outbox, in the transaction
/// that stores the change; the outbox is sent from the loop with the same libcurl multi as the downloads (and the
/// same outbound address policy), each delivery signed, retried with backoff for a day, at least once.
extension Engine {
    /// Attempts in flight at once, over every webhook.
    static let webhookConcurrency = 8
    /// An attempt's time limit; a delivery taken for an attempt is held this long and more.
    static let webhookTimeout = 15.0

    public var webhooks: [Webhook] { outbox.hooks }

    func startWebhooks() throws {
        outbox.hooks = try store.webhooks()
        // What this node had in flight when it stopped or died is due now: no attempt of it is still running.
        try store.releaseDeliveries(node: config.node, now: Date())
        outbox.timer = clock.every(1) { [unowned self] in self.sendDueDeliveries() }
        later { [unowned self] in self.sendDueDeliveries() }
    }

    func stopWebhooks() {
        outbox.stopping = true
        outbox.timer?.cancel()
        outbox.retry?.timer.cancel()
        outbox.retry = nil
        for id in outbox.inFlight.keys { fetcher.cancel(id) }
        // Their holds run out and they are sent again after the restart (at once, by this node's release).
        outbox.inFlight.removeAll()
    }

    public func addWebhook(url: String, events: [WebhookEvent], category: String?) throws(EngineError) -> Webhook {
        let hook = Webhook(id: Engine.newID(), url: url, secret: Webhook.newSecret(), events: events,
                           category: category, createdAt: Date())
        do {
            try store.insertWebhook(hook)
        } catch {
            throw .storage("\(error)")
        }
        outbox.hooks.append(hook)
        log.info("webhook added", ["webhook.id": hook.id, "webhook.url": Redact.url(url)])
        return hook
    }

    public func removeWebhook(_ id: String) throws(EngineError) {
        let found: Bool
        do {
            found = try store.deleteWebhook(id: id)
        } catch {
            throw .storage("\(error)")
        }
        outbox.hooks.removeAll { $0.id == id }
        for (download, deliveries) in outbox.waiting {
            outbox.waiting[download] = deliveries.filter { $0.webhookID != id }
        }
        guard found else { throw .notFound(id) }
        log.info("webhook removed", ["webhook.id": id])
    }

    public func webhook(_ id: String) -> Webhook? { outbox.hooks.first { $0.id == id } }

    /// The outbox by state (nil when the store cannot be read), for `/metrics`.
    public func webhookDeliveryCounts() -> [WebhookDelivery.State: Int]? { try? store.deliveryCounts() }

    public func deliveries(of id: String, limit: Int) throws(EngineError) -> [WebhookDelivery] {
        do {
            return try store.deliveries(webhookID: id, limit: limit)
        } catch {
            throw .storage("\(error)")
        }
    }

    /// Another node added or removed a webhook (its notification): read them again.
    func reloadWebhooks() {
        do {
            outbox.hooks = try store.webhooks()
        } catch {
            log.warning("cannot read the webhooks", ["error": "\(error)"])
        }
    }

    /// The deliveries `download` changing from `before` (nil: added; `removed`: gone) makes, to be stored in the
    /// transaction that stores the change.
    func webhookDeliveries(_ download: Download, before: DownloadState?, removed: Bool = false) -> [WebhookDelivery] {
        guard !outbox.hooks.isEmpty else { return [] }
        var events: [WebhookEvent] = []
        if removed {
            events = [.removed]
        } else if before == nil {
            events = [.created]
        } else if before != download.state {
            events = [.state]
            if download.state == .completed { events.append(.completed) }
            if download.state == .failed { events.append(.failed) }
        }
        guard !events.isEmpty else { return [] }
        let now = Date()
        let resource = webhookResource?(snapshotOf(download)) ?? .object([("id", .string(download.id))])
        var made: [WebhookDelivery] = []
        for hook in outbox.hooks {
            for event in events where hook.wants(event, category: download.category) {
                let id = Engine.newID()
                let body = JSONValue.object([
                    ("id", .string(id)),
                    ("event", .string(event.rawValue)),
                    ("webhook_id", .string(hook.id)),
                    ("created_at", .string(Timestamp.rfc3339(now))),
                    ("download", resource),
                ]).serialized()
                made.append(WebhookDelivery(id: id, webhookID: hook.id, event: event, downloadID: download.id,
                                            body: body, createdAt: now))
            }
        }
        return made
    }

    /// Stores the waiting deliveries of `id`, inside the transaction that stores the download; they stay waiting
    /// until `storedWaitingDeliveries` says that transaction committed (a rolled-back one keeps them for the next).
    func storeWaitingDeliveries(_ id: String) throws {
        guard let deliveries = outbox.waiting[id], !deliveries.isEmpty else { return }
        try store.insertDeliveries(deliveries)
    }

    /// The transaction that stored the waiting deliveries of `ids` committed.
    func storedWaitingDeliveries<S: Sequence<String>>(_ ids: S) {
        var any = false
        for id in ids where outbox.waiting.removeValue(forKey: id) != nil { any = true }
        if any { wakeDeliveries() }
    }

    /// Sends soon what was just stored (not from inside the transaction's caller).
    func wakeDeliveries() {
        guard !outbox.stopping, outbox.inFlight.count < Engine.webhookConcurrency else { return }
        later { [unowned self] in self.sendDueDeliveries() }
    }

    private func snapshotOf(_ download: Download) -> DownloadSnapshot {
        snapshot(download.id).map { snapshot in
            var snapshot = snapshot
            snapshot.download = download
            return snapshot
        } ?? DownloadSnapshot(download: download, speed: 0, activeConnections: 0)
    }

    /// Starts attempts of the due deliveries while fewer than `webhookConcurrency` are in flight.
    func sendDueDeliveries() {
        guard !outbox.stopping else { return }
        // A webhook's deliveries go with it: without webhooks the outbox is empty, and not read every second.
        let free = Engine.webhookConcurrency - outbox.inFlight.count
        guard free > 0, !outbox.hooks.isEmpty else { return }
        let due: [WebhookDelivery]
        do {
            due = try store.takeDueDeliveries(node: config.node, now: Date(), hold: Engine.webhookTimeout + 15,
                                              limit: free)
        } catch {
            return log.warning("cannot read the webhook outbox", ["error": "\(error)"])
        }
        for delivery in due { attempt(delivery) }
        // Ended deliveries stay a week for GET .../deliveries; looked at hourly.
        if clock.now - outbox.prunedAt >= 3600 {
            outbox.prunedAt = clock.now
            try? store.pruneDeliveries(before: Date().addingTimeInterval(-7 * 24 * 3600))
        }
    }

    private func attempt(_ delivery: WebhookDelivery) {
        guard let hook = outbox.hooks.first(where: { $0.id == delivery.webhookID }) else {
            // Its webhook was removed (here or through another node): nothing is left to send it to.
            return giveUp(delivery, "the webhook was removed")
        }
        outbox.counter += 1
        let id = TransferID(-outbox.counter)
        let body = Array(delivery.body.utf8)
        let timestamp = Int64(Date().timeIntervalSince1970)
        var request = TransferRequest(url: hook.url)
        request.body = body
        request.timeout = Engine.webhookTimeout
        request.connectTimeout = min(config.connectTimeout, Engine.webhookTimeout)
        // A receiver answers where it is: a redirect would turn the POST into a GET elsewhere.
        request.maxRedirects = 0
        request.addressPolicy = config.addressPolicy
        request.headers = [
            ("Content-Type", "application/json"),
            ("Haul-Event", delivery.event.rawValue),
            ("Haul-Delivery", delivery.id),
            ("Haul-Webhook", hook.id),
            ("Haul-Signature", Webhook.signature(secret: hook.secret, timestamp: timestamp, body: body)),
        ]
        request.userAgent = "haul/\(HaulVersion.current) webhook"
        let handler = WebhookAttempt(engine: self, delivery: delivery)
        do {
            try fetcher.start(id, request, delegate: handler)
        } catch {
            // A URL curl refuses stays refused: no retry.
            return giveUp(delivery, "\(error)")
        }
        outbox.inFlight[id] = handler
    }

    /// Looks at the outbox again in `seconds` (a retry due sooner than the once-a-second look).
    private func retry(after seconds: Double) {
        let at = clock.now + seconds
        if let pending = outbox.retry, pending.at <= at { return }
        outbox.retry?.timer.cancel()
        outbox.retry = (at, clock.after(seconds) { [unowned self] in
            self.outbox.retry = nil
            self.sendDueDeliveries()
        })
    }

    private func giveUp(_ delivery: WebhookDelivery, _ reason: String) {
        var ended = delivery
        ended.state = .failed
        ended.lastError = reason
        ended.lastAttemptAt = Date()
        try? store.recordAttempt(ended)
    }

    /// Stores how an attempt went: delivered on a 2xx; else tried again after a backoff, until a day has passed.
    func attemptEnded(_ id: TransferID, _ result: TransferResult) {
        guard let handler = outbox.inFlight.removeValue(forKey: id) else { return }
        var delivery = handler.delivery
        let now = Date()
        delivery.attempts += 1
        delivery.lastAttemptAt = now
        delivery.lastStatus = handler.status
        if let status = handler.status, (200..<300).contains(status), result.failure == nil || result.failure == .cutOff {
            delivery.state = .delivered
            delivery.lastError = nil
        } else {
            delivery.lastError = handler.status.map { "the receiver answered HTTP \($0)" }
                ?? (result.message.isEmpty ? "no answer" : result.message)
            var generator = SystemRandomNumberGenerator()
            // Five times a download's first retry wait (--retry-wait): 5 s by default.
            let wait = WebhookDelivery.backoff(attempts: delivery.attempts, base: 5 * config.retryBaseDelay,
                                               random: Double.random(in: 0..<1, using: &generator))
            if now.timeIntervalSince(delivery.createdAt) + wait > WebhookDelivery.retention {
                delivery.state = .failed
                log.warning("webhook delivery given up after a day", ["webhook.id": delivery.webhookID,
                                                                      "delivery.id": delivery.id])
            } else {
                delivery.nextAttemptAt = now.addingTimeInterval(wait)
                retry(after: wait)
            }
        }
        do {
            try store.recordAttempt(delivery)
        } catch {
            // The hold runs out and it is sent again: at least once.
            log.warning("cannot store a webhook delivery's outcome", ["delivery.id": delivery.id, "error": "\(error)"])
        }
        sendDueDeliveries()
    }
}
