import FoundationEssentials
import HaulLoop

/// One download as the engine and the store know it. Runtime-only figures (speed, open connections) live in
/// `DownloadSnapshot`. Its fields (`DownloadFields`) are shared by copies until one of them changes (copy on write,
/// as Array's elements are): a snapshot, a page of a list, an event and a write to the store take a reference, not
/// a copy of seventy fields with a retain for each string and array among them.
@dynamicMemberLookup
public struct Download: Sendable, Equatable {
    @usableFromInline var storage: DownloadStorage

    @inlinable
    public subscript<Value>(dynamicMember field: WritableKeyPath<DownloadFields, Value>) -> Value {
        get { storage.fields[keyPath: field] }
        _modify {
            if !isKnownUniquelyReferenced(&storage) { storage = DownloadStorage(storage.fields) }
            yield &storage.fields[keyPath: field]
        }
    }

    @inlinable
    public subscript<Value>(dynamicMember field: KeyPath<DownloadFields, Value>) -> Value {
        storage.fields[keyPath: field]
    }

    public init(
        id: String, sequence: Int64, url: String, headers: [HeaderField], requestedFilename: String?,
        directory: String, state: DownloadState, connections: Int, priority: Int, maxSpeed: Int64?,
        createdAt: Date
    ) {
        storage = DownloadStorage(
            DownloadFields(
                id: id, sequence: sequence, url: url, headers: headers, requestedFilename: requestedFilename,
                directory: directory, state: state, connections: connections, priority: priority,
                maxSpeed: maxSpeed, createdAt: createdAt))
    }

    /// A download of `fields` as read from the store.
    init(fields: DownloadFields) { storage = DownloadStorage(fields) }

    public static func == (a: Download, b: Download) -> Bool {
        a.storage === b.storage || a.storage.fields == b.storage.fields
    }

    /// Bytes in the part file.
    public var receivedBytes: Int64 { self.segments.reduce(0) { $0 + $1.received } }
    /// Bytes the journal vouches for.
    public var durableBytes: Int64 { self.journal.reduce(0) { $0 + $1.received } }

    /// Whether an interrupted transfer can continue where it stopped: ranges, a known size, and a validator.
    public var resumable: Bool { self.acceptsRanges && self.totalBytes != nil && validator != nil }

    /// Whether a transfer of unknown size (an HLS playlist's output) can continue where it stopped, on its one
    /// connection: ranges from an offset and a strong validator.
    public var streamResumable: Bool { self.totalBytes == nil && self.acceptsRanges && self.etag != nil }

    /// What waiting downloads (queued and paused) of one priority start in order of, lowest first: creation order
    /// spaced `QueueOrder.step` apart, so a download moved between two others takes a number between theirs.
    public var queueOrder: Int64 { self.queueRank ?? self.sequence &* QueueOrder.step }

    /// Whether it waits for a slot, in the queue a client can reorder: queued, or paused (it keeps its place).
    public var isWaiting: Bool { self.state == .queued || self.state == .paused }

    /// What a ranged request sends as `If-Range`: the strong ETag, else Last-Modified.
    public var validator: String? { self.etag ?? self.lastModified }

    /// The name people see: the file's, else the one asked for, else the URL's last path segment, else the URL.
    public var displayName: String {
        if let name = self.filename ?? self.requestedFilename { return name }
        if self.kind == .torrent { return self.torrent?.name ?? Magnet.displayName(self.url) ?? "torrent" }
        let path = self.url.split(separator: "?", maxSplits: 1).first.map(String.init) ?? self.url
        let segment = path.split(separator: "/").last.map(String.init) ?? self.url
        return segment.contains(":") ? self.url : segment
    }

    /// Whether `text` (lowercased) is in the name or the URL (as shown: without its password), without case.
    public func matches(search text: String) -> Bool {
        // A name taken from the URL is in the URL: searched there once, as shown (without its password).
        let named = self.filename ?? self.requestedFilename ?? (self.kind == .torrent ? displayName : nil)
        return named?.containsIgnoringCase(text) == true || Redact.url(self.url).containsIgnoringCase(text)
    }

    /// The path of the file relative to the download root, once a name is chosen.
    public var relativePath: String? {
        self.filename.map { fileDirectory.isEmpty ? $0 : fileDirectory + "/" + $0 }
    }

