import Glibc

/// What to fetch: one request made by one curl easy handle, under an outbound policy. Callers do not build these
/// field by field: an origin dialect turns a fetch of a download into one (HaulCore's `Outbound`).
public struct TransferRequest: Sendable {
    public enum Method: Sendable { case get, head }

    public var url: String
    public var method: Method = .get
    /// Extra request headers (`Range` and `If-Range` are set through `range` and `ifRange`).
    public var headers: [(String, String)] = []
    /// First byte wanted, and the last one (inclusive) or nil for "to the end".
    public var range: (start: Int64, end: Int64?)?
    /// Validator sent as `If-Range`: a strong ETag or an HTTP date.
    public var ifRange: String?
    /// The origin's user name and password (Basic or Digest, as the origin asks): sent only to the host of the
    /// URL first asked, never after a redirect to another (curl's rule, and Haul's when it follows one hop at a
    /// time).
    public var credentials: (user: String, password: String)?
    /// Authenticate with Digest instead of sending Basic at once: set when the origin's 401 asked for Digest (the
    /// transfer then starts again so).
    public var digestAuth = false
    /// The download's cookies, shared with its other transfers; nil for no cookie engine.
    public var cookieJar: CookieJar?
    /// The SFTP server's host key as the download pins it, `SHA256:` and the key's base64 digest (as OpenSSH prints
    /// it): then only that key is let in, whatever the known hosts say.
    public var hostKey: String?
    public var referer: String?
    /// A body makes the request a POST of these bytes (set `Content-Type` in `headers`).
    public var body: [UInt8]?
    public var policy: OutboundPolicy
    /// How its kind of origin is spoken to (the dialect's); a plain HTTP request's by default.
    public var profile = TransferProfile()

    public init(url: String, policy: OutboundPolicy = OutboundPolicy()) {
        self.url = url
        self.policy = policy
    }
}

/// Why a transfer could not be set up.
public enum TransferError: Error, CustomStringConvertible {
    /// A request header breaks RFC 9110's field grammar (a control character, a line break, a bad name).
    case invalidHeader(String)
    case outOfMemory
    case curl(String)

    public var description: String {
        switch self {
        case .invalidHeader(let name): return "the request header '\(name)' is not a valid HTTP field"
        case .outOfMemory: return "out of memory"
        case .curl(let message): return message
        }
    }
}

/// The status line and headers of the response a transfer ended up with (after redirects).
public struct TransferResponse: Sendable, Equatable {
    public var status: Int
    /// Header names lower-cased, in the order received.
    public var headers: [(name: String, value: String)]
    public var effectiveURL: String
    /// The answer is the proxy's own refusal of its credentials, not the origin's: a 407, or a 401 that no proxy
    /// relayed (no `Via`) to a request carrying proxy credentials (tinyproxy answers a wrong password so).
    public var proxyRefusedCredentials = false
    /// The request carried the origin's credentials (a user name and password, or a .netrc entry may have
    /// applied): a 401 then means they were refused.
    public var sentCredentials = false

    public init(status: Int, headers: [(name: String, value: String)], effectiveURL: String) {
        self.status = status
        self.headers = headers
        self.effectiveURL = effectiveURL
    }

    /// The last value of the header `name` (case-insensitive; the names held are lower case already).
    public func header(_ name: String) -> String? {
        headers.last(where: { ASCII.equalsIgnoringCase($0.name, name) })?.value
    }

    public static func == (a: TransferResponse, b: TransferResponse) -> Bool {
        a.status == b.status && a.effectiveURL == b.effectiveURL
            && a.headers.map(\.name) == b.headers.map(\.name) && a.headers.map(\.value) == b.headers.map(\.value)
    }
}

/// Why a transfer ended without success, classified from curl's result code.
public enum TransferFailure: Sendable, Equatable {
    case dns, connect, timeout, tls, tooManyRedirects
    /// The server closed the connection before the whole body arrived.
    case cutOff
    /// Stopped by our own `onResponse` or `onData` returning false.
    case aborted
    case network
    /// Every address the host resolved to was refused by the request's `AddressPolicy`.
    case blockedAddress
    /// The proxy could not be reached (its name did not resolve, it refused the connection).
    case proxyUnreachable
    /// The proxy refused its credentials (HTTP 407, a SOCKS authentication failure).
    case proxyAuthFailed
    /// The proxy would not reach the origin: a CONNECT answered with an error, a SOCKS failure reply. `retryable`
    /// when it may pass (a 5xx, the proxy's own network failing), not for a denial.
    case proxyRefused(retryable: Bool)
    /// A redirect led to a scheme other than http and https.
    case unsupportedScheme
    /// Not a usable HTTP response (malformed, or headers beyond the limit).
    case badResponse
    /// The FTP or SFTP server refused the login.
    case loginFailed
    /// The FTP server refused the file with this reply code (550: not there, or not allowed).
    case refused(code: Int)
    /// The FTP server cannot start a transfer where asked (REST refused): ranges do not work there.
    case rangesRefused
    /// The FTP server has no session to spare for this address (421).
    case tooManyConnections
    /// The SFTP server's host key is not known (`fingerprint`: `SHA256:...`, for the operator to check and pin).
    case hostKeyUnknown(fingerprint: String)
    /// The SFTP server's host key is not the one known or pinned for it.
    case hostKeyMismatch(fingerprint: String)
    /// What the source sent cannot be used by its kind of download (a playlist refused, a segment's answer), with the
    /// stable error code to report and whether another attempt may pass.
    case source(code: String, retryable: Bool)
    case other
}

/// How a transfer ended.
public struct TransferResult: Sendable {
    /// nil when curl reported success.
    public var failure: TransferFailure?
    /// curl's own words, for logs and error messages.
    public var message: String
    /// The response, if headers arrived.
    public var response: TransferResponse?
    public var bodyBytes: Int64

    public init(failure: TransferFailure?, message: String = "", response: TransferResponse?, bodyBytes: Int64 = 0) {
        self.failure = failure
        self.message = message
        self.response = response
        self.bodyBytes = bodyBytes
    }
}

/// What `onData` wants done with a chunk.
public enum ChunkDecision: Sendable {
    /// Taken: go on.
    case consumed
    /// Not taken: hold the transfer until `resume()`, then offer the same bytes again (speed limits).
    case pause
    /// Stop the transfer (it ends with `.aborted`).
    case abort
}

/// A view of body bytes handed to `onData`; valid only during that call.
public struct TransferChunk {
    let bytes: UnsafeRawBufferPointer
    public var count: Int { bytes.count }

    /// A view of `bytes`, valid as long as they are.
    public init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// Where these bytes first differ from `other`'s (its end counts as a difference), or nil when `other` begins
    /// with all of them.
    public func firstDifference(from other: [UInt8]) -> Int? {
        let common = min(bytes.count, other.count)
        for index in 0..<common where bytes[index] != other[index] { return index }
        return other.count < bytes.count ? other.count : nil
    }

    /// Appends these bytes to `buffer`.
    public func append(to buffer: inout [UInt8]) { buffer.append(contentsOf: bytes) }

    /// The first `count` bytes.
    public func prefix(_ count: Int) -> TransferChunk {
        TransferChunk(bytes: UnsafeRawBufferPointer(rebasing: bytes.prefix(count)))
    }
}
