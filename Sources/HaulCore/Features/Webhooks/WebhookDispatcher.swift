import FoundationEssentials
import HaulLoop

/// What the webhook dispatcher needs of the engine it tells of.
protocol WebhookHost: HostServices {
    /// The download as a delivery's body shows it.
    func resource(of download: Download) -> [UInt8]
}

/// Webhooks: a change that a webhook asked for is stored once, in the transaction that stores the change; its
/// deliveries (one per webhook that wants it) are made from it a slice per loop turn, so a thousand downloads
/// times a hundred webhooks never holds the loop; they are sent from the loop with the same libcurl multi as the
/// downloads (and the same outbound address policy), each signed, retried with backoff for a day, at least once.
/// Owns the list, each one's slots and rest, the changes that wait for the group commit (stored with the download
/// they tell of), the attempts in flight and their outcomes waiting to be stored; its rules for one attempt's end
/// are `WebhookAttemptOutcome`'s. Confined to the loop thread.
public final class WebhookDispatcher {
    /// Attempts in flight at once per webhook (one while it is failing).
    static let slotsPerWebhook = 2
    /// An attempt's time limit; a delivery taken for an attempt is held this long and more.
    static let timeout = 15.0
    /// Deliveries made per loop turn: a few milliseconds of inserts, so that whatever else the loop has to do (a
    /// large answer going out a socket buffer at a time) waits for little between its turns.
    public static let fanOutSlice = 250
    /// Rows pruned per loop turn.
    static let pruneSlice = 250
    /// Attempts started per loop turn: a few milliseconds of curl handles being set up.
    static let attemptsPerTurn = 32
    /// The pause between two slices of background work.
    public static let backgroundGap = 0.002
    /// The longest a failing webhook rests between attempts.
    static let maxRest = 300.0
    /// Delivered ones kept per webhook for `GET /webhooks/{id}/deliveries` (given-up ones a week).
    static let deliveredKept = 100

    unowned let host: WebhookHost
    var hooks: [Webhook] = []
    /// By webhook id: its attempts in flight, failures in a row, and until when (the clock's time) it rests.
    var slots: [String: WebhookSlots] = [:]
    /// By download id: written in the transaction that stores that download, dropped if that write is refused.
    var waiting: [String: [WebhookChange]] = [:]
    var inFlight: [TransferID: WebhookAttempt] = [:]
    /// Outcomes of attempts, stored together (a crash before loses only the record: the delivery is sent again).
    var outcomes: [WebhookDelivery] = []
    var outcomeFlush: ClockTimer?
    var timer: ClockTimer?
    /// Background slices asked for, by a number of their own.
    var background: [Int: ClockTimer] = [:]
    /// A fan-out slice or a sending pass is already asked for on the next turn.
    var fanOutAsked = false
    var sendAsked = false
    /// Bodies of recent changes by change id: a change is sent to every webhook in a short while.
    var resources: [String: String] = [:]
    var counter = 0
    var stopping = false
    var prunedAt = -Double.infinity
    var endedSincePrune = 0
    /// Where the next sending pass starts among the webhooks.
    var sendFrom = 0
    /// A prune going on, a slice per loop turn: the webhooks whose records are still to be pruned.
    var pruning: [String]?
    /// `/metrics` reads counts of a table that may hold many rows: kept a few seconds.
    var counts: (at: Double, value: [WebhookDelivery.State: Int])?

    init(host: WebhookHost) { self.host = host }

    var store: DownloadStore { host.store }
    var clock: Clock { host.clock }
    var log: Logger { host.log }

    /// Every webhook, as stored.
    public var list: [Webhook] { hooks }

    public func webhook(_ id: String) -> Webhook? { hooks.first { $0.id == id } }

    func engineStarted() throws {
        hooks = try store.webhooks()
        // What this node had in flight when it stopped or died is due now: no attempt of it is still running.
        try store.releaseDeliveries(node: host.config.node, now: clock.wallTime)
        timer = clock.every(1) { [unowned self] in
            // Changes another node stored and did not fan out (it died), and deliveries whose retry is due.
            self.askFanOut()
            self.sendDueDeliveries()
        }
        askFanOut()
        askSend()
    }

    func engineStopping() {
        stopping = true
        timer?.cancel()
        for timer in background.values { timer.cancel() }
        background.removeAll()
        for id in inFlight.keys { host.fetcher.cancel(id) }
        // Their holds run out and they are sent again after the restart (at once, by this node's release).
        inFlight.removeAll()
        flushOutcomes()
        outcomeFlush?.cancel()
    }

    public func add(url: String, events: [WebhookEvent], category: String?) throws(EngineError) -> Webhook {
        let hook = Webhook(
            id: HaulID.random(), url: url, secret: Webhook.newSecret(), events: events,
            category: category, createdAt: clock.wallTime)
        do {
            try store.insertWebhook(hook)
        } catch {
            throw .storage("\(error)")
        }
        hooks.append(hook)
        log.info("webhook added", ["webhook.id": hook.id, "webhook.url": Redact.url(url)])
        return hook
    }

    public func remove(_ id: String) throws(EngineError) {
        let found: Bool
        do {
            found = try store.deleteWebhook(id: id)
        } catch {
            throw .storage("\(error)")
        }
        hooks.removeAll { $0.id == id }
        slots.removeValue(forKey: id)
        guard found else { throw .notFound(id) }
        log.info("webhook removed", ["webhook.id": id])
    }

    /// The outbox by state (nil when the store cannot be read), for `/metrics`: counted at most every 10 s.
    public func deliveryCounts() -> [WebhookDelivery.State: Int]? {
        if let counts, clock.now - counts.at < 10 { return counts.value }
        guard let value = try? store.deliveryCounts() else { return nil }
        counts = (clock.now, value)
        return value
    }

