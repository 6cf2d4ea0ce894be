import FoundationEssentials
import HaulCore
import HaulLoop

/// Turns engine changes into numbered events: streams them to subscribers, keeps the newest for clients that
/// reconnect with Last-Event-ID, and remembers what changed when for `changed_since` polling.
public final class EventHub: EngineListener {
    /// The server's own operations: every download, whoever's.
    private let operations: Operations
    private let config: EventStreamConfig
    /// The last sequence number handed out. Starts at the microseconds since 1970, so numbers keep growing
    /// across restarts and a Last-Event-ID from an earlier run is never mistaken for one of this run.
    public private(set) var sequence: Int64 {
        // A page of the list tells the sequence it was read at: a page put up before this event is taken down.
        didSet { operations.statusBoard.clearPages() }
    }
    /// The newest events, oldest first, at most `replayCapacity`.
    private var replay: [StreamEvent] = []
    private var replayStart = 0
    /// The sequence number of each download's latest event.
    private var lastChange: [String: Int64] = [:]
    /// The category of each download that has one and was announced: a `removed` event names it too.
    private var categories: [String: String] = [:]
    /// The token that added each download announced that a token added: a `removed` event goes to its streams.
    private var owners: [String: String] = [:]
    /// The numbers of `lastChange` in the order they were given out (older entries of an id linger until the log
    /// is compacted): `changed_since` reads from the first number past it instead of visiting every download.
    private var changeLog: [(sequence: Int64, id: String)] = []
    private var tombstones: [(sequence: Int64, id: String, owner: String?)] = []
    /// changed_since below this may have missed removals that were forgotten.
    private var forgottenBefore: Int64
    /// Received bytes as of each download's last event, to send progress only when it moved.
    private var announcedBytes: [String: Int64] = [:]
    /// Downloads changed (not in state) since their last event.
    private var dirty: Set<String> = []
    private var subscribers: [ObjectIdentifier: EventSubscriber] = [:]
    private let clock: Clock
    private var progressTimer: ClockTimer?
    private var heartbeatTimer: ClockTimer?

    /// A hub for `engine`'s changes, keeping time (progress coalescing, heartbeats, slow clients) by its clock.
    public init(operations: Operations, config: EventStreamConfig) {
        self.operations = operations
        self.config = config
        sequence = Int64(Date().timeIntervalSince1970 * 1_000_000)
        forgottenBefore = sequence
        clock = operations.clock
        progressTimer = clock.every(config.progressInterval) { [unowned self] in
            self.emitProgress()
            self.closeSlowClients()
        }
        heartbeatTimer = clock.every(config.heartbeat) { [unowned self] in self.heartbeat() }
        operations.listen(self)
    }

    public var streamCount: Int { subscribers.count }
    public var slowStreamCount: Int { subscribers.values.filter { $0.slowSince != nil }.count }
    /// Bytes waiting in our queues for all stream clients together.
    public var queuedBytes: Int { subscribers.values.reduce(0) { $0 + $1.sink.queuedBytes } }

    // MARK: engine -> events

    /// Webhooks and hooks are the operator's: the bodies name each download's owner.
    public func resource(of snapshot: DownloadSnapshot) -> [UInt8] { DownloadResource.bytes(snapshot, owner: true) }

    /// Told every change too (the aria2 front's notifications, the readers of files).
    var onEngineChange: ((EngineChange) -> Void)?
    /// Told each write of a download a reader follows.
    var onWrote: ((String) -> Void)?

    public func engineWrote(_ id: String) { onWrote?(id) }

    public func engineChanged(_ change: EngineChange) {
        onEngineChange?(change)
        switch change {
        case .created(let id):
            publish(.created, about: id)
        case .updated(let id, let stateChanged):
            guard stateChanged else {
                dirty.insert(id)
                return
            }
            // The state event comes first, so no progress event shows a state before it was announced; it
            // carries the bytes too (the last ones before completion among them), which a progress event repeats
            // for clients that follow progress alone.
            // One snapshot for both: they describe the same moment (three were built, one to read the state).
            guard let snapshot = operations.snapshot(id) else { return }
            let moved = dirty.contains(id) || snapshot.download.receivedBytes != announcedBytes[id]
            publish(.state, snapshot)
            if moved || snapshot.download.state == .completed { publish(.progress, snapshot) }
        case .removed(let id, _):
            sequence += 1
            let owner = owners.removeValue(forKey: id)
            let event = StreamEvent(
                sequence: sequence, kind: .removed, downloadID: id,
                category: categories.removeValue(forKey: id), owner: owner, payload: .removed(id))
            lastChange.removeValue(forKey: id)
            announcedBytes.removeValue(forKey: id)
            dirty.remove(id)
            tombstones.append((sequence, id, owner))
            if tombstones.count > config.tombstoneCapacity {
                forgottenBefore = tombstones.removeFirst().sequence
            }
            record(event)
            // A stream following only this download has nothing left to say.
            for (key, subscriber) in subscribers where subscriber.downloadID == id {
                subscribers.removeValue(forKey: key)
                subscriber.sink.finish()
            }
        }
    }

    /// Every `progressInterval`: one progress event per download whose bytes moved or that changed otherwise.
    private func emitProgress() {
        var due = dirty
        dirty.removeAll()
        for id in operations.runningIDs where operations.receivedBytes(id) != announcedBytes[id] { due.insert(id) }
        for id in due.sorted() { publish(.progress, about: id) }
    }

    private func publish(_ kind: StreamEvent.Kind, about id: String) {
        guard let snapshot = operations.snapshot(id) else { return }
        publish(kind, snapshot)
    }

