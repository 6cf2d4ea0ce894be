import FoundationEssentials
import HaulLoop

/// The download engine: every download as a `DownloadMachine`, the queue, the slots, the per-host connection cap,
/// the global speed limit and the store. Running downloads have a `DownloadRunner` that carries out their machine's
/// actions against two seams, a `Fetcher` (libcurl) and a `Clock` (the loop's timers). Confined to the loop thread.
public final class Engine {
    let loop: EventLoop
    let fetcher: Fetcher
    /// The engine's time: the loop's, or a test's manual clock. The event hub keeps time by it too.
    public let clock: Clock
    let store: DownloadStore
    /// The flags' settings; `maxActive`, `defaultConnections`, `maxConnectionsPerHost` and `maxSpeed` follow
    /// `settings` while it runs.
    public private(set) var config: EngineConfig
    /// What the flags set of what a client may change (`PATCH /settings`).
    public let defaultSettings: ServerSettings
    /// A client's changes, kept in the store, over `defaultSettings`.
    private var settingsChange = SettingsChange()
    private var scheduleTimer: ClockTimer?
    let log: Logger
    /// The curl multi handle when the engine made its own fetcher; closed at shutdown.
    private let multi: CurlMulti?
    let settings: MachineSettings
    /// Every download's machine, boxed: reading one (a snapshot, a field) borrows it instead of copying the whole
    /// machine, and a step changes it in place.
    var machines: [String: MachineBox] = [:]
    var runners: [String: DownloadRunner] = [:]
    private var nextSequence: Int64 = 1
    private var tick: LoopTimer?
    /// Open connections per host, over all downloads.
    private var hostConnections: [String: Int] = [:]
    private var refill: ClockTimer?
    /// Queued downloads, so scheduling never scans them all.
    private var runQueue = RunQueue()
    /// Downloads per state and bytes received over all of them, kept as they change: `/stats` reads these instead
    /// of visiting every download (137 ms with 100,000 stored).
    private var stateCounts: [DownloadState: Int] = [:]
    var receivedTotal: Int64 = 0
    /// Every download's (sequence, id) in creation order, so a page of a long list costs its own length, not a sort
    /// of every download.
    private var order: [(sequence: Int64, id: String)] = []
    /// Entries of `order` whose download is gone: left in place (readers pass over ids no machine has) and swept
    /// out once they are half of it, so removing thousands costs no memmove of the whole list each.
    private var departed = 0
    /// Unfinished downloads by destination (URL, directory, requested name), for answering a repeated POST.
    private var destinations: [String: String] = [:]
    /// Downloads changed since the last store write.
    var unsaved: Set<String> = []
    private var flush: LoopTimer?
    /// The speed limit over all downloads.
    var globalBucket: TokenBucket?
    /// Fetcher calls that runners made from inside a transfer's callback, run on the loop's next turn in order.
    private var deferred: [() -> Void] = []
    private var deferTimer: ClockTimer?
    /// Told of every change, on the loop thread, after it is stored.
    public var onChange: ((EngineChange) -> Void)?
    /// With a store several nodes share: what this node holds, its timers and its notification connection.
    var cluster: ClusterState?
    /// Webhooks, the deliveries waiting to be stored, the attempts in flight.
    let outbox = WebhookOutbox()
    /// Categories and their speed limits.
    let book = CategoryBook()
    /// The download as the API shows it, for webhook bodies (set by the API; a bare id without it).
    public var webhookResource: ((DownloadSnapshot) -> JSONValue)?
    /// When the store was last asked whether it answers, and why not (nil: it did).
    private var readiness: (at: Double, problem: String?)?
    /// Brings back the changes a failed store write kept for later.
    private var saveRetry: ClockTimer?

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
                                         maxConnectionsPerHost: config.maxConnectionsPerHost)
        globalBucket = config.maxSpeed.map { TokenBucket(rate: Double($0)) }
    }

    /// Loads the stored downloads, puts the ones that were running back in the queue and starts the queue.
    public func start() throws {
        try loadSettings(throwing: true)
        try loadCategories()
        let count = try store.count()
        machines.reserveCapacity(count)
        order.reserveCapacity(count)
        var interrupted: [Download] = []
        // Sharing the store, a running download is another node's (or, its lease run out, whoever claims it).
        let shared = store.isShared
        try store.forEach { download in
            let box = MachineBox(DownloadMachine(download: download, settings: settings))
            machines[download.id] = box
            if download.state.isActive && !shared {
                _ = box.machine.handle(.interrupted, at: clock.now)
                interrupted.append(box.machine.download)
                index(box.machine.download, was: nil)
                receivedTotal += box.machine.download.receivedBytes
            } else {
                // As loaded: indexed without copying the machine's download out of its box.
                index(download, was: nil)
                receivedTotal += download.receivedBytes
            }
            nextSequence = max(nextSequence, download.sequence + 1)
        }
        // Written once the rows are read: no update while the table is being stepped through.
        for download in interrupted { try store.save(download) }
        order.sort { $0.sequence < $1.sequence }
        for box in machines.values where box.machine.download.state == .failed {
            releaseUnwritten(box.machine.download)
        }
        tick = LoopTimer(loop: loop, delay: config.progressInterval, repeating: true) { [unowned self] in
            let now = self.clock.now
            for runner in Array(self.runners.values) { runner.deliver(.tick(now: now)) }
        }
        tick?.start()
        if shared { try joinCluster() }
        try startWebhooks()
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

    // MARK: settings

    /// Puts the stored settings in force (at start, and when another node changed them).
    func loadSettings() {
        do {
            try loadSettings(throwing: true)
        } catch {
            log.warning("cannot read the stored settings", ["error": "\(error)"])
        }
    }

    private func loadSettings(throwing: Bool) throws {
        guard let stored = try store.settings(), let value = try? JSONValue.parse(Array(stored.utf8)),
              case .object(let members) = value else { return }
        let (change, errors) = SettingsChange.parse(members)
        if !errors.isEmpty { log.warning("stored settings partly unreadable", ["error": "\(errors)"]) }
        settingsChange = change.kept
        applySettings()
    }

    /// The settings in force: the defaults with a client's changes.
    public var currentSettings: ServerSettings { settingsChange.applied(to: defaultSettings) }

    /// The speed limit over all downloads now, the schedule's window's or the base one (nil: none).
    public var currentSpeedLimit: Int64? { globalBucket.map { Int64($0.rate) } }

    /// Changes the settings (a field set to nil goes back to its default), stores them and puts them in force.
    public func changeSettings(_ change: SettingsChange) throws(EngineError) -> ServerSettings {
        let next = settingsChange.merged(with: change).kept
        do {
            try store.saveSettings(next.json.serialized())
        } catch {
            throw .storage("\(error)")
        }
        settingsChange = next
        applySettings()
        log.info("settings changed", ["settings": currentSettings.json.serialized()])
        return currentSettings
    }

    private func applySettings() {
        let settings = currentSettings
        config.maxActive = settings.maxActive
        config.defaultConnections = settings.defaultConnections
        config.maxConnectionsPerHost = settings.maxConnectionsPerHost
        config.maxSpeed = settings.maxSpeed
        updateSpeedLimit()
        // The schedule is looked at every half minute while it has windows.
        if settings.speedSchedule.isEmpty {
            scheduleTimer?.cancel()
            scheduleTimer = nil
        } else if scheduleTimer == nil {
            scheduleTimer = clock.every(30) { [unowned self] in self.updateSpeedLimit() }
        }
        schedule()
    }

    /// Puts the limit of this moment in force: the window of the schedule that holds it, else the base one.
    func updateSpeedLimit() {
        // Several nodes: each takes an even share of the cluster's limit.
        let limit = currentSettings.speedLimit(at: WeekTime(Date())).map { max(1, $0 / Int64(nodeShare)) }
        updateCategoryLimits()
        guard limit != currentSpeedLimit else { return }
        if let limit, globalBucket != nil {
            globalBucket?.rate = Double(limit)
        } else {
            globalBucket = limit.map { TokenBucket(rate: Double($0)) }
        }
        log.info("speed limit now", ["speed.limit": limit.map(String.init) ?? "none"])
    }

    /// Stops every transfer and checkpoints it (fdatasync, then the journal); they resume on the next start.
    public func shutdown() {
        // No new claims while the running downloads stop.
        cluster?.stopping = true
        scheduleTimer?.cancel()
        tick?.cancel()
        for runner in Array(runners.values) { runner.deliver(.stop(keepFile: true)) }
        runners.removeAll()
        // Closing the multi ends every transfer; what was deferred has nothing left to do.
        deferTimer?.cancel()
        deferTimer = nil
        deferred.removeAll()
        refill?.cancel()
        refill = nil
        saveUnsaved()
        saveRetry?.cancel()
        saveRetry = nil
        stopWebhooks()
        leaveCluster()
        multi?.close()
    }

    // MARK: queries

    /// Throws unless the store answers now (a round trip).
    func requireStore() throws(EngineError) {
        do {
            try store.ping()
        } catch {
            readiness = (clock.now, "\(error)")
            throw .storage("\(error)")
        }
    }

    /// Why the store cannot be used now, or nil when it answers: what `/readyz` tells a load balancer. Asked at most
    /// once a second, however often it is polled.
    public func storeProblem() -> String? {
        let now = clock.now
        if let last = readiness, now - last.at < 1 { return last.problem }
        var problem: String?
        do {
            try store.ping()
        } catch {
            problem = "\(error)"
        }
        readiness = (now, problem)
        return problem
    }

    public func snapshot(_ id: String) -> DownloadSnapshot? {
        guard let box = machines[id] else { return nil }
        var download = box.machine.download
        if let written = box.lastWriteAt {
            let wall = Date().addingTimeInterval(written - clock.now)
            if wall > download.updatedAt { download.updatedAt = wall }
        }
        var snapshot = DownloadSnapshot(download: download, speed: box.machine.speed,
                                        activeConnections: box.machine.activeConnections)
        snapshot.lastError = box.machine.lastRetryError
        if !download.mirrors.isEmpty { snapshot.mirrorSpeeds = box.machine.mirrorSpeeds }
        snapshot.nextAttemptAt = box.machine.nextAttemptAt.map { Date().addingTimeInterval($0 - clock.now) }
        return snapshot
    }

    /// How many downloads are stored.
    public var count: Int { machines.count }

    /// Body bytes written to part files since this process started (a counter for metrics; never decreases).
    public private(set) var bytesReceived: Int64 = 0

    /// Counters over all downloads, in one pass that copies none of them (`/stats` with 10,000 downloads must not
    /// build 10,000 snapshots).
    public func totals() -> EngineTotals {
        var totals = EngineTotals()
        totals.downloads = machines.count
        totals.byState = stateCounts.filter { $0.value != 0 }
        totals.receivedBytes = receivedTotal
        assert(totals.byState == Dictionary(grouping: machines.values) { $0.machine.download.state }.mapValues(\.count)
               && receivedTotal == machines.values.reduce(0) { $0 + $1.machine.download.receivedBytes },
               "the running totals drifted from the downloads")
        for id in runners.keys {
            guard let box = machines[id] else { continue }
            totals.speed += box.machine.speed
            totals.activeConnections += box.machine.activeConnections
        }
        return totals
    }

    public func list() -> [DownloadSnapshot] {
        order.compactMap { snapshot($0.id) }
    }

    /// Up to `limit` downloads that pass `filter` from position `offset` of `order` (ties in creation order),
    /// and whether more follow. Sorts all that pass: a page of a sort other than creation order costs every match.
    public func page(by order: DownloadOrder, descending: Bool, offset: Int, limit: Int,
                     where filter: (Download) -> Bool) -> (items: [DownloadSnapshot], more: Bool) {
        var rows: [(id: String, sequence: Int64, number: Double, text: String)] = []
        for (id, box) in machines where filter(box.machine.download) {
            let d = box.machine.download
            switch order {
            case .created: rows.append((id, d.sequence, 0, ""))
            case .name: rows.append((id, d.sequence, 0, d.displayName.lowercased()))
            case .size: rows.append((id, d.sequence, d.totalBytes.map(Double.init) ?? -1, ""))
            case .progress:
                let fraction = d.totalBytes.map { $0 == 0 ? (d.state == .completed ? 1 : 0)
                    : Double(d.receivedBytes) / Double($0) } ?? -1
                rows.append((id, d.sequence, fraction, ""))
            case .speed: rows.append((id, d.sequence, box.machine.speed, ""))
            }
        }
        rows.sort { a, b in
            if a.text != b.text { return descending ? a.text > b.text : a.text < b.text }
            if a.number != b.number { return descending ? a.number > b.number : a.number < b.number }
            return descending ? a.sequence > b.sequence : a.sequence < b.sequence
        }
        let start = min(offset, rows.count)
        let slice = rows[start...].prefix(limit)
        return (slice.compactMap { snapshot($0.id) }, rows.count > start + limit)
    }

    /// As `page`, over the downloads of `ids` only (a `changed_since` answer): costs those, not every download.
    public func page(of ids: Set<String>, after: Int64, limit: Int, where filter: (Download) -> Bool = { _ in true })
        -> (items: [DownloadSnapshot], more: Bool) {
        var chosen: [(sequence: Int64, id: String)] = []
        for id in ids {
            guard let box = machines[id], box.machine.download.sequence > after, filter(box.machine.download)
            else { continue }
            chosen.append((box.machine.download.sequence, id))
        }
        chosen.sort { $0.sequence < $1.sequence }
        return (chosen.prefix(limit).compactMap { snapshot($0.id) }, chosen.count > limit)
    }

    /// Up to `limit` downloads created after sequence number `after` that pass `filter`, in creation order, and
    /// whether more follow. Costs the downloads it looks at, not all of them.
    public func page(after: Int64, limit: Int, where filter: (Download) -> Bool = { _ in true })
        -> (items: [DownloadSnapshot], more: Bool) {
        var items: [DownloadSnapshot] = []
        var position = firstIndex(after: after)
        while position < order.count {
            if let box = machines[order[position].id], filter(box.machine.download) {
                if items.count == limit { return (items, true) }
                items.append(snapshot(order[position].id)!)
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
    public var runningIDs: [String] { Array(runners.keys) }

    /// Bytes received so far by `id` (the hot counter, without building a snapshot).
    public func receivedBytes(_ id: String) -> Int64? { machines[id]?.machine.download.receivedBytes }

    // MARK: commands

    /// Adds a download, or returns the unfinished one with the same URL and destination (`created` false).
    public func add(_ request: NewDownload) throws(EngineError) -> (snapshot: DownloadSnapshot, created: Bool) {
        switch try add(batch: [request], atomic: true)[0] {
        case .added(let snapshot): return (snapshot, true)
        case .existing(let snapshot): return (snapshot, false)
        case .refused(let error): throw error
        }
    }

    /// What became of one download of a batch.
    public enum AddOutcome {
        case added(DownloadSnapshot)
        /// The unfinished download with the same URL and destination (also an earlier one of the same batch).
        case existing(DownloadSnapshot)
        case refused(EngineError)
    }

    /// Adds several downloads, stored with one commit, each answered on its own: added, the existing one, or why
    /// not. With `atomic`, a refusal of any adds none (the answers then tell which were refused), and a store that
    /// fails adds none either way (thrown). At most `capacity` new downloads are added; the rest are refused.
    public func add(batch requests: [NewDownload], atomic: Bool, capacity: Int = .max)
        throws(EngineError) -> [AddOutcome] {
        enum Plan {
            case new(Int)
            case same(String)
            case sameAsNew(Int)
            case refused(EngineError)
        }
        var plans: [Plan] = []
        var fresh: [Download] = []
        var claimed: [String: Int] = [:]
        var reservedBytes: Int64 = 0
        let now = Date()
        for request in requests {
            var category: Category?
            if let name = request.category {
                guard let found = self.category(name) else {
                    // As qBittorrent's API: a category is made before it is used (409), never by a typo.
                    plans.append(.refused(.conflict("no category '\(name)'; make it first with PUT "
                                                    + "/categories/\(name)")))
                    continue
                }
                category = found
            }
            // A category's folder holds its downloads (a download's own directory is then under it).
            let directory = [category?.directory ?? "", request.directory].filter { !$0.isEmpty }
                .joined(separator: "/")
            let depth = directory.split(separator: "/").count
            if depth > FileName.maxDepth || directory.utf8.count > FileName.maxDirectoryBytes {
                plans.append(.refused(.invalid(field: "directory", message: "with the category's folder it would be "
                    + "\(depth) folders and \(directory.utf8.count) bytes; at most \(FileName.maxDepth) and "
                    + "\(FileName.maxDirectoryBytes)")))
                continue
            }
            let destination = Engine.destination(request.url, directory, request.filename)
            if let existing = destinations[destination] {
                plans.append(.same(existing))
                continue
            }
            if let index = claimed[destination] {
                plans.append(.sameAsNew(index))
                continue
            }
            if fresh.count >= capacity {
                plans.append(.refused(.tooMany))
                continue
            }
            // Sizes of one batch add up: each must fit beside the ones before it.
            if let size = request.expectedBytes, let refusal = spaceRefusal(for: reservedBytes + size) {
                plans.append(.refused(.insufficientStorage(refusal)))
                continue
            }
            reservedBytes += request.expectedBytes ?? 0
            // The category's connections and priority are the defaults.
            var download = Download(
                id: Engine.newID(), sequence: nextSequence + Int64(fresh.count), url: request.url,
                headers: request.headers, requestedFilename: request.filename, directory: directory,
                state: request.startPaused ? .paused : .queued,
                connections: request.connections ?? category?.connections ?? config.defaultConnections,
                priority: request.priority ?? category?.priority ?? 0, maxSpeed: request.maxSpeed, createdAt: now)
            download.category = request.category
            download.mirrors = request.mirrors.map(Mirror.init)
            download.checksum = request.checksum
            download.insecure = request.insecure
            download.expectedBytes = request.expectedBytes
            claimed[destination] = fresh.count
            plans.append(.new(fresh.count))
            fresh.append(download)
        }
        let refused = plans.contains { if case .refused = $0 { true } else { false } }
        if atomic && refused {
            return plans.map { plan in
                if case .refused(let error) = plan { return .refused(error) }
                return .refused(.notAdded)
            }
        }
        if !fresh.isEmpty {
            do {
                // Several nodes number their downloads from one sequence in the store.
                if let numbers = try store.allocateSequences(fresh.count), numbers.count == fresh.count {
                    for index in fresh.indices { fresh[index].sequence = numbers[index] }
                }
                try store.transaction {
                    for download in fresh {
                        try store.save(download)
                        try store.insertChanges(webhookChanges(download, before: nil))
                    }
                }
                askFanOut()
            } catch {
                throw .storage("\(error)")
            }
        }
        nextSequence += Int64(fresh.count)
        for download in fresh {
            machines[download.id] = MachineBox(DownloadMachine(download: download, settings: settings))
            index(download, was: nil)
            log.info("download added", ["download.id": download.id, "download.url": Redact.url(download.url)])
            onChange?(.created(download.id))
        }
        if !fresh.isEmpty { schedule() }
        return plans.map { plan in
            switch plan {
            case .new(let index): return .added(snapshot(fresh[index].id)!)
            case .same(let id): return .existing(snapshot(id)!)
            case .sameAsNew(let index): return .existing(snapshot(fresh[index].id)!)
            case .refused(let error): return .refused(error)
            }
        }
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

    /// What the first batch with this `key` was answered (stored by `rememberBatchAnswer`), or nil for a new key;
    /// the same key with another body, or one a single download used, is a conflict.
    public func batchAnswer(key: String, requestHash: String) throws(EngineError) -> String? {
        let first: (requestHash: String, answer: String?)?
        do {
            first = try store.batchAnswer(key: key)
        } catch {
            throw .storage("\(error)")
        }
        guard let first else { return nil }
        guard first.requestHash == requestHash, let answer = first.answer else {
            throw .conflict("Idempotency-Key '\(key)' was used before with a different request")
        }
        return answer
    }

    public func rememberBatchAnswer(key: String, requestHash: String, answer: String) throws(EngineError) {
        do {
            try store.rememberBatchAnswer(key: key, requestHash: requestHash, answer: answer)
        } catch {
            throw .storage("\(error)")
        }
    }

    public func update(_ id: String, _ changes: DownloadChanges) throws(EngineError) -> DownloadSnapshot {
        // Another node's download is changed as it is in the store now, not as the last notification left it.
        refresh(id)
        guard machines[id] != nil else { throw .notFound(id) }
        // A change is made in memory first and stored after: with the store away it would be answered as done
        // and kept only until a restart. Refused instead, before anything moves.
        try requireStore()
        try apply(changes, to: id)
        // What a client was told is stored before it hears it.
        saveUnsaved()
        schedule()
        return snapshot(id)!
    }

    /// The same change of many downloads, each answered on its own, stored with one commit.
    public func update(batch ids: [String], _ changes: DownloadChanges)
        -> [(id: String, result: Result<DownloadSnapshot, EngineError>)] {
        do {
            try requireStore()
        } catch {
            return ids.map { ($0, .failure(error)) }
        }
        var failures: [String: EngineError] = [:]
        for id in ids {
            refresh(id)
            do throws(EngineError) {
                try apply(changes, to: id)
            } catch {
                failures[id] = error
            }
        }
        saveUnsaved()
        schedule()
        return ids.map { id in
            if let failure = failures[id] { return (id, .failure(failure)) }
            guard let snapshot = snapshot(id) else { return (id, .failure(.notFound(id))) }
            return (id, .success(snapshot))
        }
    }

    /// Gives the machine of `id` a client's change (a state asked for, priority, speed, connections); the caller
    /// stores it.
    private func apply(_ changes: DownloadChanges, to id: String) throws(EngineError) {
        guard let download = machines[id]?.machine.download else { throw .notFound(id) }
        var stateEvent: MachineEvent?
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
            stateEvent = event == .pause ? .pause : .resume
        }
        if changes.priority != nil || changes.maxSpeed != nil || changes.connections != nil {
            deliver(id, .change(changes))
            // A running download takes a new speed limit at once.
            if changes.maxSpeed != nil {
                runners[id]?.limitsChanged(maxSpeed: machines[id]?.machine.download.maxSpeed)
            }
        }
        if let stateEvent { deliver(id, stateEvent) }
    }

    /// Cancels and forgets a download, deleting its part file (and its finished file with `deleteFile`).
    public func remove(_ id: String, deleteFile: Bool) throws(EngineError) {
        guard try remove(batch: [id], deleteFile: deleteFile) == [id] else { throw .notFound(id) }
    }

    /// Cancels and forgets the downloads of `ids` there are (the others were removed already), with one commit;
    /// returns those removed. Nothing is removed, and no file deleted, if the store refuses.
    public func remove(batch ids: [String], deleteFile: Bool) throws(EngineError) -> [String] {
        var found: [String] = []
        for id in ids {
            refresh(id)
            guard machines[id] != nil else { continue }
            if let runner = runners.removeValue(forKey: id) { runner.deliver(.stop(keepFile: false)) }
            found.append(id)
        }
        guard !found.isEmpty else { return [] }
        // As the stop left each: what the indexes and totals hold.
        let last = found.map { machines[$0]!.machine.download }
        do {
            try store.transaction {
                for download in last {
                    try store.delete(id: download.id)
                    // What waited for the group commit is told too: a receiver hears every change, then the removal.
                    try store.insertChanges((outbox.waiting[download.id] ?? [])
                        + webhookChanges(download, before: download.state, removed: true))
                }
            }
        } catch {
            throw .storage("\(error)")
        }
        for download in last {
            let id = download.id
            outbox.waiting.removeValue(forKey: id)
            if let name = download.filename {
                let directory = try? self.directory(download.directory, create: false)
                if download.state != .completed {
                    try? directory?.remove(name + ".part")
                } else if deleteFile {
                    try? directory?.remove(name)
                }
            }
            machines.removeValue(forKey: id)
            unsaved.remove(id)
            index(nil, was: download)
            receivedTotal -= download.receivedBytes
            log.info("download removed", ["download.id": id])
            onChange?(.removed(id))
        }
        askFanOut()
        schedule()
        return found
    }

    /// The ids of the downloads that pass `filter`, in creation order, without building a snapshot of any.
    public func ids(where filter: (Download) -> Bool) -> [String] {
        order.compactMap { entry in machines[entry.id].flatMap { filter($0.machine.download) ? entry.id : nil } }
    }

    /// Runs `work` on the loop's next turn (after what is waiting now): how the API works through a bulk change
    /// a slice at a time.
    public func onNextTurn(_ work: @escaping () -> Void) {
        later(work)
    }

    /// The finished file of `id`, opened for reading (never through a link, and only while it is still the file
    /// Haul wrote), with its download.
    public func finishedFile(_ id: String) throws(EngineError) -> (file: OpenFile, download: Download) {
        guard let download = machines[id]?.machine.download else { throw .notFound(id) }
        guard download.state == .completed, let name = download.filename else {
            throw .conflict("the download is \(download.state.rawValue), not completed: it has no file yet")
        }
        let file: OpenFile
        do {
            file = try directory(download.directory, create: false).openForReading(name)
        } catch {
            if error.isMissing { throw .gone("the file \(download.relativePath ?? name) is not there any more") }
            throw .conflict("the file cannot be served: \(error)")
        }
        // The name holds another file now (replaced, or truncated or grown in place): not this download's.
        if let stamp = download.fileStamp, !stamp.matches(file, sameNode: download.node == nil || download.node == node) {
            throw .conflict("the file \(download.relativePath ?? name) is no longer the one this download wrote (it "
                + "was replaced or changed since it completed)")
        }
        return (file, download)
    }

    /// The disk under the download root as downloads see it: nil when the root cannot be read.
    public func diskSpace() -> DiskSpace? {
        guard let root = try? directory("", create: false), let free = try? root.freeBytes(),
              let total = try? root.totalBytes() else { return nil }
        return DiskSpace(free: free, total: total, reserved: config.space.minFreeSpace)
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

    // MARK: the machines

    /// Gives `event` to the machine of `id`: through its runner when it runs (which carries out the actions), else
    /// directly (a download that is not running asks for no action but its state).
    func deliver(_ id: String, _ event: MachineEvent) {
        if let runner = runners[id] {
            runner.deliver(event)
        } else {
            _ = step(id, event)
        }
    }

    /// One step of the machine of `id`: the event in, the actions out; and what changed is stored, indexed, logged
    /// and told. Body bytes (`received`, `wrote`) are the hot path: they change progress only.
    func step(_ id: String, _ event: MachineEvent) -> [MachineAction] {
        guard let box = machines[id] else { return [] }
        switch event {
        case .received:
            // The bytes of a chunk, not yet written: the write that follows moves the totals.
            return box.machine.handle(event, at: clock.now)
        case .wrote, .synced:
            // Progress and the journal (which `saveJournal` stores) only.
            let receivedBefore = box.machine.download.receivedBytes
            let now = clock.now
            if case .wrote = event { box.lastWriteAt = now }
            let actions = box.machine.handle(event, at: now)
            receivedTotal += box.machine.download.receivedBytes - receivedBefore
            return actions
        default:
            let before = box.machine.download
            let actions = box.machine.handle(event, at: clock.now)
            receivedTotal += box.machine.download.receivedBytes - before.receivedBytes
            changed(id, from: before)
            return actions
        }
    }

    /// Follows up a change of the machine of `id` from `before`: the indexes, the log, the store and the hub.
    private func changed(_ id: String, from before: Download) {
        guard var download = machines[id]?.machine.download, download != before else { return }
        let stateChanged = download.state != before.state
        let now = Date()
        download.updatedAt = now
        if stateChanged {
            if download.state == .probing, download.startedAt == nil { download.startedAt = now }
            if download.state == .completed { download.completedAt = download.completedAt ?? now }
        }
        machines[id]!.machine.stamp(updatedAt: download.updatedAt, startedAt: download.startedAt,
                            completedAt: download.completedAt)
        if stateChanged || download.priority != before.priority { index(download, was: before) }
        if stateChanged {
            logStateChange(download, from: before.state)
            let changes = webhookChanges(download, before: before.state)
            if !changes.isEmpty { outbox.waiting[id, default: []] += changes }
        }
        if download.journal != before.journal, !journalOnlyGrew(from: before.journal, to: download.journal) {
            // Cutting the file back is on disk before a byte of other data can land where the journal used to vouch
            // for.
            persist(download)
            unsaved.remove(id)
        } else {
            persistSoon(id)
        }
        onChange?(.updated(id, stateChanged: stateChanged))
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

    // MARK: what runners use

    /// The directory `relative` to the download root, opened without following links.
    func directory(_ relative: String, create: Bool) throws(FileError) -> ConfinedDirectory {
        try ConfinedDirectory(root: config.downloadRoot, relative: relative, create: create)
    }

    func download(_ id: String) -> Download? { machines[id]?.machine.download }

    func countReceived(_ bytes: Int64) { bytesReceived += bytes }

    /// Stores the journal of `id` (what a sync vouched for): the cheap write made while a transfer runs.
    func saveJournal(_ id: String, _ journal: [Segment]) {
        // A journal vouches for bytes of the file the probe described, under the name chosen for it: while that
        // answer still waits for the group commit, the whole download is stored with the journal. Otherwise a crash
        // just after a small download finished kept its bytes without its size, validators and name, and the
        // restart fetched it again under a second name.
        if unsaved.contains(id), var download = machines[id]?.machine.download {
            download.journal = journal
            unsaved.remove(id)
            return persist(download)
        }
        do {
            if try !store.saveJournal(id: id, journal, updatedAt: Date(), claim: writeClaim(id)) { lost(id) }
        } catch {
            log.error("cannot save a checkpoint", ["download.id": id, "error": "\(error)"])
        }
    }

    /// Takes a connection to `host` if the per-host cap allows.
    func acquireConnection(to host: String) -> Bool {
        // Several nodes: each takes an even share of the cap on the cluster's connections to one host.
        guard hostConnections[host, default: 0] < max(1, config.maxConnectionsPerHost / nodeShare) else { return false }
        hostConnections[host, default: 0] += 1
        return true
    }

    /// Gives a connection back; downloads waiting for one get a chance soon (not from inside this call chain).
    func releaseConnection(to host: String) {
        hostConnections[host, default: 1] -= 1
        if hostConnections[host] == 0 { hostConnections.removeValue(forKey: host) }
        guard refill == nil else { return }
        refill = clock.after(0) { [unowned self] in
            self.refill = nil
            for runner in Array(self.runners.values) { runner.deliver(.hostConnectionFreed) }
        }
    }

    /// Whether a download other than `except` still needs the part file `name.part` in `directory`.
    func isClaimed(directory: String, name: String, except: String) -> Bool {
        machines.values.contains {
            let download = $0.machine.download
            return download.id != except && download.directory == directory && download.filename == name
                && download.state != .completed
        }
    }

    /// Runs `work` on the loop's next turn, after the work deferred before it. The queue is the engine's, not a
    /// runner's: a runner that finished meanwhile still gets its transfers cancelled, and nothing is left holding it
    /// at shutdown.
    func later(_ work: @escaping () -> Void) {
        deferred.append(work)
        guard deferTimer == nil else { return }
        deferTimer = clock.after(0) { [unowned self] in
            self.deferTimer = nil
            let work = self.deferred
            self.deferred.removeAll()
            for item in work { item() }
        }
    }

    var hasDeferredWork: Bool { !deferred.isEmpty }

    /// A runner's download no longer needs its slot.
    func runnerFinished(_ id: String) {
        runners.removeValue(forKey: id)
        // Still queued (its start never reached the machine): back in line, or it would wait for no entry.
        if let download = machines[id]?.machine.download, download.state == .queued {
            runQueue.push(id, priority: download.priority, sequence: download.sequence)
        }
        schedule()
    }

    // MARK: queue and store

    /// Keeps the run queue, `order` and `destinations` in step with a download's state and priority (`nil`: added
    /// or removed).
    func index(_ now: Download?, was: Download?) {
        if was == nil, let now {
            // New downloads take ever larger numbers; at start-up `start` sorts once after loading them all. Another
            // node's may arrive after a later one of this node's.
            let position = firstIndex(after: now.sequence - 1)
            if position < order.count, order[position].id == now.id {
                // Removed and back (another node's download read again): its entry is still there.
                departed = max(0, departed - 1)
            } else if let last = order.last, last.sequence > now.sequence {
                order.insert((now.sequence, now.id), at: firstIndex(after: now.sequence))
            } else {
                order.append((now.sequence, now.id))
            }
        } else if now == nil, let was {
            let position = firstIndex(after: was.sequence - 1)
            if position < order.count, order[position].id == was.id {
                departed += 1
                if departed > 256, departed * 2 > order.count {
                    order.removeAll { machines[$0.id] == nil }
                    departed = 0
                }
            }
        }
        if let was {
            stateCounts[was.state, default: 0] -= 1
            if !was.state.isFinished {
                let key = Engine.destination(was.url, was.directory, was.requestedFilename)
                if destinations[key] == was.id { destinations.removeValue(forKey: key) }
            }
        }
        if let now {
            stateCounts[now.state, default: 0] += 1
            // Leaving the queue needs nothing here: the entry no longer stands when it comes up.
            if now.state == .queued, was?.state != .queued || was?.priority != now.priority {
                runQueue.push(now.id, priority: now.priority, sequence: now.sequence)
            }
            if !now.state.isFinished {
                let key = Engine.destination(now.url, now.directory, now.requestedFilename)
                if destinations[key] == nil { destinations[key] = now.id }
            }
        }
    }

    private static func destination(_ url: String, _ directory: String, _ name: String?) -> String {
        url + "\u{0}" + directory + "\u{0}" + (name ?? "")
    }

    /// How long changes the engine made itself wait to be stored together. Sixteen small downloads at once
    /// changed state in as many loop turns, one commit each (4.9 commits per download); within 10 ms they share one.
    /// A client's change is stored before it is answered (`saveUnsaved`), a journal that shrank at once (`persist`),
    /// and a checkpoint as soon as its sync is done: what waits is only what a crash may lose without harm (a state
    /// change the restart works out again from the journal and the files).
    static let groupCommitDelay = 0.01

    /// Changes (a probe answer, a state change) wait `groupCommitDelay` and are stored in one transaction.
    private func persistSoon(_ id: String) {
        unsaved.insert(id)
        if flush == nil {
            flush = LoopTimer(loop: loop, delay: Engine.groupCommitDelay) { [unowned self] in self.saveUnsaved() }
        }
        if flush?.isPending == false { flush?.start() }
    }

    func saveUnsaved() {
        let ids = unsaved
        unsaved.removeAll()
        var refused: [String] = []
        var saved: [String] = []
        do {
            try store.transaction {
                for id in ids {
                    guard let download = machines[id]?.machine.download else { continue }
                    if try store.save(download, claim: writeClaim(id)) {
                        try storeWaitingChanges(id)
                        saved.append(id)
                    } else {
                        refused.append(id)
                    }
                }
            }
            storedWaitingChanges(saved)
        } catch {
            // Kept, not dropped: a download that changes no more (one just completed) must still reach the store
            // once it answers again.
            unsaved.formUnion(ids)
            log.error("cannot save downloads; trying again in a second", ["error": "\(error)"])
            if saveRetry == nil {
                saveRetry = clock.after(1) { [unowned self] in
                    self.saveRetry = nil
                    self.saveUnsaved()
                }
            }
            return
        }
        for id in refused {
            // Another node holds it now: what this node saw of it is not the story, the holder tells its own.
            outbox.waiting.removeValue(forKey: id)
            lost(id)
        }
    }

    private func journalOnlyGrew(from old: [Segment], to new: [Segment]) -> Bool {
        old.count <= new.count && zip(old, new).allSatisfy { $0.start == $1.start && $0.received <= $1.received }
            && new.dropFirst(old.count).allSatisfy { $0.received == 0 }
    }

    private func persist(_ download: Download) {
        do {
            var landed = false
            try store.transaction {
                landed = try store.save(download, claim: writeClaim(download.id))
                if landed { try storeWaitingChanges(download.id) }
            }
            if landed {
                storedWaitingChanges([download.id])
            } else {
                outbox.waiting.removeValue(forKey: download.id)
                lost(download.id)
            }
        } catch {
            log.error("cannot save download", ["download.id": download.id, "error": "\(error)"])
        }
    }

    /// Starts queued downloads, highest priority first, then oldest, while slots are free: each start takes the
    /// run queue's first entry, whatever the queue's length.
    func schedule() {
        runQueue.compact(live: stateCounts[.queued] ?? 0, where: waiting)
        if cluster != nil { return claimWork() }
        // Checked for each: starting one may finish it at once (found complete) and start others meanwhile.
        while runners.count < config.maxActive, let next = runQueue.popFirst(where: waiting) {
            guard let download = machines[next.id]?.machine.download else { continue }
            let runner = DownloadRunner(engine: self, id: download.id, url: download.url, maxSpeed: download.maxSpeed)
            runners[download.id] = runner
            runner.begin()
        }
    }

    /// Whether a run queue entry still stands: its download is queued, at that priority, and not running.
    private func waiting(_ entry: RunQueue.Entry) -> Bool {
        guard let download = machines[entry.id]?.machine.download else { return false }
        return download.state == .queued && download.priority == entry.priority && runners[entry.id] == nil
    }

    /// 15 characters of Crockford-style base 32: 75 random bits from two calls to the system generator. Fifteen
    /// bytes is the most a Swift string holds inline: an id costs no allocation wherever it is kept or hashed.
    static func newID() -> String {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz".utf8)
        var bits = (generator.next() as UInt64, generator.next() as UInt64)
        var id = [UInt8]()
        id.reserveCapacity(15)
        for index in 0..<15 {
            if index == 8 { bits.0 = bits.1 }
            id.append(alphabet[Int(bits.0 & 31)])
            bits.0 >>= 5
        }
        return String(decoding: id, as: UTF8.self)
    }

    /// 15 characters of the same base 32 that sort by time: 9 of milliseconds since 1970 (good for a million
    /// years), then 6 random. Rows keyed by these (the webhook outbox's) go in at the end of their index, where a
    /// random key would land on a page of its own each time, one read and one write per row once the table
    /// outgrows the cache.
    static func newOrderedID() -> String {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz".utf8)
        let milliseconds = UInt64(max(0, Date().timeIntervalSince1970 * 1000))
        var random = generator.next() as UInt64
        var id = [UInt8](repeating: 0, count: 15)
        for index in 0..<9 { id[index] = alphabet[Int((milliseconds >> UInt64(5 * (8 - index))) & 31)] }
        for index in 9..<15 {
            id[index] = alphabet[Int(random & 31)]
            random >>= 5
        }
        return String(decoding: id, as: UTF8.self)
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
