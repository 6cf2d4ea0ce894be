import Foundation

/// One client's event stream: events pass straight through while the client keeps up; once its queue passes the
/// limit, only the latest event per download is kept until the queue drains, so a stalled client costs at most
/// one event per download.
final class EventSubscriber {
    let sink: EventSink
    /// Only events about this download, or all when nil.
    let downloadID: String?
    private let queueLimit: Int
    private(set) var slowSince: Double?
    private var pending: [String: StreamEvent] = [:]
    private(set) var lastWriteAt: Double

    init(sink: EventSink, downloadID: String?, queueLimit: Int, now: Double) {
        self.sink = sink
        self.downloadID = downloadID
        self.queueLimit = queueLimit
        self.lastWriteAt = now
    }

    func wants(_ event: StreamEvent) -> Bool {
        guard let downloadID else { return true }
        return event.downloadID == nil || event.downloadID == downloadID
    }

    func offer(_ event: StreamEvent, now: Double) {
        guard wants(event) else { return }
        if slowSince != nil {
            pending[event.downloadID ?? ""] = event
            return
        }
        write(event.wire, now: now)
    }

    /// The client took everything queued: send what was held back, oldest first.
    func drained(now: Double) {
        guard slowSince != nil else { return }
        slowSince = nil
        let held = pending.values.sorted { $0.sequence < $1.sequence }
        pending.removeAll()
        for event in held { offer(event, now: now) }
    }

    func heartbeat(now: Double) {
        guard slowSince == nil else { return }
        write(": heartbeat\n\n", now: now)
    }

    private func write(_ text: String, now: Double) {
        sink.write(text)
        lastWriteAt = now
        if sink.queuedBytes > queueLimit { slowSince = now }
    }
}
