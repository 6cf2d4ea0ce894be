import FoundationEssentials
import HaulLoop

/// A download's fields as stored; `Download` holds them, shared until changed. The ones nearly every download sets
/// or the engine reads often are kept inline; the ones most downloads leave at their defaults (a playlist's or a
/// torrent's state, credentials, a failure, a hook's result) live in `DownloadExtras`, out of line and allocated
/// only for a download that sets one: 448 bytes a download instead of 1,137 (a million stored hold 650 MiB less).
public struct DownloadFields: Sendable, Equatable {
    public internal(set) var id: String
    /// Creation order, used for fair queueing and stable listing.
    public var sequence: Int64
    public var url: String
    /// Sent to the origin on every request; never shown by the API.
    public var headers: [HeaderField]
    /// The name the client asked for, if any.
    public var requestedFilename: String?
    /// Relative to the download root; "" is the root itself.
    public var directory: String
    /// The name chosen for the file (set once probed); the part file is `filename + ".part"`.
    public var filename: String?
    public var finalURL: String?
    /// The byte ranges being fetched, with the bytes of each already in the part file (counted as written).
    public var segments: [Segment] = []
    /// The same ranges with the bytes known to be on disk: the journal. Only this is stored, so after a crash a
    /// download never resumes past data lost with the page cache. Never ahead of `segments`.
    public var journal: [Segment] = []
    /// Other sources of the same file (`mirrors` on POST): segments are spread over `url` and the ones that agree.
    public var mirrors: [Mirror] = []
    /// The client's namespace for it (`PUT /categories/NAME`), nil for none.
    public var category: String?
    /// Its tags (`DownloadTags`), comma-separated; nil for none.
    public var tags: String?
    public var etag: String?
    public var lastModified: String?
    public var contentType: String?
    /// The node that holds the download's claim, or last held it (a store several nodes share); nil with SQLite.
    public var node: String?
    /// The id of the scoped token that added it (`POST /tokens`), nil for the server's own token; and the token's
    /// name then, shown to managers (a token is never renamed, and its downloads outlive it).
    public var owner: String?
    public var ownerName: String?
    /// Where the finished file goes (its category's `completed_directory`, relative to the completed root), and
    /// whether it is there (`moved`): the file is then `completedDirectory/filename` under that root.
    public var completedDirectory: String?
    public var connections: Int
    public var priority: Int
    public var attempts = 0
    /// The claim's fence as last read from the store (claims change it, saves never do).
    public var fence: Int64 = 0
    public var createdAt: Date
    public var updatedAt: Date
    // The optionals of nine bytes are each followed by a field of one, which takes their padding.
    public var totalBytes: Int64?
    public var state: DownloadState
    /// Its place among waiting downloads of the same priority once a client moved it (lower starts first); nil
    /// until then, when `queueOrder` follows creation order.
    public var queueRank: Int64?
    /// What the source is: one file, or an HLS playlist whose segments make the file (`kind`; `variant` says which
    /// of a master playlist's variants to take).
    public var kind = DownloadKind.auto
    public var maxSpeed: Int64?
    /// Fetch over TLS without verifying the server's certificate (asked for per download, never by default).
    public var insecure = false
    public var startedAt: Date?
    /// Fetched in order from the start (`sequential`), or its first and last pieces first (`first_last`).
    public var sequential = false
    public var completedAt: Date?
    public var firstLast = false
    /// The file its name was given to, once completed (nil for one completed by an earlier version).
    public var fileStamp: FileStamp?
    public var acceptsRanges = false
    public var moved = false
    /// The move's marker is gone too (a crash just after the move was stored can leave it; the next start removes it).
    public var moveSettled = false
    /// The operator's hook (`on-complete`, `on-failed`) is due for the state it is in: stored with the state, so a
    /// crash before it ran runs it after the restart.
    public var hookPending = false
    /// The rest, out of line.
    @usableFromInline var extras = ExtrasBox()

    public init(
        id: String, sequence: Int64, url: String, headers: [HeaderField], requestedFilename: String?,
        directory: String, state: DownloadState, connections: Int, priority: Int, maxSpeed: Int64?,
        createdAt: Date
    ) {
        self.id = id
        self.sequence = sequence
        self.url = url
        self.headers = headers
        self.requestedFilename = requestedFilename
        self.directory = directory
        self.state = state
        self.connections = connections
        self.priority = priority
        self.maxSpeed = maxSpeed
        self.createdAt = createdAt
        self.updatedAt = createdAt
    }

