import FoundationEssentials
import HaulLoop

/// What a client asks for when adding a download (already validated by the API layer).
public struct NewDownload: Sendable {
    public var url: String
    /// The id, when the caller chose it (aria2's `gid` option, through an id made for that GID); nil for a new one.
    /// One already taken refuses the download.
    public var id: String?
    public var headers: [HeaderField] = []
    public var filename: String?
    public var directory = ""
    public var connections: Int?
    /// nil: the category's, else 0.
    public var priority: Int?
    public var maxSpeed: Int64?
    /// The name of a category made with `putCategory`, whose folder and defaults the download takes.
    public var category: String?
    /// Other URLs of the same file.
    public var mirrors: [String] = []
    public var startPaused = false
    public var checksum: String?
    public var insecure = false
    public var sequential = false
    public var firstLast = false
    public var kind = DownloadKind.auto
    /// A .torrent file's bytes (read and checked by the API layer); `url` is then a magnet link of its info-hash.
    public var torrent: [UInt8]?
    /// A torrent's files to fetch (`TorrentSelection`); nil: all.
    public var files: String?
    /// A torrent's seeding limits (`SeedLimits`): the share ratio and the seconds of seeding after which it stops;
    /// nil takes its category's, then the server's.
    public var seedRatio: Double?
    public var seedTime: Int64?
    /// A torrent's upload limit in bytes per second; nil: only the server's.
    public var uploadLimit: Int64?
    /// Its tags (`DownloadTags`), comma-separated and normalized; nil for none.
    public var tags: String?
    public var variant: String?
    /// nil: the category's, else the settings'.
    public var proxy: ProxyChoice?
    public var username: String?
    public var password: String?
    public var cookies: String?
    public var userAgent: String?
    public var referer: String?
    /// The SFTP server's host key fingerprint the download pins.
    public var hostKey: String?

    /// Moves user information in `url` (`https://user:pass@host/`) to `username` and `password`, unless those are
    /// given, so that the URL shown back carries none.
    public mutating func takeCredentialsFromURL() {
        guard url.utf8.contains(UInt8(ascii: "@")), var components = URLComponents(string: url),
            components.user != nil || components.password != nil
        else { return }
        if username == nil, password == nil {
            username = components.user
            password = components.password
        }
        components.user = nil
        components.password = nil
        if let stripped = components.string { url = stripped }
    }
    /// The size the client expects the file to have, if it knows.
    public var expectedBytes: Int64?
    /// The scoped token adding it: its root holds the download's folder, its quota bounds it, and it owns it.
    public var owner: AccessToken?

    public init(url: String) { self.url = url }
}
