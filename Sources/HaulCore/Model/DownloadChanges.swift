/// Changes a client may make to a download.
public struct DownloadChanges: Sendable {
    public var state: DownloadState?
    public var priority: Int?
    public var connections: Int?
    /// `.some(nil)` removes the limit.
    public var maxSpeed: Int64??
    /// A place in the queue (`Engine.move` works it out).
    var queueRank: Int64?
    /// Labels a client files it under; `.some(nil)` clears them (each: a category, tags, seeding limits).
    public var category: String??
    public var tags: String??
    public var seedRatio: Double??
    public var seedTime: Int64??

    /// Whether it changes anything but the state.
    public var changesOptions: Bool {
        priority != nil || maxSpeed != nil || connections != nil || category != nil || tags != nil
            || seedRatio != nil || seedTime != nil
    }

    public init(state: DownloadState? = nil, priority: Int? = nil, maxSpeed: Int64?? = nil, connections: Int? = nil) {
        self.state = state
        self.priority = priority
        self.maxSpeed = maxSpeed
        self.connections = connections
    }
}
