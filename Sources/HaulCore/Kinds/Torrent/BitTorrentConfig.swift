import HaulLoop

/// BitTorrent on this server: off unless enabled (`--bittorrent`), then libtorrent's session with these settings.
/// The session joins swarms from the listen address: every peer of a torrent learns this server's address.
public struct BitTorrentConfig: Sendable, Equatable {
    public var enabled = false
    /// libtorrent's listen interfaces: `IP:PORT` pairs (or `DEVICE:PORT`), comma separated.
    public var listen = "0.0.0.0:6881,[::]:6881"
    /// The interface or address outgoing peer connections use (a VPN's); nil: the system's choice.
    public var outgoingInterface: String?
    public var dht = false
    public var lsd = false
    /// UPnP and NAT-PMP port mapping on the router.
    public var portMapping = false
    public var encryption = TorrentSettings.Encryption.prefer
    /// Bytes per second uploaded over all torrents, 0 for none.
    public var uploadLimit: Int64 = 0
    /// When a complete torrent stops seeding, unless its download or category says otherwise (default: at once).
    public var seeding = SeedLimits()

    public init() {}

    /// The session's settings under `policy` (the address guard: peers and trackers at private addresses are
    /// refused like origins there) and `proxy`.
    func settings(userAgent: String, addressPolicy: AddressPolicy?, proxy: ProxyServer?) -> TorrentSettings {
        var settings = TorrentSettings(listenInterfaces: listen, userAgent: userAgent)
        settings.outgoingInterface = outgoingInterface
        settings.dht = dht
        settings.lsd = lsd
        settings.upnp = portMapping
        settings.natpmp = portMapping
        settings.encryption = encryption
        settings.uploadLimit = uploadLimit
        settings.proxy = proxy
        if let addressPolicy { settings.blockedRanges = addressPolicy.blockedRanges }
        return settings
    }
}
