/// Where a server-sent event stream goes: the HTTP connection of one client. The transport implements it; the
/// hub only queues text, watches the queue, and closes.
public protocol EventSink: AnyObject {
    /// Queues text for the client.
    func write(_ text: String)
    /// Bytes queued and not yet taken by the kernel.
    var queuedBytes: Int { get }
    /// Drops the connection at once, discarding what is queued (the client is too slow).
    func close()
    /// Ends the stream after what is queued has been sent (the followed download is gone).
    func finish()
    /// Set by the hub: called when the queue has drained.
    var onDrained: (() -> Void)? { get set }
    /// Set by the hub: called once when the client disconnects.
    var onClose: (() -> Void)? { get set }
}

/// Settings of the event streams.
public struct EventStreamConfig: Sendable {
    /// Seconds between comment heartbeats on an idle stream; keep it below the server's HTTP timeout.
    public var heartbeat: Double = 15
    /// Seconds between progress events of one download (0.25: at most 4 a second).
    public var progressInterval: Double = 0.25
    /// Events kept for clients that reconnect with Last-Event-ID.
    public var replayCapacity = 4096
    /// Queued bytes above which a client counts as slow: it then gets only the latest event per download.
    public var slowClientQueue = 256 * 1024
    /// Seconds a slow client may stay slow before its stream is closed.
    public var slowClientTimeout: Double = 30
    /// Removals remembered for `GET /downloads?changed_since=`.
    public var tombstoneCapacity = 10_000

    public init() {}
}
