/// What a caller may be allowed to do. Each scope holds those before it: `manage` may `add`, `add` may `read`.
/// The server's own token (`--token`) holds all four; tokens made with `POST /tokens` one each.
public enum Scope: Int, Comparable, CaseIterable, Sendable {
    /// Look: downloads, events, files, totals, settings, categories, metrics.
    case read
    /// And add downloads, and pause, resume, change and remove them.
    case add
    /// And act on every download in bulk, change settings and categories.
    case manage
    /// And webhooks (their secrets sign what Haul sends), and what runs the server.
    case admin

    public var name: String { ["read", "add", "manage", "admin"][rawValue] }

    public static func < (a: Scope, b: Scope) -> Bool { a.rawValue < b.rawValue }
}

/// Everything Haul does for a caller, whatever the wire format: REST routes now, the aria2 JSON-RPC front next, each
/// maps its calls to these. An operation says once whether it changes state (a browser from an origin not allowed
/// may not call it) and the scope it needs, so a front cannot give one operation two sets of rules. A test checks
/// that every REST route serves exactly one operation with the side effect it declares.
public enum Operation: String, CaseIterable, Sendable {
    case listDownloads = "downloads.list"
    /// One download, or a batch.
    case addDownloads = "downloads.add"
    case getDownload = "downloads.get"
    /// Its state (pause, resume), priority, speed limit or connections.
    case changeDownload = "downloads.change"
    case removeDownload = "downloads.remove"
    /// Pause, resume or remove the downloads a list of ids names.
    case actOnDownloads = "downloads.act"
    /// Remove every download of a category or a state.
    case removeDownloads = "downloads.removeMatching"
    case readFile = "downloads.file"
    case followEvents = "events.follow"
    /// A short-lived ticket that opens one file or stream path.
    case issueTicket = "tickets.issue"
    case stats = "stats.get"
    case metrics = "metrics.get"
    case getSettings = "settings.get"
    case changeSettings = "settings.change"
    case listCategories = "categories.list"
    case getCategory = "categories.get"
    case putCategory = "categories.put"
    case removeCategory = "categories.remove"
    case listWebhooks = "webhooks.list"
    case addWebhook = "webhooks.add"
    case getWebhook = "webhooks.get"
    case removeWebhook = "webhooks.remove"
    case listDeliveries = "webhooks.deliveries"
    /// The API's own description.
    case describeAPI = "server.describe"
    /// Liveness and readiness, for anyone (a load balancer holds no token).
    case health = "server.health"
    /// The dashboard's page and assets: no data in them, for anyone.
    case dashboard = "server.dashboard"
    /// Which version of Haul answers.
    case version = "server.version"
    /// Stop the server (when the operator allows it: `--rpc-allow-shutdown`).
    case shutdown = "server.shutdown"
    case listTokens = "tokens.list"
    case addToken = "tokens.add"
    case removeToken = "tokens.remove"
    /// The caller's own token: its scope, root and quota (the dashboard hides what the scope cannot use).
    case whoAmI = "tokens.self"
    /// aria2's JSON-RPC by POST (or WebSocket): each method is one of the operations above, its `token:`
    /// parameter checked by the front itself, so the route needs no bearer token.
    case rpc = "rpc.call"
    /// aria2's JSON-RPC by GET (and JSONP): methods that only read, unless the call carries the server's token.
    case rpcRead = "rpc.read"
    /// qBittorrent's Web API v2 by POST: each call is one of the operations above, its session (the `SID` cookie
    /// of `auth/login`) checked by the front itself.
    case qbittorrent = "qbittorrent.call"
    /// qBittorrent's Web API v2 by GET: calls that only read.
    case qbittorrentRead = "qbittorrent.read"

    public var changesState: Bool {
        switch self {
        case .addDownloads, .changeDownload, .removeDownload, .actOnDownloads, .removeDownloads, .issueTicket,
            .changeSettings, .putCategory, .removeCategory, .addWebhook, .removeWebhook, .rpc, .addToken, .removeToken,
            .shutdown, .qbittorrent:
            return true
        case .listDownloads, .getDownload, .readFile, .followEvents, .stats, .metrics, .getSettings, .listCategories,
            .getCategory, .listWebhooks, .getWebhook, .listDeliveries, .describeAPI, .health, .dashboard, .rpcRead,
            .listTokens, .whoAmI, .version, .qbittorrentRead:
            return false
        }
    }

    /// The scope a caller needs; nil for what anyone may call.
    public var scope: Scope? {
        switch self {
        case .health, .dashboard, .rpc, .rpcRead, .qbittorrent, .qbittorrentRead: return nil
        case .listDownloads, .getDownload, .readFile, .followEvents, .issueTicket, .stats, .metrics, .getSettings,
            .listCategories, .getCategory, .describeAPI, .whoAmI, .version:
            return .read
        case .addDownloads, .changeDownload, .removeDownload, .actOnDownloads: return .add
        case .removeDownloads, .changeSettings, .putCategory, .removeCategory: return .manage
        case .listWebhooks, .addWebhook, .getWebhook, .removeWebhook, .listDeliveries, .listTokens, .addToken,
            .removeToken, .shutdown:
            return .admin
        }
    }
}