    /// The folder the file is in: its download folder, or its completed folder once moved there.
    public var fileDirectory: String { self.moved ? self.completedDirectory ?? self.directory : self.directory }
}

/// A request header given by the client, e.g. a cookie or an authorization token.
public struct HeaderField: Sendable, Equatable {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// A download plus what only the running engine knows.
public struct DownloadSnapshot: Sendable {
    public var download: Download
    /// Bytes per second from each mirror now.
    public var mirrorSpeeds: [Double] = []
    /// Bytes per second, smoothed.
    public var speed: Double
    public var activeConnections: Int
    /// When a download waiting to try again does (nil while anything of it is under way, or it waits for nothing).
    public var nextAttemptAt: Date?
    /// The failure that made it try again, until it completes or a client resumes it.
    public var lastError: DownloadError?

    public var etaSeconds: Double? {
        // A playlist's output has its size estimated as its segments arrive.
        guard let total = download.totalBytes ?? download.hls?.size, speed > 0, download.state == .downloading
        else { return nil }
        return Double(max(0, total - download.receivedBytes)) / speed
    }
}

/// What a download's source is. `auto` is a file until its first answer shows a playlist.
public enum DownloadKind: String, Sendable, CaseIterable {
    case auto, file, hls, torrent

    /// An HLS playlist's segments make the file.
    public var isPlaylist: Bool { self == .hls }

    /// What the resource shows: `hls`, `torrent`, else `file`.
    public var shown: String { self == .auto ? "file" : rawValue }

    /// Whether a URL is a magnet link (BitTorrent).
    public static func isMagnet(_ url: String) -> Bool {
        url.utf8.count > 7 && ASCII.equalsIgnoringCase(String(url.prefix(7)), "magnet:")
    }

    /// Whether a URL fetched over HTTP or FTP names a .torrent file by its path, whatever its query.
    public static func pathNamesTorrent(_ url: String) -> Bool {
        let components = URLComponents(string: url)
        return ["http", "https", "ftp", "ftps"].contains(components?.scheme?.lowercased() ?? "")
            && (components?.path ?? "").lowercased().hasSuffix(".torrent")
    }

    /// Whether a URL names a playlist by its path (`.m3u8`, `.m3u`), whatever its query.
    public static func pathNamesPlaylist(_ url: String) -> Bool {
        let path = (URLComponents(string: url)?.path ?? "").lowercased()
        return path.hasSuffix(".m3u8")
    }

    /// Whether an answer may be a playlist whatever its type says: none, text or bytes of no type, small enough.
    public static func mayBePlaylist(_ response: TransferResponse) -> Bool {
        if let length = response.header("content-length").flatMap({ Int64($0) }), length > HLSParser.maxBytes {
            return false
        }
        guard let type = response.header("content-type")?.split(separator: ";").first?.trimmingSpaces().lowercased()
        else { return true }
        return ["", "text/plain", "application/octet-stream", "binary/octet-stream", "application/x-unknown"]
            .contains(type)
    }

    /// Whether an answer's Content-Type is a playlist's.
    public static func isPlaylistType(_ contentType: String?) -> Bool {
        guard let type = contentType?.split(separator: ";").first?.trimmingSpaces().lowercased() else { return false }
        return ["application/vnd.apple.mpegurl", "application/x-mpegurl", "audio/mpegurl", "audio/x-mpegurl"]
            .contains(type)
    }
}

/// Why a download failed: a stable machine code and a message for people.
public struct DownloadError: Error, Sendable, Equatable {
    public var code: ErrorCode
    public var message: String
    /// Worth another attempt (connection problems, 5xx, 429) as opposed to permanent (404, disk full).
    public var retryable: Bool
    /// Seconds the server asked us to wait (Retry-After).
    public var retryAfter: Double?