    public func deliveries(of subject: WebhookDelivery.Subject, limit: Int) throws(EngineError) -> [WebhookDelivery] {
        flushOutcomes()
        do {
            return try store.deliveries(of: subject, limit: limit)
        } catch {
            throw .storage("\(error)")
        }
    }

    /// Another node added or removed a webhook (its notification): read them again.
    func reload() {
        do {
            hooks = try store.webhooks()
            let ids = Set(hooks.map(\.id))
            slots = slots.filter { ids.contains($0.key) }
        } catch {
            log.warning("cannot read the webhooks", ["error": "\(error)"])
        }
    }

    /// The change `download` changing from `before` (nil: added; `removed`: gone) is, if a webhook wants to hear of
    /// it, to be stored in the transaction that stores the change. One per change however many webhooks want it.
    func changes(_ download: Download, before: DownloadState?, removed: Bool = false) -> [WebhookChange] {
        guard !hooks.isEmpty else { return [] }
        var kinds: [WebhookEvent] = []
        if removed {
            kinds = [.removed]
        } else if before == nil {
            kinds = [.created]
        } else if before != download.state {
            kinds = [.state]
            if download.state == .completed { kinds.append(.completed) }
            if download.state == .failed { kinds.append(.failed) }
        }
        let wanted = kinds.filter { kind in hooks.contains { $0.wants(kind, category: download.category) } }
        guard !wanted.isEmpty else { return [] }
        return [
            WebhookChange(
                id: HaulID.ordered(), downloadID: download.id, category: download.category,
                kinds: wanted, createdAt: clock.wallTime,
                resource: String(decoding: host.resource(of: download), as: UTF8.self))
        ]
    }

    /// `download` changed from `before`: what a webhook wants to hear of it waits for the write that stores it.
    func downloadWillBeStored(_ download: Download, changedFrom before: Download) {
        let changes = changes(download, before: before.state)
        if !changes.isEmpty { waiting[download.id, default: []] += changes }
    }

    /// Stores the waiting changes of `id`, inside the transaction that stores the download; they stay waiting
    /// until `storedWaitingChanges` says that transaction committed (a rolled-back one keeps them for the next).
    func storeWaitingChanges(_ id: String) throws {
        guard let changes = waiting[id], !changes.isEmpty else { return }
        try store.insertChanges(changes)
    }

    /// The transaction that stored the waiting changes of `ids` committed.
    func storedWaitingChanges<S: Sequence<String>>(_ ids: S) {
        var any = false
        for id in ids where waiting.removeValue(forKey: id) != nil { any = true }
        if any { askFanOut() }
    }

    /// The changes waiting on `id`, handed over to whoever stores its removal (and forgotten here).
    func takeWaiting(_ id: String) -> [WebhookChange] { waiting.removeValue(forKey: id) ?? [] }

    // MARK: fan-out

    /// Runs outbox work that can wait (a fan-out slice, a prune) a moment from now: between two of its slices the
    /// loop gets time for what cannot, such as an answer going out a socket buffer at a time, which a slice on
    /// every turn would hold back by a slice per buffer.
    func inBackground(_ work: @escaping () -> Void) {
        // Kept until they fire: a timer let go of is a timer cancelled.
        counter += 1
        let key = counter
        background[key] = clock.after(WebhookDispatcher.backgroundGap) { [unowned self] in
            self.background.removeValue(forKey: key)
            work()
        }
    }

    /// Makes deliveries from stored changes soon (not from inside the caller's transaction).
    func askFanOut() {
        guard !stopping, !fanOutAsked, !hooks.isEmpty else { return }
        fanOutAsked = true
        inBackground { [unowned self] in
            self.fanOutAsked = false
            self.fanOutSlice()
        }
    }

    /// One slice: the deliveries of as many changes as make about `fanOutSlice`, in one transaction; the rest on
    /// the next turn, after whatever else the loop has to do (API requests first: they have the higher priority).
    private func fanOutSlice() {
        guard !stopping, !hooks.isEmpty else { return }
        let result: (made: Int, more: Bool)
        do {
            result = try store.fanOut(to: hooks, limit: WebhookDispatcher.fanOutSlice)
        } catch {
            // The changes stay stored; the once-a-second look tries again.
            return log.warning("cannot make webhook deliveries", ["error": "\(error)"])
        }
        if result.made > 0 {
            counts = nil
            askSend()
        }
        if result.more { askFanOut() }
    }
}

extension WebhookDispatcher: DownloadObserver {}

/// One webhook's share of the sender: each has slots of its own, so a receiver that never answers holds only its
/// own, and one that fails rests (with one attempt at a time after) instead of being tried at every due delivery.
struct WebhookSlots: Equatable {
    var inFlight = 0
    var failures = 0
    var restUntil = -Double.infinity
}

/// One POST of one delivery: reads the status, throws the body away.
final class WebhookAttempt: FetchDelegate {
    unowned let dispatcher: WebhookDispatcher
    var delivery: WebhookDelivery
    var status: Int?

    init(dispatcher: WebhookDispatcher, delivery: WebhookDelivery) {
        self.dispatcher = dispatcher
        self.delivery = delivery
    }

    func transfer(_ id: TransferID, responded response: TransferResponse) -> Bool {
        status = response.status
        return true
    }

    func transfer(_ id: TransferID, received chunk: TransferChunk) -> ChunkDecision { .consumed }

    func transfer(_ id: TransferID, ended result: TransferResult) {
        // Not from inside the fetcher's callback: the next attempts start from here.
        dispatcher.host.turns.later { [dispatcher] in dispatcher.attemptEnded(id, result) }
    }
}
