import FoundationEssentials
import HaulLoop

/// What a download machine decides by. Every machine of an engine holds the same settings, so they live in one
/// shared storage, copied only when one copy is changed: 8 bytes per machine instead of 96, with 100,000 stored.
public struct MachineSettings: Sendable {
    private final class Storage: @unchecked Sendable {
        var maxAttempts = 5
        var retryBaseDelay: Double = 1
        var retryMaxDelay: Double = 60
        var stallTimeout: Double = 60
        var lowestSpeed: Int64 = 0
        var tickInterval: Double = 1
        var minSplitSize: Int64 = 4 << 20
        var checkpointBytes: Int64 = 16 << 20
        var spaceCheckBytes: Int64 = 4 << 20
        var space = SpacePolicy()
        var statusBoard: StatusBoard?

        func copy() -> Storage {
            let copy = Storage()
            (copy.maxAttempts, copy.retryBaseDelay, copy.retryMaxDelay) = (maxAttempts, retryBaseDelay, retryMaxDelay)
            (copy.stallTimeout, copy.lowestSpeed, copy.tickInterval) = (stallTimeout, lowestSpeed, tickInterval)
            (copy.minSplitSize, copy.checkpointBytes, copy.spaceCheckBytes) = (
                minSplitSize, checkpointBytes,
                spaceCheckBytes
            )
            copy.space = space
            copy.statusBoard = statusBoard
            return copy
        }
    }

    private var storage = Storage()

    private mutating func change(_ body: (Storage) -> Void) {
        if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
        body(storage)
    }

    /// Attempts per download before it fails (the first one included).
    public var maxAttempts: Int {
        get { storage.maxAttempts }
        set { change { $0.maxAttempts = newValue } }
    }
    /// First retry delay in seconds; doubles with each attempt up to `retryMaxDelay`.
    public var retryBaseDelay: Double {
        get { storage.retryBaseDelay }
        set { change { $0.retryBaseDelay = newValue } }
    }
    public var retryMaxDelay: Double {
        get { storage.retryMaxDelay }
        set { change { $0.retryMaxDelay = newValue } }
    }
    /// A transfer that receives nothing (or less than `lowestSpeed`) this long is cut and retried.
    public var stallTimeout: Double {
        get { storage.stallTimeout }
        set { change { $0.stallTimeout = newValue } }
    }
    /// Bytes per second below which a connection counts as stalled; 0 watches for silence only.
    public var lowestSpeed: Int64 {
        get { storage.lowestSpeed }
        set { change { $0.lowestSpeed = newValue } }
    }
    /// The tick's period, which stall rates are measured over.
    public var tickInterval: Double {
        get { storage.tickInterval }
        set { change { $0.tickInterval = newValue } }
    }
    /// No segment is split below this size (but see `SegmentPlanner.nextWork` for lagging connections).
    public var minSplitSize: Int64 {
        get { storage.minSplitSize }
        set { change { $0.minSplitSize = newValue } }
    }
    /// A checkpoint at the latest after this many bytes (and at every tick).
    public var checkpointBytes: Int64 {
        get { storage.checkpointBytes }
        set { change { $0.checkpointBytes = newValue } }
    }
    /// The unreserved bytes after which free space is looked at again.
    public var spaceCheckBytes: Int64 {
        get { storage.spaceCheckBytes }
        set { change { $0.spaceCheckBytes = newValue } }
    }
    public var space: SpacePolicy {
        get { storage.space }
        set { change { $0.space = newValue } }
    }
    /// Where the engine puts up status answers of downloads at rest; a machine's box takes its own down when it
    /// changes (`MachineBox`).
    public var statusBoard: StatusBoard? {
        get { storage.statusBoard }
        set { change { $0.statusBoard = newValue } }
    }

    public init() {}
}

/// One download's logic as a value: events in (`handle`), actions out. No I/O, no clock, no curl: the runner that
/// owns the part file, the transfers and the timers carries the actions out and reports back. Every change of
/// `download.state` goes through `transition`, which follows `DownloadState.next(after:)` and stops the process on a
/// transition the table lacks (a programming error, never a client's or an origin's doing).
///
/// Phases while running: probing (HEAD, else a one-byte GET) -> opening the part file -> reserving its space ->
/// transferring (connections, each an enum of its states) -> verifying (sync, checksum) -> publishing (the name).
public struct DownloadMachine {
    public internal(set) var download: Download
    public var settings: MachineSettings

    enum Phase: Equatable {
        /// Not running: queued, paused, failed, completed, or stopped.
        case idle
        /// The first request is out; its headers have not come (`since`: the first tick that saw it waiting).
        case probing(TransferID, since: Double?)
        /// The first answer told no size: a HEAD asks for it, then the body is asked for again.
        case probingHead(TransferID, since: Double?)
        /// Waiting to probe again after a failed attempt.
        case probeBackoff(TimerID)
        /// The host had no connection to spare for the first request.
        case probeWaitingForHost
        case opening(contentDisposition: String?)
        case reserving
        case transferring
        case verifying
        case publishing
        /// A torrent in the BitTorrent session (fetching its metadata, checking, downloading).
        case torrenting
        /// A complete torrent with its files named, uploading to its swarm.
        case seeding
    }