    public init(_ code: ErrorCode, _ message: String, retryable: Bool = false) {
        self.code = code
        self.message = message
        self.retryable = retryable
    }
}

/// Stable error codes; clients switch on these, so they never change meaning.
public struct ErrorCode: RawRepresentable, Hashable, Sendable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let dnsFailed = ErrorCode(rawValue: "dns_failed")
    /// BitTorrent is off on this server (`--bittorrent` turns it on).
    public static let bittorrentDisabled = ErrorCode(rawValue: "bittorrent_disabled")
    /// A torrent's file names would leave its folder or collide (see `TorrentLayout`), or it holds links.
    public static let torrentUnsafe = ErrorCode(rawValue: "torrent_unsafe")
    /// libtorrent reported an error for the torrent (its files, its metadata).
    public static let torrentFailed = ErrorCode(rawValue: "torrent_failed")
    public static let connectFailed = ErrorCode(rawValue: "connect_failed")
    public static let timeout = ErrorCode(rawValue: "timeout")
    public static let tlsFailed = ErrorCode(rawValue: "tls_failed")
    public static let tooManyRedirects = ErrorCode(rawValue: "too_many_redirects")
    public static let connectionCut = ErrorCode(rawValue: "connection_cut")
    public static let networkError = ErrorCode(rawValue: "network_error")
    public static let writeFailed = ErrorCode(rawValue: "write_failed")
    public static let diskFull = ErrorCode(rawValue: "disk_full")
    /// The file would leave less than `--min-free-space` free: refused before a block is reserved.
    public static let insufficientSpace = ErrorCode(rawValue: "insufficient_space")
    /// The token that added it may hold no more bytes (its `quota_bytes`).
    public static let quotaExceeded = ErrorCode(rawValue: "quota_exceeded")
    /// The file is larger than `--max-file-size`.
    public static let fileTooLarge = ErrorCode(rawValue: "file_too_large")
    public static let sizeMismatch = ErrorCode(rawValue: "size_mismatch")
    public static let rangeMismatch = ErrorCode(rawValue: "range_mismatch")
    public static let remoteChanged = ErrorCode(rawValue: "remote_changed")
    public static let checksumMismatch = ErrorCode(rawValue: "checksum_mismatch")
    public static let internalError = ErrorCode(rawValue: "internal_error")
    /// `--deny-private-networks` refused every address of the host (or of a redirect's host).
    public static let blockedAddress = ErrorCode(rawValue: "blocked_address")
    /// The origin's response was malformed or its headers too large.
    public static let badResponse = ErrorCode(rawValue: "bad_response")
    /// The origin refused the credentials it was given (401 after sending them).
    public static let authFailed = ErrorCode(rawValue: "auth_failed")
    /// The proxy could not be reached (retried).
    public static let proxyUnreachable = ErrorCode(rawValue: "proxy_unreachable")
    /// The proxy refused its credentials (407, SOCKS authentication).
    public static let proxyAuthFailed = ErrorCode(rawValue: "proxy_auth_failed")
    /// The proxy would not reach the origin (a CONNECT refused, a SOCKS failure).
    public static let proxyRefused = ErrorCode(rawValue: "proxy_refused")
    /// A redirect led somewhere other than http or https.
    public static let unsupportedScheme = ErrorCode(rawValue: "unsupported_scheme")
    /// The FTP or SFTP server refused the login.
    public static let loginFailed = ErrorCode(rawValue: "login_failed")
    /// The SFTP server's host key is in neither `--ssh-known-hosts` nor the download's `host_key`.
    public static let hostKeyUnknown = ErrorCode(rawValue: "host_key_unknown")
    /// The SFTP server's host key is not the one known for it.
    public static let hostKeyMismatch = ErrorCode(rawValue: "host_key_mismatch")

    /// `http_404`, `http_503`, ...: the origin answered with this status.
    public static func http(_ status: Int) -> ErrorCode { ErrorCode(rawValue: "http_\(status)") }

    /// `ftp_550`, ...: the FTP server refused with this reply code.
    public static func ftp(_ code: Int) -> ErrorCode { ErrorCode(rawValue: "ftp_\(code)") }
}

/// The orders a list can be sorted in (`?sort=`).
public enum DownloadOrder: String, Sendable, CaseIterable {
    case created, name, size, progress, speed
    /// The order downloads start in: running ones, then waiting ones by priority and place, then finished ones.
    case queue
}

/// The box `Download`'s fields live in: changed only through a `Download` that holds it alone.
@usableFromInline
final class DownloadStorage: @unchecked Sendable {
    // Accessed only through `Download`, whose value semantics already rule out overlapping access: the dynamic
    // exclusivity check of a class property (swift_beginAccess) was 3% of a list.
    @exclusivity(unchecked) @usableFromInline var fields: DownloadFields

    @usableFromInline
    init(_ fields: DownloadFields) { self.fields = fields }
}
