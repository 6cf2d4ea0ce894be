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
    /// Loops of their own that transfers run on (`--threads` less one); 0 runs them on the engine's loop.
    public var transferLoops = 0
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
    /// BitTorrent: off unless enabled.
    public var bittorrent = BitTorrentConfig()

    public init(downloadRoot: String) { self.downloadRoot = downloadRoot }
}
