import FoundationEssentials
import HaulLoop

/// Settings of the download engine.
public struct EngineConfig: Sendable {
    /// Absolute path under which every download lands.
    public var downloadRoot: String
    /// Where categories' completed folders are (`--completed-root`); nil: under the download root.
    public var completedRoot: String?
    /// A test's crash point (`HAUL_CRASH_AT`, e.g. `move-copied`): the process kills itself there with SIGKILL.
    public var crashAt: String?
    /// The operator's programs run after a download completes or fails (the config file's `on-complete`,
    /// `on-failed`).
    public var hooks = HookConfig()
    public var maxActive = 5
    public var defaultConnections = 8
    /// Attempts per download before it fails (the first one included).
    public var maxAttempts = 5
    /// First retry delay in seconds; doubles with each attempt up to `retryMaxDelay`.
    public var retryBaseDelay: Double = 1
    /// A webhook delivery's first retry delay, doubling each time (its own schedule, never under a second).
    public var webhookRetryWait: Double = 5
    public var retryMaxDelay: Double = 60
    /// How often progress is written to the store and speeds are sampled.
    public var progressInterval: Double = 1
    public var connectTimeout: Double = 30
    /// A transfer that receives nothing for this many seconds is cut and retried.
    public var stallTimeout = 60
    /// A connection slower than this (bytes/s) for `stallTimeout` seconds is closed and its range handed back;
    /// 0 turns the check off.
    public var lowestSpeed: Int64 = 0
    /// No segment is split below this size.
    public var minSplitSize: Int64 = 4 << 20
    /// Connections to one host over all downloads.
    public var maxConnectionsPerHost = 16
    /// Bytes per second over all downloads, nil for unlimited.
    public var maxSpeed: Int64?
    /// When set, origins may only be at addresses it allows (`--deny-private-networks`).
    public var addressPolicy: AddressPolicy?
    /// The proxy of downloads whose own and whose category's name none: `--proxy`, or the settings' `proxy`.
    public var proxy: ProxyChoice?
    /// Whether the operator named `proxy` (see `ServerSettings.proxyTrusted`).
    public var proxyTrusted = true
    /// With `--proxy-from-env`, when `proxy` is nil: the environment's proxy per URL scheme (`http_proxy`,
    /// `https_proxy`), `*` for `all_proxy`.
    public var environmentProxies: [String: ProxyServer] = [:]
    /// Hosts reached directly whatever proxy applies (`--no-proxy`, and `no_proxy` with `--proxy-from-env`).
    public var noProxy = NoProxy()
    /// The User-Agent of downloads that name none (`--user-agent`).
    public var userAgent = "haul/\(HaulVersion.current)"
    /// A .netrc file with origins' credentials (`--netrc-file`), for downloads that carry none.
    public var netrcFile: String?
    /// The private key SFTP logs in with (`--ssh-key`) and the known hosts its servers are checked against.
    public var sshKey: String?
    public var sshKnownHosts: String?
    /// The proxy webhook deliveries go through (`--webhook-proxy`), nil for none.
    public var webhookProxy: ProxyServer?
    /// The free space kept and the largest file accepted.
    public var space = SpacePolicy()
    /// This node's name in a store several nodes share: what its claims carry.
    public var node = "haul"
    /// How long a claim holds without renewal (seconds): after a node dies, the others take its downloads over
    /// within about this long. Renewed every third of it.
    public var lease: Double = 10
    /// How often a node of a shared store looks for downloads to claim.
    public var claimInterval: Double = 1

    public init(downloadRoot: String) { self.downloadRoot = downloadRoot }
}

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
              components.user != nil || components.password != nil else { return }
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

/// What the engine tells its observer (the event hub) after each change.
public enum EngineChange: Sendable, Equatable {
    case created(String)
    /// Any field changed; `stateChanged` when the state did.
    case updated(String, stateChanged: Bool)
    /// Removed (or gone on another node) in `state`, its last.
    case removed(String, last: DownloadState)
}

public enum EngineError: Error, Equatable {
    case notFound(String)
    /// The change is impossible in the download's current state.
    case conflict(String)
    case storage(String)
    /// The file cannot be stored here (its known size does not fit, or is over the largest file accepted).
    case insufficientStorage(DownloadError)
    /// The server holds as many downloads as it may.
    case tooMany
    /// One of an all-or-nothing batch that was fine, not added because another was refused.
    case notAdded
    /// What was asked for existed and is gone (a finished file deleted by hand).
    case gone(String)
    /// A field that is fine alone but not with what the server holds (a directory too deep under its category's).
    case invalid(field: String, message: String)
    /// No such thing (a category, a webhook): the message names it.
    case missing(String)
    /// The server keeps at most `limit` of `kind` ("categories", "webhooks").
    case full(kind: String, limit: Int)
    /// The caller's token may see the download but not change it: another token added it.
    case notOwner(String)
}

/// Keeping secrets out of logs and API answers.
public enum Redact {
    /// The URL with any user name and password replaced.
    public static func url(_ url: String) -> String {
        // Credentials need an "@"; most URLs have none and skip the parse.
        guard url.utf8.contains(UInt8(ascii: "@")), var components = URLComponents(string: url), components.user != nil || components.password != nil
        else { return url }
        components.user = "redacted"
        components.password = nil
        return components.string ?? url
    }
}

/// What `Engine.totals()` counts.
public struct EngineTotals: Sendable {
    public var downloads = 0
    public var byState: [DownloadState: Int] = [:]
    public var receivedBytes: Int64 = 0
    public var speed = 0.0
    public var activeConnections = 0

    public func count(_ state: DownloadState) -> Int { byState[state] ?? 0 }
    public var active: Int { byState.filter { $0.key.isActive }.values.reduce(0, +) }
}

/// The operator's hooks: argv lists from the config file only (an API caller never names a program to run).
public struct HookConfig: Sendable {
    public var onComplete: [String]?
    public var onFailed: [String]?
    /// Seconds before a hook is killed.
    public var timeout = 60.0
    /// Hooks running at once; more wait their turn.
    public var concurrency = 4

    public init() {}

    public var isEmpty: Bool { onComplete == nil && onFailed == nil }

    /// The program for a download now in `state`.
    public func command(for state: DownloadState) -> [String]? {
        switch state {
        case .completed: return onComplete
        case .failed: return onFailed
        default: return nil
        }
    }
}
