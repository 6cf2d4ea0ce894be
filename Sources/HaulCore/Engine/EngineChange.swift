/// What the engine tells its observer (the event hub) after each change.
public enum EngineChange: Sendable, Equatable {
    case created(String)
    /// Any field changed; `stateChanged` when the state did.
    case updated(String, stateChanged: Bool)
    /// Removed (or gone on another node) in `state`, its last.
    case removed(String, last: DownloadState)
}

/// What `Engine.totals()` counts.
public struct EngineTotals: Sendable {
    public var downloads = 0
    public var byState: [DownloadState: Int] = [:]
    public var receivedBytes: Int64 = 0
    public var speed = 0.0
    public var activeConnections = 0
    /// Over the running torrents (seeding ones too): peers connected, upload speed, payload bytes uploaded.
    public var torrentPeers = 0
    public var uploadSpeed = 0.0
    public var uploadedBytes: Int64 = 0

    public func count(_ state: DownloadState) -> Int { byState[state] ?? 0 }
    public var active: Int { byState.filter { $0.key.isActive }.values.reduce(0, +) }
}