    /// One connection fetching one segment.
    struct Connection: Equatable {
        enum State: Equatable {
            /// Its transfer runs.
            case fetching(TransferID)
            /// The machine stopped its transfer (answering a callback) and waits for it to end with `outcome`.
            case stopping(TransferID, Outcome)
            /// Waiting to try its segment again.
            case backoff(TimerID)
        }

        enum Outcome: Equatable {
            case failed(DownloadError)
            /// The segment was split under it and its part is complete: the abort is a success.
            case reachedEnd
        }

        var segment: Int
        var state: State
        /// Where it fetches from: 0 the download's URL, n its mirror n - 1.
        var source = 0
        /// The range asked for (`end` nil: to the end of the file), nil for a plain GET of the whole file.
        var requested: (start: Int64, end: Int64?)?
        /// Stall watch: bytes at the previous tick (-1 before the first), and since when it has been too slow.
        var lastTickBytes: Int64 = -1
        var slowSince: Double?
        /// When its transfer started and the segment's bytes then: its rate, which work stealing weighs.
        var launchedAt: Double = 0
        var bytesAtLaunch: Int64 = 0

        var transfer: TransferID? {
            switch state {
            case .fetching(let id), .stopping(let id, _): return id
            case .backoff: return nil
            }
        }

        static func == (a: Connection, b: Connection) -> Bool {
            a.segment == b.segment && a.state == b.state && a.source == b.source
                && a.requested?.start == b.requested?.start
                && a.requested?.end == b.requested?.end && a.lastTickBytes == b.lastTickBytes
                && a.slowSince == b.slowSince && a.launchedAt == b.launchedAt && a.bytesAtLaunch == b.bytesAtLaunch
        }
    }

    var phase = Phase.idle
    /// Everything else a run needs, out of line: made at the first change (see `MachineRun`).
    var run = RunBox()
    private var counter: Int {
        get { run[\.counter] }
        _modify { yield &run[seed: download.sequence].counter }
    }
    private var random: SplitMix64 {
        get { run[\.random] }
        _modify { yield &run[seed: download.sequence].random }
    }
    private var pending: [MachineAction] {
        get { run[\.pending] }
        _modify { yield &run[seed: download.sequence].pending }
    }

    public init(download: Download, settings: MachineSettings) {
        self.download = download
        self.settings = settings
    }

    /// The dialect the download's own URL speaks: what its answers mean.
    var origin: any OriginDialect {
        download.kind.isPlaylist ? PlaylistDialect() : Origins.dialect(forStored: download.url)
    }

    /// The dialect mirror `index` speaks (another protocol than the download's may serve the same file).
    func mirrorOrigin(_ index: Int) -> any OriginDialect {
        download.mirrors.indices.contains(index) ? Origins.dialect(forStored: download.mirrors[index].url) : origin
    }

    /// Bytes per second, smoothed; 0 while nothing runs.
    public var speed: Double {
        if download.kind == .torrent { return phase == .torrenting ? torrentRate : 0 }
        return activeConnections == 0 ? 0 : meter.bytesPerSecond
    }
    /// Connections with a transfer running.
    public var activeConnections: Int { connections.filter { $0.transfer != nil }.count }
    /// Whether the machine holds a running download (it has a slot).
    public var isRunning: Bool { phase != .idle }

    /// When the download tries again, on the runner's clock, while it waits for nothing else: its first request
    /// after a failed attempt, or every connection waiting to retry. nil while anything is under way.
    public var nextAttemptAt: Double? {
        guard let retry else { return nil }
        if case .probeBackoff(let timer) = phase { return retry.deadlines[timer] }
        guard phase == .transferring, !connections.isEmpty else { return nil }
        var earliest: Double?
        for connection in connections {
            guard case .backoff(let timer) = connection.state else { return nil }
            if let due = retry.deadlines[timer] { earliest = min(earliest ?? due, due) }
        }
        return earliest
    }

    /// The failure that made the download try again, until it completes or a client resumes it.
    public var lastRetryError: DownloadError? { retry?.error }

    /// Schedules `timer` for a retry after `delay` because of `error`.
    mutating func scheduleRetry(_ timer: TimerID, after delay: Double, because error: DownloadError) {
        var deadlines = retry?.deadlines ?? [:]
        deadlines[timer] = now + delay
        retry = RetryWait(error: error, deadlines: deadlines)
        emit(.schedule(timer, after: delay))
    }

