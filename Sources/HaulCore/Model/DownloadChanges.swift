/// Changes a client may make to a download.
public struct DownloadChanges: Sendable {
    public var state: DownloadState?
    public var priority: Int?
    public var connections: Int?
    /// `.some(nil)` removes the limit.
    public var maxSpeed: Int64??
    /// A place in the queue (`Engine.move` works it out).
    var queueRank: Int64?

    public init(state: DownloadState? = nil, priority: Int? = nil, maxSpeed: Int64?? = nil, connections: Int? = nil) {
        self.state = state
        self.priority = priority
        self.maxSpeed = maxSpeed
        self.connections = connections
    }
}
