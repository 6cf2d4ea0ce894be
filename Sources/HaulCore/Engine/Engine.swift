import FoundationEssentials
import HaulLoop

/// The download engine: every download as a `DownloadMachine`, the queue, the slots, the per-host connection cap,
/// the global speed limit and the store. Running downloads have a `DownloadRunner` that carries out their machine's
/// actions against two seams, a `Fetcher` (libcurl) and a `Clock` (the loop's timers). Confined to the loop thread.
///
/// Its parts, a file each in this folder: start and recovery here; `+Settings` (settings, the speed schedule,
/// shutdown), `+Queries` (snapshots, totals, pages), `+Commands` (add, batch, idempotency, change, remove, files),
/// `+Machines` (stepping machines, fanning out their changes, what runners use), `+Scheduling` (scheduling over
/// `RunQueue`, ids), `+Cluster` (claims and leases on a shared store). Beside them, components of their own:
/// `WebhookDispatcher` (the webhooks' outbox), as the observers of downloads' changes (`DownloadObserver`); and
/// as types of their own: `DownloadRegistry` (machines, indexes, totals), `Persister` (group commit, journals, the
/// webhook changes stored with their downloads), `RunQueue` and `LeaseSchedule`.
public final class Engine {
    let loop: EventLoop
    let fetcher: Fetcher
    /// The engine's time: the loop's, or a test's manual clock. The event hub keeps time by it too.
    public let clock: Clock
    let store: DownloadStore
    /// The flags' settings; `maxActive`, `defaultConnections`, `maxConnectionsPerHost` and `maxSpeed` follow
    /// `settings` while it runs.
    public internal(set) var config: EngineConfig
    /// What the flags set of what a client may change (`PATCH /settings`).
    public let defaultSettings: ServerSettings
    /// A client's changes, kept in the store, over `defaultSettings`.
    var settingsChange = SettingsChange()
    var scheduleTimer: ClockTimer?
    let log: Logger
    /// The curl multi handle when the engine made its own fetcher; closed at shutdown.
    let multi: CurlMulti?
    let settings: MachineSettings
    /// Every download's machine, with the indexes and totals kept in step.
    let registry = DownloadRegistry()
    /// The machines, for reading (a change goes through `registry`).
    var machines: [String: MachineBox] { registry.machines }
    var runners: [String: DownloadRunner] = [:]
    /// The tokens that own downloads, by id, for their limits (`ownerLimits`).
    var ownerTokens: [String: AccessToken] = [:]
    /// Queued downloads of tokens running as many as their `max_active`, by owner, in run queue order: set aside
    /// until one of the owner's runners ends, so they neither start nor hold up the downloads behind them.
    var heldByOwner: [String: RunQueue] = [:]
    var nextSequence: Int64 = 1
    var tick: ClockTimer?
    /// Open connections per host, over all downloads.
    var hostConnections: [String: Int] = [:]
    var refill: ClockTimer?
    /// Body bytes written to part files since this process started (a counter for metrics; never decreases).
    public internal(set) var bytesReceived: Int64 = 0
    /// Group commit, writes that may not wait, journals, and the webhook changes stored with their downloads.
    let persister: Persister
    /// The speed limit over all downloads.
    var globalBucket: TokenBucket?
    /// Fetcher calls that runners made from inside a transfer's callback, run on the loop's next turn in order.
    var deferred: [() -> Void] = []
    var deferTimer: ClockTimer?
    /// Told of every change, on the loop thread, after it is stored.
    public var onChange: ((EngineChange) -> Void)?
    /// With a store several nodes share: what this node holds, its timers and its notification connection.
    var cluster: ClusterMembership?
    /// Webhooks: their changes stored with the downloads they tell of, their deliveries sent.
    public private(set) lazy var webhooks = WebhookDispatcher(host: self)
    /// Finished files moved to their completed folder, and the operator's hooks run after.
    private(set) lazy var mover = FileMover(host: self)
    private(set) lazy var hooks = HookRunner(host: self, mover: mover)
    /// The parts that follow downloads' changes, told in this order.
    lazy var observers: [DownloadObserver] = [webhooks, mover, hooks]
    /// Categories and their speed limits.
    let book = CategoryBook()
    /// The download as the API shows it, for webhook bodies (set by the API; a bare id without it).
    public var webhookResource: ((DownloadSnapshot) -> JSONValue)?
    /// When the store was last asked whether it answers, and why not (nil: it did).
    var readiness: (at: Double, problem: String?)?