    /// Applies `event`, which happened at `now` on the runner's clock (monotonic seconds), and returns what the
    /// runner must do, in order.
    public mutating func handle(_ event: MachineEvent, at now: Double) -> [MachineAction] {
        self.now = now
        switch event {
        case .start(let now): start(now: now)
        case .foundFinished(let name, let file): foundFinished(name, file: file)
        case .responded(let id, let response): responded(id, response)
        case .received(let id, let count): received(id, count: count)
        case .wrote(let id, let count): wrote(id, count: count)
        case .writeFailed(let id, let error): writeFailed(id, error)
        case .ended(let id, let result): ended(id, result)
        case .compared(let id, let checked, let differsAt, let result):
            mirrorCompared(id, checked: checked, differsAt: differsAt, result)
        case .couldNotStart(let id, let message): couldNotStart(id, message)
        case .noHostConnection(let id): noHostConnection(id)
        case .hostConnectionFreed: hostConnectionFreed()
        case .fileOpened(let info): fileOpened(info)
        case .fileFailed(let error): fileFailed(error)
        case .reserved(let ok): reservedSpace(ok)
        case .freeSpace(let free): freeSpace(free)
        case .synced(let segments, let generation, let final): synced(segments, generation: generation, final: final)
        case .syncFailed(let error): syncFailed(error)
        case .verified(let digest): verified(digest)
        case .published(let name, let file): published(name, file: file)
        case .publishFailed(let error): fail(error)
        case .timer(let id): timerFired(id)
        case .tick(let now): tick(now: now)
        case .pause: pause()
        case .resume: resume()
        case .change(let changes): change(changes)
        case .stop(let keepFile):
            if !keepFile, download.kind == .torrent { torrentRemoved() }
            stopEverything(sync: keepFile)
        case .interrupted: transition(.interrupt)
        case .wanted(let offset): wanted(offset)
        case .becamePlaylist:
            // Only before a byte is written: the first answer showed a playlist, whose stream answers instead.
            if download.receivedBytes == 0 { download.kind = .hls }
        case .playlist(let info): download.hls = info
        case .torrentReady(let info): torrentReady(info)
        case .torrentProgress(let info, let rate): torrentProgress(info, rate: rate)
        case .torrentFinished: torrentFinished()
        case .torrentFailed(let error): fail(error)
        case .torrentSeeding(let name, let file): torrentSeeding(name, file: file)
        case .torrentSeeded: torrentSeeded()
        }
        defer { pending.removeAll(keepingCapacity: true) }
        return pending
    }

    /// Sets the download's timestamps, which the engine keeps from its clock (the machine reads none).
    public mutating func stamp(updatedAt: Date, startedAt: Date?, completedAt: Date?) {
        download.updatedAt = updatedAt
        download.startedAt = startedAt
        download.completedAt = completedAt
    }

    // MARK: helpers for the extensions

    mutating func emit(_ action: MachineAction) { pending.append(action) }

    mutating func log(_ level: Logger.Level, _ message: String, _ meta: [String: String] = [:]) {
        emit(.log(level, message, meta))
    }

    /// Moves to the state the table gives for `event`, then applies `change`.
    mutating func transition(_ event: DownloadEvent, _ change: (inout Download) -> Void = { _ in }) {
        guard let next = download.state.next(after: event) else {
            preconditionFailure("no transition from \(download.state.rawValue) on \(event.rawValue)")
        }
        download.state = next
        change(&download)
    }

    /// Replaces the segments; the journal follows and never claims more than they hold.
    mutating func setSegments(_ segments: [Segment]) {
        let before = download.receivedBytes
        download.segments = segments
        // Bytes written are given up (another version of the file, a restart, a checksum that failed): readers of
        // the old bytes must not be handed new ones after them.
        if download.receivedBytes < before { discards += 1 }
        download.journal = SegmentPlanner.journal(synced: download.journal, live: segments)
    }

    mutating func updateSegments(_ change: (inout [Segment]) -> Void) {
        var segments = download.segments
        change(&segments)
        setSegments(segments)
    }

    /// A transfer id unique in the process: the download's sequence number above, a counter below.
    mutating func newTransfer() -> TransferID {
        counter += 1
        return TransferID(Int(truncatingIfNeeded: download.sequence) << 32 | (counter & 0xFFFF_FFFF))
    }

    mutating func newTimer() -> TimerID {
        counter += 1
        return TimerID(counter)
    }

    /// Exponential backoff with ±25% jitter, never sooner than the server's Retry-After (at most 10 minutes).
    mutating func backoff(attempt: Int, error: DownloadError) -> Double {
        let base = min(settings.retryMaxDelay, settings.retryBaseDelay * pow2(max(0, attempt - 1)))
        let jittered = base * (0.75 + 0.5 * random.nextUnit())
        return max(jittered, min(error.retryAfter ?? 0, 600))
    }

    private func pow2(_ exponent: Int) -> Double {
        exponent >= 62 ? .infinity : Double(Int64(1) << Int64(exponent))
    }
}

/// Why a download waits to try again and until when, per timer. Never changed in place (a new one replaces it), so
/// a copied machine shares it safely; one reference in the machine instead of the error and a table.
final class RetryWait: Sendable {
    let error: DownloadError
    let deadlines: [TimerID: Double]

    init(error: DownloadError, deadlines: [TimerID: Double]) {
        self.error = error
        self.deadlines = deadlines
    }
}
