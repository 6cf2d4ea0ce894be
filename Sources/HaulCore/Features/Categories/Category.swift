import FoundationEssentials
import HaulLoop

/// A client's namespace for downloads (`PUT /categories/NAME`): its own folder under the download root, the
/// connections and priority its downloads start with, and one speed limit over all of them (a bandwidth group).
public struct Category: Sendable, Equatable {
    public var name: String
    /// Relative to the download root; a download's own `directory` is then relative to this one.
    public var directory: String
    public var connections: Int?
    /// Bytes per second over every running download of the category, nil for none.
    public var maxSpeed: Int64?
    public var priority: Int?
    /// The proxy of its downloads that name none (`"none"`: direct); nil leaves it to the settings.
    public var proxy: ProxyChoice?
    /// Whether the operator named `proxy` (the server's own token); one a scoped token named is held to the
    /// address policy, as a download's own is.
    public var proxyTrusted = true
    /// Where its downloads' files go once verified, relative to the completed root (`--completed-root`, else the
    /// download root); nil leaves them where they were written.
    public var completedDirectory: String?
    /// Its torrents' seeding limits (`SeedLimits`), where their downloads give none; nil: the server's.
    public var seedRatio: Double?
    public var seedTime: Int64?

    public init(
        name: String, directory: String, connections: Int? = nil, maxSpeed: Int64? = nil,
        priority: Int? = nil, proxy: ProxyChoice? = nil, completedDirectory: String? = nil
    ) {
        self.completedDirectory = completedDirectory
        self.name = name
        self.directory = directory
        self.connections = connections
        self.maxSpeed = maxSpeed
        self.priority = priority
        self.proxy = proxy
    }
}