    /// An engine fetching with libcurl on `loop` and timing with its timers, unless a test gives other seams.
    public init(loop: EventLoop, store: DownloadStore, config: EngineConfig, log: Logger, fetcher: Fetcher? = nil,
                clock: Clock? = nil) throws {
        self.loop = loop
        if let fetcher {
            self.fetcher = fetcher
            multi = nil
        } else {
            let multi = try CurlMulti(loop: loop)
            self.fetcher = multi
            self.multi = multi
        }
        self.clock = clock ?? LoopClock(loop: loop)
        self.store = store
        self.config = config
        self.log = log
        var settings = MachineSettings()
        settings.maxAttempts = config.maxAttempts
        settings.retryBaseDelay = config.retryBaseDelay
        settings.retryMaxDelay = config.retryMaxDelay
        settings.stallTimeout = Double(config.stallTimeout)
        settings.lowestSpeed = config.lowestSpeed
        settings.tickInterval = config.progressInterval
        settings.minSplitSize = config.minSplitSize
        settings.space = config.space
        self.settings = settings
        defaultSettings = ServerSettings(maxActive: config.maxActive, maxSpeed: config.maxSpeed,
                                         defaultConnections: config.defaultConnections,
                                         maxConnectionsPerHost: config.maxConnectionsPerHost, proxy: config.proxy)
        globalBucket = config.maxSpeed.map { TokenBucket(rate: Double($0)) }
        persister = Persister(store: store, clock: self.clock, log: log)
        persister.host = self
    }

    /// Loads the stored downloads, puts the ones that were running back in the queue and starts the queue.
    public func start() throws {
        try loadSettings(throwing: true)
        try loadCategories()
        let count = try store.count()
        registry.reserve(count)
        var interrupted: [Download] = []
        // Sharing the store, a running download is another node's (or, its lease run out, whoever claims it).
        let shared = store.isShared
        try store.forEach { download in
            let box = MachineBox(DownloadMachine(download: download, settings: settings))
            if download.state.isActive && !shared {
                _ = box.machine.handle(.interrupted, at: clock.now)
                interrupted.append(box.machine.download)
                registry.insert(box, holding: box.machine.download)
            } else {
                // As loaded: indexed without copying the machine's download out of its box.
                registry.insert(box, holding: download)
            }
            nextSequence = max(nextSequence, download.sequence + 1)
        }
        // Written once the rows are read: no update while the table is being stepped through.
        for download in interrupted { try store.save(download) }
        registry.sortOrder()
        for box in machines.values where box.machine.download.state == .failed {
            releaseUnwritten(box.machine.download)
        }
        tick = clock.every(config.progressInterval) { [unowned self] in
            let now = self.clock.now
            for runner in Array(self.runners.values) { runner.deliver(.tick(now: now)) }
        }
        if shared {
            let membership = ClusterMembership(host: self)
            cluster = membership
            try membership.join()
        }
        mover.resume()
        hooks.start()
        try webhooks.start()
        schedule()
    }

    /// A failed download keeps the bytes it received but not the blocks reserved for the rest; one that failed
    /// under an earlier version may still hold them, so they are given back at start.
    private func releaseUnwritten(_ download: Download) {
        guard let name = download.filename, !download.segments.isEmpty,
              let directory = try? directory(download.directory, create: false),
              directory.size(name + ".part") != nil,
              let file = try? PartFile(directory: directory, name: name + ".part") else { return }
        file.release(download.segments.compactMap { segment in segment.end.map { (segment.cursor, $0) } })
    }
}

/// A download's machine on the heap, so the engine's dictionary holds a reference, not the value.
final class MachineBox {
    var machine: DownloadMachine
    /// The clock's time of the last bytes written, which stamp no `updatedAt` on the hot path; a snapshot makes
    /// `updated_at` follow them.
    var lastWriteAt: Double?

    init(_ machine: DownloadMachine) { self.machine = machine }
}