    private func publish(_ kind: StreamEvent.Kind, _ snapshot: DownloadSnapshot) {
        let id = snapshot.download.id
        sequence += 1
        let category = snapshot.download.category
        // Kept for the `removed` event, which comes when the download is gone.
        if let category { categories[id] = category }
        if let owner = snapshot.download.owner { owners[id] = owner }
        let event = StreamEvent(
            sequence: sequence, kind: kind, downloadID: id, category: category,
            owner: snapshot.download.owner, payload: .download(snapshot))
        lastChange[id] = sequence
        changeLog.append((sequence, id))
        if changeLog.count > 2 * lastChange.count + 1024 {
            changeLog = lastChange.map { ($0.value, $0.key) }.sorted { $0.sequence < $1.sequence }
        }
        announcedBytes[id] = snapshot.download.receivedBytes
        dirty.remove(id)
        record(event)
    }

    private func record(_ event: StreamEvent) {
        if replay.count < config.replayCapacity {
            replay.append(event)
        } else {
            replay[replayStart] = event
            replayStart = (replayStart + 1) % replay.count
        }
        let now = self.clock.now
        for subscriber in subscribers.values { subscriber.offer(event, now: now) }
    }

    private var replayInOrder: ArraySlice<StreamEvent> {
        ArraySlice(replay[replayStart...] + replay[..<replayStart])
    }

    // MARK: subscribers

    /// Starts streaming to `sink`: first what a reconnecting client missed since `lastEventID` (or one snapshot
    /// when that is no longer in the buffer), or for a new follower of one download its current state; then every
    /// new event.
    func subscribe(
        _ sink: EventSink, downloadID: String?, category: String? = nil, caller: Caller = .server,
        lastEventID: Int64?
    ) {
        let now = self.clock.now
        let subscriber = EventSubscriber(
            sink: sink, downloadID: downloadID, category: category, caller: caller,
            queueLimit: config.slowClientQueue, now: now)
        let key = ObjectIdentifier(sink)
        sink.onClose = { [unowned self] in self.subscribers.removeValue(forKey: key) }
        sink.onDrained = { [unowned self, weak subscriber] in subscriber?.drained(now: self.clock.now) }
        subscribers[key] = subscriber
        sink.write("retry: 2000\n\n")
        guard let lastEventID else {
            // A new follower of one download starts from where it stands (finished or not): a `state` event
            // numbered with the current sequence, so a reconnect from it misses nothing.
            if let downloadID, let snapshot = operations.snapshot(downloadID) {
                subscriber.offer(
                    StreamEvent(
                        sequence: sequence, kind: .state, downloadID: downloadID,
                        category: snapshot.download.category, owner: snapshot.download.owner,
                        payload: .download(snapshot)),
                    now: now)
            }
            return
        }
        guard lastEventID < sequence else { return }
        let ordered = replayInOrder
        if let oldest = ordered.first, lastEventID >= oldest.sequence - 1 {
            for event in ordered where event.sequence > lastEventID { subscriber.offer(event, now: now) }
        } else {
            // Every download now (or the one followed), as one event carrying the current sequence number,
            // written as the client reads it.
            subscriber.send(
                SnapshotStream(
                    operations: operations.acting(as: caller), sequence: sequence,
                    downloadID: downloadID, category: category), now: now)
        }
    }

    private func heartbeat() {
        let now = self.clock.now
        for subscriber in subscribers.values where now - subscriber.lastWriteAt >= config.heartbeat / 2 {
            subscriber.heartbeat(now: now)
        }
    }

    /// A client that has not taken its queue for `slowClientTimeout` is cut off; its memory is freed with it.
    /// Ends the streams token `id` opened (it was revoked, or expired): they carry nothing more.
    func closeStreams(ofToken id: String) {
        for (key, subscriber) in subscribers where subscriber.caller.token?.id == id {
            subscribers.removeValue(forKey: key)
            subscriber.sink.finish()
        }
    }

    /// The scoped tokens streams were opened with, to check that each still stands.
    var streamTokens: Set<String> { Set(subscribers.values.compactMap { $0.caller.token?.id }) }

    private func closeSlowClients() {
        let now = self.clock.now
        for subscriber in subscribers.values {
            if let since = subscriber.slowSince, now - since > config.slowClientTimeout { subscriber.sink.close() }
        }
    }

    // MARK: polling

    /// What changed after `since`: the ids of downloads with newer events, and the ids removed (those `caller`
    /// sees). nil when removals that old are forgotten (the caller then sends everything).
    func changes(since: Int64, for caller: Caller) -> (changed: Set<String>, removed: [String])? {
        guard since >= forgottenBefore else { return nil }
        // Changes not yet announced (coalesced until the next progress tick) are newer than any number given out.
        var low = 0, high = changeLog.count
        while low < high {
            let middle = (low + high) / 2
            if changeLog[middle].sequence > since { high = middle } else { low = middle + 1 }
        }
        // An id logged past `since` changed since, unless it was removed (then it has no last change).
        var changed = dirty
        for entry in changeLog[low...] where lastChange[entry.id] != nil { changed.insert(entry.id) }
        for id in operations.runningIDs where operations.receivedBytes(id) != announcedBytes[id] { changed.insert(id) }
        let confinedTo = caller.confinedTo
        let removed = tombstones.filter { $0.sequence > since && (confinedTo == nil || $0.owner == confinedTo) }
            .map(\.id)
        return (changed, removed)
    }
}
