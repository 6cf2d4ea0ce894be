import HaulCore

/// One client's event stream: events pass straight through while the client keeps up; once its queue passes the
/// limit, only the latest event per download is kept until the queue drains, so a stalled client costs at most
/// one event per download.
///
/// A snapshot is written the same way: a piece at a time while the queue has room, the rest when the client has
/// taken it, with live events held back (latest per download) until the snapshot is complete.
final class EventSubscriber {
    let sink: EventSink
    /// Only events about this download, or all when nil.
    let downloadID: String?
    /// Only events about downloads of this category, or all when nil.
    let category: String?
    /// Whose stream it is: a token with a root hears only of its own downloads; managers see owners.
    let caller: Caller
    private let queueLimit: Int
    /// Since when the client has not taken its queue (it is slow, or a snapshot waits for it to read).
    private(set) var slowSince: Double?
    private var pending: [String: StreamEvent] = [:]
    private(set) var lastWriteAt: Double
    /// The snapshot being written, if any.
    private var snapshot: SnapshotStream?

    init(
        sink: EventSink, downloadID: String?, category: String? = nil, caller: Caller = .server, queueLimit: Int,
        now: Double
    ) {
        self.sink = sink
        self.caller = caller
        self.downloadID = downloadID
        self.category = category
        self.queueLimit = queueLimit
        self.lastWriteAt = now
    }

    func wants(_ event: StreamEvent) -> Bool {
        if let category, event.category != category { return false }
        if let confinedTo = caller.confinedTo, event.owner != confinedTo { return false }
        guard let downloadID else { return true }
        return event.downloadID == downloadID
    }

    func offer(_ event: StreamEvent, now: Double) {
        guard wants(event) else { return }
        if slowSince != nil || snapshot != nil {
            pending[event.downloadID] = event
            return
        }
        write(event.wire(owner: caller.seesOwners), now: now)
    }

    /// Starts writing `stream` (it goes before any event offered from now on).
    func send(_ stream: SnapshotStream, now: Double) {
        snapshot = stream
        writeSnapshot(now: now)
    }

    /// The client took everything queued: go on with the snapshot, then send what was held back, oldest first.
    func drained(now: Double) {
        guard slowSince != nil || snapshot != nil else { return }
        slowSince = nil
        writeSnapshot(now: now)
        guard snapshot == nil, slowSince == nil else { return }
        let held = pending.values.sorted { $0.sequence < $1.sequence }
        pending.removeAll()
        for event in held { offer(event, now: now) }
    }

    func heartbeat(now: Double) {
        // Never inside a snapshot: a comment's blank line would end its event half-way.
        guard slowSince == nil, snapshot == nil else { return }
        write(": heartbeat\n\n", now: now)
    }

    /// Writes pieces of the snapshot while the queue has room; when it is full, waits (as a slow client) to be
    /// drained.
    private func writeSnapshot(now: Double) {
        while let stream = snapshot {
            if sink.queuedBytes > queueLimit {
                slowSince = slowSince ?? now
                return
            }
            guard let piece = stream.next() else {
                snapshot = nil
                return
            }
            sink.write(piece)
            lastWriteAt = now
        }
    }

    private func write(_ text: String, now: Double) {
        sink.write(text)
        lastWriteAt = now
        if sink.queuedBytes > queueLimit { slowSince = now }
    }
}
