import Foundation
import HaulLoop

/// Settings of the download engine.
public struct EngineConfig: Sendable {
    /// Absolute path under which every download lands.
    public var downloadRoot: String
    public var maxActive = 5
    public var defaultConnections = 8
    /// Attempts per download before it fails (the first one included).
    public var maxAttempts = 5
    /// First retry delay in seconds; doubles with each attempt up to `retryMaxDelay`.
    public var retryBaseDelay: Double = 1
    public var retryMaxDelay: Double = 60
    /// How often progress is written to the store and speeds are sampled.
    public var progressInterval: Double = 1
    public var connectTimeout: Double = 30
    /// A transfer that receives nothing for this many seconds is cut and retried.
    public var stallTimeout = 60
    /// A connection slower than this (bytes/s) for `stallTimeout` seconds is closed and its range handed back;
    /// 0 turns the check off.
    public var lowestSpeed: Int64 = 0
    /// No segment is split below this size.
    public var minSplitSize: Int64 = 4 << 20
    /// Connections to one host over all downloads.
    public var maxConnectionsPerHost = 16
    /// Bytes per second over all downloads, nil for unlimited.
    public var maxSpeed: Int64?
    /// When set, origins may only be at addresses it allows (`--deny-private-networks`).
    public var addressPolicy: AddressPolicy?
    /// The free space kept and the largest file accepted.
    public var space = SpacePolicy()

    public init(downloadRoot: String) { self.downloadRoot = downloadRoot }
}

/// What a client asks for when adding a download (already validated by the API layer).
public struct NewDownload: Sendable {
    public var url: String
    public var headers: [HeaderField] = []
    public var filename: String?
    public var directory = ""
    public var connections: Int?
    public var priority = 0
    public var maxSpeed: Int64?
    public var startPaused = false
    public var checksum: String?
    public var insecure = false
    /// The size the client expects the file to have, if it knows.
    public var expectedBytes: Int64?

    public init(url: String) { self.url = url }
}

/// Changes a client may make to a download.
public struct DownloadChanges: Sendable {
    public var state: DownloadState?
    public var priority: Int?
    public var connections: Int?
    /// `.some(nil)` removes the limit.
    public var maxSpeed: Int64??

    public init(state: DownloadState? = nil, priority: Int? = nil, maxSpeed: Int64?? = nil, connections: Int? = nil) {
        self.state = state
        self.priority = priority
        self.maxSpeed = maxSpeed
        self.connections = connections
    }
}

/// What the engine tells its observer (the event hub) after each change.
public enum EngineChange: Sendable, Equatable {
    case created(String)
    /// Any field changed; `stateChanged` when the state did.
    case updated(String, stateChanged: Bool)
    case removed(String)
}

public enum EngineError: Error, Equatable {
    case notFound(String)
    /// The change is impossible in the download's current state.
    case conflict(String)
    case storage(String)
    /// The file cannot be stored here (its known size does not fit, or is over the largest file accepted).
    case insufficientStorage(DownloadError)
}

/// The download engine: owns every download, the queue and the running jobs. Confined to the loop thread.
public final class Engine {
    let loop: EventLoop
    let multi: CurlMulti
    let store: DownloadStore
    public let config: EngineConfig
    let log: Logger
    private(set) var downloads: [String: Download] = [:]
    private var jobs: [String: Job] = [:]
    private var nextSequence: Int64 = 1
    private var tick: LoopTimer?
    /// Open connections per host, over all downloads.
    private var hostConnections: [String: Int] = [:]
    private var refill: LoopTimer?
    /// Queued downloads, so scheduling never scans them all.
    private var queued: Set<String> = []
    /// Every download's (sequence, id) in creation order, so a page of a long list costs its own length, not a sort
    /// of every download.
    private var order: [(sequence: Int64, id: String)] = []
    /// Unfinished downloads by destination (URL, directory, requested name), for answering a repeated POST.
    private var destinations: [String: String] = [:]
    /// Downloads changed since the last store write.
    private var unsaved: Set<String> = []
    private var flush: LoopTimer?
    /// The speed limit over all downloads.
    var globalBucket: TokenBucket?
    /// Told of every change, on the loop thread, after it is stored.
    public var onChange: ((EngineChange) -> Void)?

