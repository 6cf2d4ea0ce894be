import FoundationEssentials
import HaulLoop

/// The download engine: every download as a `DownloadMachine`, the queue, the slots and the store. Running
/// downloads have a `DownloadRunner` that carries out their machine's actions against two seams, a `Fetcher`
/// (libcurl) and a `Clock` (the loop's timers). Confined to the loop thread.
///
/// Its parts, a file each in this folder: start, shutdown and what clients read of the settings here; `+Commands`
/// (add, change, remove, files and free space), `+Queries` (snapshots, totals, pages), `+Queue` (the queue as
/// clients reorder it), `+Machines` (stepping machines, fanning out their changes), `+Scheduling` (slots, limits,
/// and what the components ask of the engine). The rest are components, each behind a host protocol:
/// `DownloadRegistry` (machines, indexes, totals), `RunnerPool` and `Bandwidth` (what running downloads share),
/// `Persister` (group commit, journals), `SettingsInForce`, and the features in `Features/`: `WebhookDispatcher`,
/// `FileMover` and `HookRunner` (the observers of downloads' changes), `ClusterMembership`, `Tenancy` and
/// `Categories`.
public final class Engine {
    let loop: EventLoop
    /// The engine's time: the loop's, or a test's manual clock. The event hub keeps time by it too.
    public let clock: Clock
    let store: DownloadStore
    let log: Logger
    /// The flags' settings, with a client's changes in force over them.
    let settings: SettingsInForce
    /// Every download's machine, with the indexes and totals kept in step.
    let registry = DownloadRegistry()
    /// The running downloads, the fetcher and the work deferred to the next turn.
    let pool: RunnerPool
    /// The speed limits and the per-host connection cap the running downloads share.
    let bandwidth: Bandwidth
    /// Group commit, writes that may not wait, journals, and the webhook changes stored with their downloads.
    let persister: Persister
    /// With a store several nodes share: what this node holds, its timers and its notification connection.
    var cluster: ClusterMembership?
    /// Webhooks: their changes stored with the downloads they tell of, their deliveries sent.
    public private(set) lazy var webhooks = WebhookDispatcher(host: self)
    /// The parts that follow downloads' changes, told in this order: the webhooks, then the finishing of files
    /// (moved to their completed folder, then the operator's hooks run).
    private(set) lazy var observers: [DownloadObserver] = {
        let mover = FileMover(host: self)
        return [webhooks, mover, HookRunner(host: self, mover: mover)]
    }()
    /// Categories, their folders and speed limits.
    public private(set) lazy var categories = Categories(host: self)
    /// Tokens and the limits of those that own downloads.
    public private(set) lazy var tenancy = Tenancy(host: self)
    /// The API in front: told of every change on the loop thread after it is stored, and asked how a download is
    /// shown (webhook bodies, a hook's input).
    public weak var listener: EngineListener?

    /// An engine fetching with libcurl on `loop` and timing with its timers, unless a test gives other seams.
    public init(
        loop: EventLoop, store: DownloadStore, config: EngineConfig, log: Logger, fetcher: Fetcher? = nil,
        clock: Clock? = nil
    ) throws {
        self.loop = loop
        let clock = clock ?? LoopClock(loop: loop)
        self.clock = clock
        self.store = store
        self.log = log
        pool = try RunnerPool(loop: loop, clock: clock, fetcher: fetcher, transferLoops: config.transferLoops)
        bandwidth = Bandwidth(clock: clock)
        persister = Persister(store: store, clock: clock, log: log)
        settings = SettingsInForce(config: config)
        settings.host = self
        persister.host = self
        if config.bittorrent.enabled {
            pool.torrents = TorrentTransfers(loop: loop, log: log) { [unowned self] in
                let config = self.config
                let proxy: ProxyServer? = if case .through(let server)? = config.proxy { server } else { nil }
                return config.bittorrent.settings(
                    userAgent: config.userAgent, addressPolicy: config.addressPolicy, proxy: proxy)
            }
        }
        _ = bandwidth.setLimit(config.maxSpeed)
        bandwidth.connectionCap = config.maxConnectionsPerHost
        bandwidth.connectionFreed = { [unowned self] in
            self.pool.deliverToAll(.hostConnectionFreed)
            self.pool.playlists.connectionFreed()
        }
        pool.playlists.bandwidth = bandwidth
    }