    public var expectedBytes: Int64? {
        get { extras.get(\.expectedBytes) }
        set { extras.set(newValue, \.expectedBytes) }
    }
    public var checksum: String? {
        get { extras.get(\.checksum) }
        set { extras.set(newValue, \.checksum) }
    }
    public var variant: String? {
        get { extras.get(\.variant) }
        set { extras.set(newValue, \.variant) }
    }
    public var hls: HLSInfo? {
        get { extras.get(\.hls) }
        set { extras.set(newValue, \.hls) }
    }
    public var torrent: TorrentInfo? {
        get { extras.get(\.torrent) }
        set { extras.set(newValue, \.torrent) }
    }
    public var files: String? {
        get { extras.get(\.files) }
        set { extras.set(newValue, \.files) }
    }
    public var seedRatio: Double? {
        get { extras.get(\.seedRatio) }
        set { extras.set(newValue, \.seedRatio) }
    }
    public var seedTime: Int64? {
        get { extras.get(\.seedTime) }
        set { extras.set(newValue, \.seedTime) }
    }
    public var uploadLimit: Int64? {
        get { extras.get(\.uploadLimit) }
        set { extras.set(newValue, \.uploadLimit) }
    }
    public var proxy: ProxyChoice? {
        get { extras.get(\.proxy) }
        set { extras.set(newValue, \.proxy) }
    }
    public var username: String? {
        get { extras.get(\.username) }
        set { extras.set(newValue, \.username) }
    }
    public var password: String? {
        get { extras.get(\.password) }
        set { extras.set(newValue, \.password) }
    }
    public var cookies: String? {
        get { extras.get(\.cookies) }
        set { extras.set(newValue, \.cookies) }
    }
    public var hostKey: String? {
        get { extras.get(\.hostKey) }
        set { extras.set(newValue, \.hostKey) }
    }
    public var userAgent: String? {
        get { extras.get(\.userAgent) }
        set { extras.set(newValue, \.userAgent) }
    }
    public var referer: String? {
        get { extras.get(\.referer) }
        set { extras.set(newValue, \.referer) }
    }
    public var error: DownloadError? {
        get { extras.get(\.error) }
        set { extras.set(newValue, \.error) }
    }
    public var moveError: String? {
        get { extras.get(\.moveError) }
        set { extras.set(newValue, \.moveError) }
    }
    public var hookStatus: Int? {
        get { extras.get(\.hookStatus) }
        set { extras.set(newValue, \.hookStatus) }
    }
    public var hookError: String? {
        get { extras.get(\.hookError) }
        set { extras.set(newValue, \.hookError) }
    }
    public var hookAt: Date? {
        get { extras.get(\.hookAt) }
        set { extras.set(newValue, \.hookAt) }
    }
}

/// The fields of a download most downloads leave nil, each read and written through `DownloadFields`' property of
/// the same name.
public struct DownloadExtras: Sendable, Equatable {
    /// Every field nil: what a download without a box reads.
    @usableFromInline static let empty = DownloadExtras()

    /// The size the client said the file has (`size` on POST): checked against free space at once and against the
    /// origin's size when it answers.
    public var expectedBytes: Int64?
    /// "sha256:<hex>", "sha1:<hex>" or "md5:<hex>", checked before the file gets its name.
    public var checksum: String?
    /// Which of a master playlist's variants to take (`variant`).
    public var variant: String?
    /// An HLS download's playlist and progress, once read.
    public var hls: HLSInfo?
    /// A BitTorrent download's swarm and files.
    public var torrent: TorrentInfo?
    /// A torrent's files to fetch (`TorrentSelection`); nil: all.
    public var files: String?
    /// A torrent's seeding limits (`SeedLimits`): the share ratio and the seconds of seeding after which it stops;
    /// nil takes its category's, then the server's.
    public var seedRatio: Double?
    public var seedTime: Int64?
    /// A torrent's upload limit in bytes per second; nil: only the server's.
    public var uploadLimit: Int64?
    /// The proxy the download itself names (`"none"`: direct); nil leaves it to its category and the settings.
    public var proxy: ProxyChoice?
    /// The origin's user name and password (Basic or Digest), sent only to the URL's own host; never shown.
    public var username: String?
    public var password: String?
    /// Cookies for the origin: a Cookie header value or a Netscape cookies.txt; never shown.
    public var cookies: String?
    /// The SFTP server's host key fingerprint (`SHA256:...`) the download pins, instead of the known hosts.
    public var hostKey: String?
    /// Sent as User-Agent instead of `--user-agent`.
    public var userAgent: String?
    public var referer: String?
    public var error: DownloadError?
    /// Why the finished file is not in its completed folder (the folder is a link, the disk refused), nil when it
    /// moved or no move was tried; a later start tries again.
    public var moveError: String?
    /// How the last hook ended: its exit status (nil when killed or not started, then `hookError` says why), when.
    public var hookStatus: Int?
    public var hookError: String?
    public var hookAt: Date?

    public init() {}
}

/// `DownloadExtras` out of line: no box until a download sets one of them, then one its copies share until one of
/// them changes it (copy on write, as `Download` itself). Equal by content: a box whose fields went back to nil
/// equals no box.
@usableFromInline
struct ExtrasBox: Sendable, Equatable {
    @usableFromInline
    final class Storage: @unchecked Sendable {
        // Changed only through an `ExtrasBox` that holds it alone, as `DownloadStorage`.
        @exclusivity(unchecked) @usableFromInline var extras: DownloadExtras

        @usableFromInline
        init(_ extras: DownloadExtras) { self.extras = extras }
    }

    @usableFromInline var storage: Storage?

    @usableFromInline
    init() {}

    /// One field, read in place (no copy of the whole of them for one); the key path is not made while no box is.
    @inlinable
    func get<Value>(_ field: @autoclosure () -> KeyPath<DownloadExtras, Value?>) -> Value? {
        guard let storage else { return nil }
        return storage.extras[keyPath: field()]
    }

    /// Sets one field; nil where no box is allocates none (and makes no key path: a row's decoding sets each).
    @inlinable
    mutating func set<Value>(_ value: Value?, _ field: @autoclosure () -> WritableKeyPath<DownloadExtras, Value?>) {
        if storage == nil {
            if value == nil { return }
            storage = Storage(DownloadExtras())
        } else if !isKnownUniquelyReferenced(&storage) {
            storage = Storage(storage!.extras)
        }
        storage!.extras[keyPath: field()] = value
    }

    @usableFromInline
    static func == (a: ExtrasBox, b: ExtrasBox) -> Bool {
        a.storage === b.storage || (a.storage?.extras ?? .empty) == (b.storage?.extras ?? .empty)
    }
}