    public init(loop: EventLoop, store: DownloadStore, config: EngineConfig, log: Logger) throws {
        self.loop = loop
        self.multi = try CurlMulti(loop: loop)
        self.store = store
        self.config = config
        self.log = log
        globalBucket = config.maxSpeed.map { TokenBucket(rate: Double($0)) }
    }

    /// Loads the stored downloads, puts the ones that were running back in the queue and starts the queue.
    public func start() throws {
        for var download in try store.loadAll() {
            if download.state.isActive {
                download.state = .queued
                try store.save(download)
            }
            downloads[download.id] = download
            index(download, was: nil)
            nextSequence = max(nextSequence, download.sequence + 1)
        }
        order.sort { $0.sequence < $1.sequence }
        for download in downloads.values where download.state == .failed { releaseUnwritten(download) }
        tick = LoopTimer(loop: loop, delay: config.progressInterval, repeating: true) { [unowned self] in
            self.checkpoint()
        }
        tick?.start()
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

    /// Stops every transfer and checkpoints it (fdatasync, then the journal); they resume on the next start.
    public func shutdown() {
        tick?.cancel()
        for job in jobs.values { job.stop() }
        jobs.removeAll()
        saveUnsaved()
        multi.close()
    }

    // MARK: queries

    public func snapshot(_ id: String) -> DownloadSnapshot? {
        guard let download = downloads[id] else { return nil }
        let job = jobs[id]
        return DownloadSnapshot(download: download, speed: job?.speed ?? 0,
                                activeConnections: job?.activeConnections ?? 0)
    }

    /// How many downloads are stored.
    public var count: Int { downloads.count }

    /// Body bytes written to part files since this process started (a counter for metrics; never decreases).
    public private(set) var bytesReceived: Int64 = 0

    /// Counters over all downloads, in one pass that copies none of them (`/stats` with 10,000 downloads must not
    /// build 10,000 snapshots).
    public func totals() -> EngineTotals {
        var totals = EngineTotals()
        for download in downloads.values {
            totals.downloads += 1
            totals.byState[download.state, default: 0] += 1
            totals.receivedBytes += download.receivedBytes
        }
        for job in jobs.values {
            totals.speed += job.speed
            totals.activeConnections += job.activeConnections
        }
        return totals
    }

    /// All downloads in creation order.
    public func list() -> [DownloadSnapshot] {
        order.compactMap { snapshot($0.id) }
    }

    /// Up to `limit` downloads created after sequence number `after` that pass `filter`, in creation order, and
    /// whether more follow. Costs the downloads it looks at, not all of them.
    public func page(after: Int64, limit: Int, where filter: (Download) -> Bool = { _ in true })
        -> (items: [DownloadSnapshot], more: Bool) {
        var items: [DownloadSnapshot] = []
        var position = firstIndex(after: after)
        while position < order.count {
            if let download = downloads[order[position].id], filter(download) {
                if items.count == limit { return (items, true) }
                items.append(snapshot(download.id)!)
            }
            position += 1
        }
        return (items, false)
    }

    /// The position in `order` of the first download with a sequence above `sequence` (binary search).
    private func firstIndex(after sequence: Int64) -> Int {
        var low = 0, high = order.count
        while low < high {
            let middle = (low + high) / 2
            if order[middle].sequence <= sequence { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Ids of the downloads holding a slot (probing, downloading, verifying).
    public var runningIDs: [String] { Array(jobs.keys) }

    /// Bytes received so far by `id` (the hot counter, without building a snapshot).
    public func receivedBytes(_ id: String) -> Int64? { downloads[id]?.receivedBytes }

    // MARK: commands

    /// Adds a download, or returns the unfinished one with the same URL and destination (`created` false).
    public func add(_ request: NewDownload) throws(EngineError) -> (snapshot: DownloadSnapshot, created: Bool) {
        if let existing = destinations[Engine.destination(request.url, request.directory, request.filename)] {
            return (snapshot(existing)!, false)
        }
        if let size = request.expectedBytes, let refusal = spaceRefusal(for: size) {
            throw .insufficientStorage(refusal)
        }
        let now = Date()
        var download = Download(
            id: Engine.newID(), sequence: nextSequence, url: request.url, headers: request.headers,
            requestedFilename: request.filename, directory: request.directory,
            state: request.startPaused ? .paused : .queued,
            connections: request.connections ?? config.defaultConnections, priority: request.priority,
            maxSpeed: request.maxSpeed, createdAt: now)
        download.checksum = request.checksum
        download.insecure = request.insecure
        download.expectedBytes = request.expectedBytes
        do {
            try store.save(download)
        } catch {
            throw .storage("\(error)")
        }
        nextSequence += 1
        downloads[download.id] = download
        index(download, was: nil)
        log.info("download added", ["download.id": download.id, "download.url": Redact.url(download.url)])
        onChange?(.created(download.id))
        schedule()
        return (snapshot(download.id)!, true)
    }

    /// Adds a download once per `key`: a repeated request with the same key and body gets the first answer's
    /// status and the download as it is now; the same key with another body is a conflict.
    public func add(_ request: NewDownload, idempotencyKey key: String, requestHash: String)
        throws(EngineError) -> (snapshot: DownloadSnapshot, created: Bool) {
        let first: (downloadID: String, requestHash: String, status: Int)?
        do {
            first = try store.idempotencyAnswer(key: key)
        } catch {
            throw .storage("\(error)")
        }
        if let first {
            guard first.requestHash == requestHash else {
                throw .conflict("Idempotency-Key '\(key)' was used before with a different request")
            }
            guard let snapshot = snapshot(first.downloadID) else {
                throw .conflict("the download created for Idempotency-Key '\(key)' has been removed")
            }
            return (snapshot, first.status == 201)
        }
        let answer = try add(request)
        do {
            try store.rememberIdempotencyAnswer(key: key, downloadID: answer.snapshot.download.id,
                                                requestHash: requestHash, status: answer.created ? 201 : 200)
        } catch {
            log.error("cannot record an Idempotency-Key", ["error": "\(error)"])
        }
        return answer
    }

    public func update(_ id: String, _ changes: DownloadChanges) throws(EngineError) -> DownloadSnapshot {
        guard let download = downloads[id] else { throw .notFound(id) }
        if let target = changes.state, target != download.state {
            let event: DownloadEvent
            switch target {
            case .paused: event = .pause
            case .queued: event = .resume
            default: throw .conflict("a download cannot be put in state '\(target.rawValue)' by a client")
            }
            guard download.state.next(after: event) != nil else {
                throw .conflict("a \(download.state.rawValue) download cannot become \(target.rawValue)")
            }
        }
        if changes.priority != nil || changes.maxSpeed != nil || changes.connections != nil {
            modify(id) {
                if let priority = changes.priority { $0.priority = priority }
                if let maxSpeed = changes.maxSpeed { $0.maxSpeed = maxSpeed }
                if let connections = changes.connections { $0.connections = connections }
            }
            // A running download takes new limits at once.
            if changes.maxSpeed != nil || changes.connections != nil { jobs[id]?.limitsChanged() }
        }
        if let target = changes.state, target != download.state {
            if target == .paused { pause(id) } else { resume(id) }
        }
        // What a client was told is stored before it hears it.
        saveUnsaved()
        schedule()
        return snapshot(id)!
    }

    /// Cancels and forgets a download, deleting its part file (and its finished file with `deleteFile`).
    public func remove(_ id: String, deleteFile: Bool) throws(EngineError) {
        guard let download = downloads[id] else { throw .notFound(id) }
        if let job = jobs.removeValue(forKey: id) { job.stop() }
        if let name = download.filename {
            let directory = try? self.directory(download.directory, create: false)
            if download.state != .completed {
                try? directory?.remove(name + ".part")
            } else if deleteFile {
                try? directory?.remove(name)
            }
        }
        do {
            try store.delete(id: id)
        } catch {
            throw .storage("\(error)")
        }
        downloads.removeValue(forKey: id)
        index(nil, was: download)
        log.info("download removed", ["download.id": id])
        onChange?(.removed(id))
        schedule()
    }

    /// Why a file of `size` bytes cannot be stored under the root now, or nil when it can.
    public func spaceRefusal(for size: Int64) -> DownloadError? {
        let free: Int64
        do {
            free = try directory("", create: false).freeBytes()
        } catch {
            return nil
        }
        return config.space.refusal(total: size, needed: size, free: free)
    }

    // MARK: internals used by Job

    /// The directory `relative` to the download root, opened without following links.
    func directory(_ relative: String, create: Bool) throws(FileError) -> ConfinedDirectory {
        try ConfinedDirectory(root: config.downloadRoot, relative: relative, create: create)
    }

    /// Applies `change` to the stored download, persists it and returns the result.
    @discardableResult
    func modify(_ id: String, _ change: (inout Download) -> Void) -> Download? {
        guard var download = downloads[id] else { return nil }
        let before = download.state
        let journalBefore = download.journal
        change(&download)
        // The journal follows every change of the segments and never claims more than they hold.
        download.journal = SegmentPlanner.journal(synced: download.journal, live: download.segments)
        download.updatedAt = Date()
        downloads[id] = download
        if before != download.state {
            var previous = download
            previous.state = before
            index(download, was: previous)
            logStateChange(download, from: before)
        }
        if download.journal != journalBefore, !journalOnlyGrew(from: journalBefore, to: download.journal) {
            // Cutting the file back is on disk before a byte of other data can land where the journal used to
            // vouch for.
            persist(download)
            unsaved.remove(id)
        } else {
            persistSoon(id)
        }
        onChange?(.updated(id, stateChanged: before != download.state))
        return download
    }

    /// One line per state change: what a log reader follows a download by.
    private func logStateChange(_ download: Download, from before: DownloadState) {
        var meta = ["download.id": download.id, "state.from": before.rawValue, "state.to": download.state.rawValue]
        if download.state == .completed, let name = download.filename {
            meta["file.name"] = name
            meta["file.size"] = String(download.receivedBytes)
        }
        if download.state == .failed, let error = download.error {
            meta["error.code"] = error.code.rawValue
            meta["error.message"] = error.message
            return log.warning("download failed", meta)
        }
        log.info("state changed", meta)
    }

    /// Progress without a store write: the hot path of every body chunk.
    func advance(_ id: String, segment: Int, by count: Int64) {
        downloads[id]?.segments[segment].received += count
        bytesReceived += count
    }

    /// Records that the segments as they were in `synced` are on disk (the caller has synced them).
    func journal(_ id: String, synced: [Segment]) {
        guard let download = downloads[id] else { return }
        let journal = SegmentPlanner.journal(synced: synced, live: download.segments)
        downloads[id]!.journal = journal
        do {
            try store.saveJournal(id: id, journal, updatedAt: Date())
        } catch {
            log.error("cannot save a checkpoint", ["download.id": id, "error": "\(error)"])
        }
    }

    /// Takes a connection to `host` if the per-host cap allows.
    func acquireConnection(to host: String) -> Bool {
        guard hostConnections[host, default: 0] < config.maxConnectionsPerHost else { return false }
        hostConnections[host, default: 0] += 1
        return true
    }

    /// Gives a connection back; downloads waiting for one get a chance soon (not from inside this call chain).
    func releaseConnection(to host: String) {
        hostConnections[host, default: 1] -= 1
        if hostConnections[host] == 0 { hostConnections.removeValue(forKey: host) }
        if refill == nil {
            refill = LoopTimer(loop: loop, delay: 0) { [unowned self] in
                for job in self.jobs.values { job.fillConnections() }
            }
        }
        if refill?.isPending == false { refill?.start() }
    }

    func download(_ id: String) -> Download? { downloads[id] }

    /// Whether a download still needs the part file `name.part` in `directory` (one not yet completed).
    func isClaimed(directory: String, name: String) -> Bool {
        downloads.values.contains { $0.directory == directory && $0.filename == name && $0.state != .completed }
    }

    /// Called by a job that reached `completed` or `failed`: frees its slot.
    func jobEnded(_ id: String) {
        jobs.removeValue(forKey: id)
        schedule()
    }

    /// Keeps `queued` and `destinations` in step with a download's state (`nil`: added or removed).
    private func index(_ now: Download?, was: Download?) {
        if was == nil, let now {
            // New downloads take ever larger numbers; at start-up `start` sorts once after loading them all.
            order.append((now.sequence, now.id))
        } else if now == nil, let was {
            let position = firstIndex(after: was.sequence - 1)
            if position < order.count, order[position].id == was.id { order.remove(at: position) }
        }
        if let was {
            if was.state == .queued { queued.remove(was.id) }
            let key = Engine.destination(was.url, was.directory, was.requestedFilename)
            if !was.state.isFinished, destinations[key] == was.id { destinations.removeValue(forKey: key) }
        }
        if let now {
            if now.state == .queued { queued.insert(now.id) }
            let key = Engine.destination(now.url, now.directory, now.requestedFilename)
            if !now.state.isFinished, destinations[key] == nil { destinations[key] = now.id }
        }
    }

    private static func destination(_ url: String, _ directory: String, _ name: String?) -> String {
        url + "\u{0}" + directory + "\u{0}" + (name ?? "")
    }

    /// Several changes in one loop iteration (a probe answer, a state change) make one write at its end.
    private func persistSoon(_ id: String) {
        unsaved.insert(id)
        if flush == nil {
            flush = LoopTimer(loop: loop, delay: 0) { [unowned self] in self.saveUnsaved() }
        }
        if flush?.isPending == false { flush?.start() }
    }

    private func saveUnsaved() {
        let ids = unsaved
        unsaved.removeAll()
        do {
            try store.transaction {
                for id in ids { if let download = downloads[id] { try store.save(download) } }
            }
        } catch {
            log.error("cannot save downloads", ["error": "\(error)"])
        }
    }

    private func journalOnlyGrew(from old: [Segment], to new: [Segment]) -> Bool {
        old.count <= new.count && zip(old, new).allSatisfy { $0.start == $1.start && $0.received <= $1.received }
            && new.dropFirst(old.count).allSatisfy { $0.received == 0 }
    }

    private func persist(_ download: Download) {
        do {
            try store.save(download)
        } catch {
            log.error("cannot save download", ["download.id": download.id, "error": "\(error)"])
        }
    }

    private func pause(_ id: String) {
        if let job = jobs.removeValue(forKey: id) { job.stop() }
        modify(id) { $0.state = .paused }
    }

    private func resume(_ id: String) {
        modify(id) {
            $0.state = .queued
            $0.error = nil
            $0.attempts = 0
        }
    }

    /// Starts queued downloads, highest priority first, then oldest, while slots are free.
    private func schedule() {
        guard jobs.count < config.maxActive, !queued.isEmpty else { return }
        let waiting = queued.compactMap { downloads[$0] }.sorted {
            $0.priority != $1.priority ? $0.priority > $1.priority : $0.sequence < $1.sequence
        }
        for download in waiting.prefix(config.maxActive - jobs.count) {
            let job = Job(engine: self, id: download.id)
            jobs[download.id] = job
            job.start()
        }
    }

    /// Periodic: sample speeds, cut stalls, and checkpoint running downloads.
    private func checkpoint() {
        let now = ProcessInfo.processInfo.systemUptime
        for (id, job) in jobs {
            guard let download = downloads[id] else { continue }
            job.tick(bytes: download.receivedBytes, at: now)
            job.checkpoint()
        }
    }

    /// 16 characters of Crockford-style base 32: 80 random bits from two calls to the system generator.
    static func newID() -> String {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz".utf8)
        var bits = (generator.next() as UInt64, generator.next() as UInt64)
        var id = [UInt8]()
        id.reserveCapacity(16)
        for index in 0..<16 {
            if index == 8 { bits.0 = bits.1 }
            id.append(alphabet[Int(bits.0 & 31)])
            bits.0 >>= 5
        }
        return String(decoding: id, as: UTF8.self)
    }
}

/// Keeping secrets out of logs and API answers.
public enum Redact {
    /// The URL with any user name and password replaced.
    public static func url(_ url: String) -> String {
        // Credentials need an "@"; most URLs have none and skip the parse.
        guard url.utf8.contains(UInt8(ascii: "@")), var components = URLComponents(string: url), components.user != nil || components.password != nil
        else { return url }
        components.user = "redacted"
        components.password = nil
        return components.string ?? url
    }
}

/// What `Engine.totals()` counts.
public struct EngineTotals: Sendable {
    public var downloads = 0
    public var byState: [DownloadState: Int] = [:]
    public var receivedBytes: Int64 = 0
    public var speed = 0.0
    public var activeConnections = 0

    public func count(_ state: DownloadState) -> Int { byState[state] ?? 0 }
    public var active: Int { byState.filter { $0.key.isActive }.values.reduce(0, +) }
}
