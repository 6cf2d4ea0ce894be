// What the BitTorrent session is configured with, told and asked: plain values, free of libtorrent's types.

/// How the BitTorrent session meets the network: where it listens, what it announces itself as, which discovery
/// it takes part in (all off unless enabled), encryption, limits, a proxy and the addresses it never talks to.
public struct TorrentSettings: Sendable, Equatable {
    public enum Encryption: String, Sendable, CaseIterable {
        case prefer, require, refuse
    }

    /// libtorrent's listen interfaces: `IP:port` (or a device name and port), comma separated.
    public var listenInterfaces: String
    /// The interface (or address) outgoing connections are bound to; nil: the system's choice.
    public var outgoingInterface: String?
    public var userAgent: String
    public var dht = false
    public var lsd = false
    public var upnp = false
    public var natpmp = false
    public var encryption = Encryption.prefer
    /// Bytes per second over all torrents, 0 for none.
    public var uploadLimit: Int64 = 0
    public var downloadLimit: Int64 = 0
    public var maxConnections = 0
    /// SOCKS5 or HTTP proxy for peers and trackers.
    public var proxy: ProxyServer?
    /// Address ranges (`first-last`) no peer or tracker connection goes to.
    public var blockedRanges: [String] = []

    public init(listenInterfaces: String, userAgent: String) {
        self.listenInterfaces = listenInterfaces
        self.userAgent = userAgent
    }
}

public struct TorrentError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// One file of a torrent: its path (as the .torrent says it, or as it is on disk), size, and whether it is a pad
/// file (bytes of no file, never written).
public struct TorrentFileEntry: Sendable, Equatable {
    public var path: String
    public var size: Int64
    public var pad: Bool
}

/// What a .torrent file holds.
public struct TorrentMeta: Sendable {
    public var infoHash: String
    public var name: String
    public var totalSize: Int64
    public var pieceLength: Int64
    public var pieces: Int
    public var files: [TorrentFileEntry]
}

/// What a torrent is doing now.
public struct TorrentStatus: Sendable, Equatable {
    public enum State: Int, Sendable {
        case checkingFiles = 1, downloadingMetadata = 2, downloading = 3, finished = 4, seeding = 5,
            checkingResumeData = 7
    }
    public var state: State?
    public var hasMetadata: Bool
    public var paused: Bool
    public var finished: Bool
    public var seeding: Bool
    public var errored: Bool
    /// The wanted files' size and verified bytes.
    public var totalSize: Int64
    public var totalDone: Int64
    public var uploaded: Int64
    public var downloaded: Int64
    public var downloadRate: Int64
    public var uploadRate: Int64
    public var peers: Int
    public var seeds: Int
    public var seedingSeconds: Int64
    public var activeSeconds: Int64
    public var pieces: Int
    public var piecesDone: Int
    public var infoHash: String
}

/// What a torrent is added with.
public struct TorrentAdd: Sendable {
    public var key: UInt64
    public var magnet: String?
    public var torrent: [UInt8]?
    public var resume: [UInt8]?
    public var savePath: String
    public var paused = false
    /// Ask for no piece until `resume` (the metadata still comes), so that the files can be looked at first.
    public var hold = false
    public var sequential = false
    public var uploadLimit: Int64 = 0
    public var downloadLimit: Int64 = 0
    public var maxConnections = 0
    public var trackers: [String] = []
    /// `ip:port` of peers connected to at once.
    public var peers: [String] = []
    /// The name its files' first path element has on disk, when not the torrent's own (a name taken).
    public var root: String?

    public init(key: UInt64, savePath: String) {
        self.key = key
        self.savePath = savePath
    }
}

/// What libtorrent told, for the torrent of `key`.
public enum TorrentEvent: Sendable, Equatable {
    case metadata(UInt64)
    case checked(UInt64)
    case finished(UInt64)
    case piece(UInt64, Int)
    case error(UInt64, String)
    case resumeData(UInt64, [UInt8])
    case resumeFailed(UInt64, String)
    case paused(UInt64)
    case resumed(UInt64)
    case removed(UInt64)
    case filesDeleted(UInt64)
    case deleteFailed(UInt64, String)
    case listenFailed(String)
}