    /// Loads the stored downloads, puts the ones that were running back in the queue and starts the queue.
    public func start() throws {
        try settings.load(throwing: true)
        try categories.load()
        registry.reserve(try store.count())
        var interrupted: [Download] = []
        var failed: [Download] = []
        var seeding: [Download] = []
        // Sharing the store, a running download is another node's (or, its lease run out, whoever claims it).
        let shared = store.isShared
        let observers = self.observers
        // The rows are read and decoded beside this thread while it builds each machine and indexes it; what the
        // start does with some of them is noted now, while each is at hand, instead of in walks of all afterwards.
        // Most come packed straight from their rows, and are indexed from their bytes.
        try store.forEachStoredOverlapped { stored in
            let download: Download
            switch stored {
            case .packed(let row):
                let packed = row.packed
                if Self.onlyIndexed(packed) { return registry.insert(loaded: packed, settings: settings.machine) }
                download = packed.download
            case .whole(let whole):
                download = whole
            }
            let box = MachineBox(DownloadMachine(download: download, settings: settings.machine))
            var loaded = download
            if download.state.isActive && !shared {
                _ = box.machine.handle(.interrupted, at: clock.now)
                loaded = box.machine.download
                interrupted.append(loaded)
            }
            // As loaded: indexed without copying the machine's download out of its box.
            registry.insert(box, holding: loaded, loading: true)
            if loaded.state == .failed { failed.append(loaded) }
            if loaded.state == .seeding, !shared { seeding.append(loaded) }
            for observer in observers { observer.downloadLoaded(loaded) }
        }
        // Written once the rows are read: no update while the table is being stepped through.
        for download in interrupted { try store.save(download) }
        registry.finishLoading()
        for download in failed { releaseUnwritten(download) }
        pool.startTicking(every: config.progressInterval, clock: clock)
        if shared {
            let membership = ClusterMembership(host: self)
            cluster = membership
            try membership.join()
        }
        for observer in observers { try observer.engineStarted() }
        // Seeding torrents go back to their swarms; they hold no slot.
        for download in seeding {
            pool.start(DownloadRunner(host: self, id: download.id, url: download.url, maxSpeed: download.maxSpeed))
        }
        schedule()
        indexForSearchSoon()
    }

    /// Builds the search index over what the start loaded, 1,024 downloads a turn (well under a millisecond, so a
    /// request waits for no more than that): a million cost the start-up nothing, and searches walk until it is
    /// done (about half a second later).
    private func indexForSearchSoon() {
        pool.turns.later { [unowned self] in
            if !self.registry.indexForSearch(count: 1_024) { self.indexForSearchSoon() }
        }
    }

    /// Stops every transfer and checkpoints it (fdatasync, then the journal); they resume on the next start.
    public func shutdown() {
        // No new claims while the running downloads stop.
        cluster?.stopping = true
        settings.stop()
        // Closing the fetcher ends every transfer; what was deferred has nothing left to do.
        pool.stop()
        bandwidth.stop()
        persister.stop()
        for observer in observers { observer.engineStopping() }
        cluster?.leave()
        pool.close()
    }

    /// Whether the start has nothing to do with a download loaded packed but index it: none of what it finishes (an
    /// interrupted, failed or seeding download) nor of what the observers note as loaded (`FileMover`'s moves left
    /// unsettled, `HookRunner`'s hooks due). Any other is unpacked and loaded as a download.
    private static func onlyIndexed(_ packed: PackedDownload) -> Bool {
        if packed.hookPending { return false }
        switch packed.state {
        case .paused, .queued: return true
        case .completed: return packed.moveSettled || !packed.hasCompletedDirectory
        default: return false
        }
    }

    /// A failed download keeps the bytes it received but not the blocks reserved for the rest; one that failed
    /// under an earlier version may still hold them, so they are given back at start.
    private func releaseUnwritten(_ download: Download) {
        guard let name = download.filename, !download.segments.isEmpty,
            let directory = try? directory(download.directory, create: false),
            directory.size(name + ".part") != nil,
            let file = try? PartFile(directory: directory, name: name + ".part")
        else { return }
        file.release(download.segments.compactMap { segment in segment.end.map { (segment.cursor, $0) } })
    }
}

/// What sits in front of the engine (the API).
public protocol EngineListener: AnyObject {
    /// Told of every change, on the loop thread, after it is stored.
    func engineChanged(_ change: EngineChange)
    /// The download as the operator's programs see it: a webhook's body, a hook's standard input.
    func resource(of snapshot: DownloadSnapshot) -> [UInt8]
    /// Bytes of `id` were written, while a reader follows it (`Operations.follow(reading:)`).
    func engineWrote(_ id: String)
}

/// The settings and limits in force, as clients read and change them.
extension Engine {
    /// The flags' settings; `maxActive`, `defaultConnections`, `maxConnectionsPerHost`, `maxSpeed` and the proxy
    /// follow a client's changes.
    public var config: EngineConfig { settings.config }

    /// What the flags set of what a client may change.
    public var defaultSettings: ServerSettings { settings.defaults }

    /// The settings in force: the defaults with a client's changes.
    public var currentSettings: ServerSettings { settings.current }

    /// Changes the settings (a field set to nil goes back to its default), stores them and puts them in force.
    public func changeSettings(_ change: SettingsChange) throws(EngineError) -> ServerSettings {
        try settings.change(change)
    }

    /// The speed limit over all downloads now, the schedule's window's or the base one (nil: none).
    public var currentSpeedLimit: Int64? { bandwidth.limit }

    /// Body bytes written to part files since this process started.
    public var bytesReceived: Int64 { bandwidth.bytesReceived }

    public var allCategories: [Category] { categories.all }
}
