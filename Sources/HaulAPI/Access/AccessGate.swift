import FoundationEssentials
import HaulCore
import HaulLoop

/// Who may use the API, decided before any route runs.
public struct AccessPolicy: Sendable {
    /// When set, every route but `/healthz` and the dashboard's page (`/`, `/ui/*`) needs `Authorization: Bearer <token>` (event streams also accept
    /// `?access_token=`, since a browser's EventSource cannot set headers).
    public var token: String?
    /// Host names (without port, lower case) a request's `Host` may carry; nil accepts any. A server bound to
    /// loopback accepts only loopback names, so a web page whose name was rebound to 127.0.0.1 cannot reach it.
    public var allowedHosts: Set<String>?
    /// Origins (`scheme://host[:port]`, or a browser extension's `chrome-extension://ID`) that browsers may call
    /// the API from. Browser extensions' own origins are answered without being named (no web page can send
    /// one), and `Origin: null` only for calls that carry the token (any page can send that one).
    public var corsOrigins: Set<String> = []
    /// Wrong tokens a client address may present in a burst before it gets 429 ...
    public var failureBurst = 10
    /// ... and the seconds it then waits for each further attempt.
    public var failureRefill = 6.0

    public init(token: String? = nil, allowedHosts: Set<String>? = nil, corsOrigins: Set<String> = []) {
        self.token = token
        self.allowedHosts = allowedHosts
        self.corsOrigins = corsOrigins
    }

    /// A browser extension's own pages and workers (`chrome-extension://ID`, Firefox's `moz-extension://UUID`,
    /// Safari's `safari-web-extension://ID`): a web page cannot send such an Origin, so it is answered as the
    /// operator's own, the token still deciding what it may do.
    public static func isExtensionOrigin(_ origin: String) -> Bool {
        for scheme in ["chrome-extension://", "moz-extension://", "safari-web-extension://"]
        where ASCII.hasPrefixIgnoringCase(origin, scheme) {
            let rest = origin.utf8.dropFirst(scheme.utf8.count)
            return !rest.isEmpty
                && rest.allSatisfy { byte in
                    (byte >= 48 && byte <= 57) || (byte >= 65 && byte <= 90) || (byte >= 97 && byte <= 122)
                        || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
                }
        }
        return false
    }

    /// The names a loopback-bound server answers to.
    public static let loopbackHosts: Set<String> = ["localhost", "127.0.0.1", "::1", "[::1]"]
}

/// Applies an `AccessPolicy`: Host allowlist, CORS (preflight and response headers), bearer token with a per-address
/// limit on failed attempts. Confined to the loop thread.
final class AccessGate {
    private let policy: AccessPolicy
    private let tokenDigest: [UInt8]?
    let tickets: Tickets
    /// Failed attempts per client address, as a leaky bucket: the attempts still counted and when last updated.
    private var failures: [String: (count: Double, at: Double)] = [:]
    /// Held around `failures`, which the API's own loop reads too (`admitsServerOnAnyLoop`).
    private let failuresLock = Lock()
    /// The scoped token a presented secret is (`POST /tokens`), nil for none: the engine's store.
    var lookup: ((String) -> AccessToken?)?
    /// The scoped token with an id (a ticket names it), nil when it is gone or expired.
    var byID: ((String) -> AccessToken?)?
    private static let maxTrackedAddresses = 4096

    init(policy: AccessPolicy) {
        self.policy = policy
        tokenDigest = policy.token.map { Digest.sha256(Array($0.utf8)) }
        tickets = Tickets(token: policy.token)
    }

    /// The answer to a CORS preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`), complete with its
    /// CORS headers; nil for any other request.
    func preflight(_ request: HTTPRequest) -> HTTPResponse? {
        guard request.method == "OPTIONS", let origin = request.header("Origin"),
            request.header("Access-Control-Request-Method") != nil
        else { return nil }
        return preflight(origin: origin)
    }

    /// What the gate decides of a request: who it is from, or the response that ends it here.
    enum Decision {
        case admitted(Caller)
        case refused(HTTPResponse)
    }

    /// Who `request` is from, or the response that ends it here.
    func check(_ request: HTTPRequest, path: String, route: Route?, now: Double) -> Decision {
        switch refusal(request, path: path, route: route, now: now) {
        case .some(let response): return .refused(response)
        case .none: return .admitted(admitted ?? .server)
        }
    }

    /// The caller `refusal` admitted, when it was a scoped token.
    private var admitted: Caller?

    /// The response that ends `request` here, or nil to let it through (as `admitted`).
    private func refusal(_ request: HTTPRequest, path: String, route: Route?, now: Double) -> HTTPResponse? {
        admitted = nil
        lastProved = false
        if let problem = HostHeader.problem(in: request) {
            return Problem.badRequest(problem).response(instance: path)
        }
        if let allowed = policy.allowedHosts, let host = request.header("Host"),
            !allowed.contains(HostHeader(host)?.name ?? "")
        {
            return Problem(
                status: 403, slug: "host-not-allowed", title: "Host not allowed",
                detail: "this server does not answer to this Host"
            ).response(instance: path)
        }
        if let preflight = preflight(request) { return preflight }
        let origin = request.header("Origin")
        // A page from an origin not configured must not change anything, token or not (a form post needs no
        // preflight, and on loopback without a token nothing else would stop it).
        // A path or method no route serves counts as a change unless it is a plain read.
        let changesState =
            route?.handler(for: request.method)?.changesState
            ?? (request.method != "GET" && request.method != "HEAD")
        if let origin, !allowsOrigin(origin, request), changesState, route?.checksOriginItself != true {
            return Problem(
                status: 403, slug: "origin-not-allowed", title: "Origin not allowed",
                detail: origin == "null"
                    ? "requests from Origin null (a file, or a sandboxed frame) are "
                        + "answered only by a server with a token"
                    : "requests from \(origin) are not "
                        + "allowed; see --cors-origin"
            ).response(instance: path)
        }
        guard let tokenDigest, route?.access != .open else { return nil }
        let inURL = route?.access == .streamToken
        if inURL, AccessGate.bearer(request.header("Authorization")) == nil, let ticket = request.query["ticket"] {
            switch tickets.admits(ticket, path: path, now: Date().timeIntervalSince1970) {
            case .server?:
                lastProved = true
                return nil
            case .token(let id)?:
                // The ticket opens what its token sees, while the token stands.
                guard let token = byID?(id) else {
                    return unauthorized(path, "the token that asked for this ticket is removed or expired")
                }
                admitted = Caller(token)
                lastProved = true
                return nil
            case nil:
                // An expired ticket is no guess at the token: no count against the address.
                return unauthorized(path, "the ticket is expired or not for this path; ask POST /tickets for a new one")
            }
        }
        let presented =
            AccessGate.bearer(request.header("Authorization"))
            ?? (inURL ? request.query["access_token"] : nil)
        guard let presented else {
            return unauthorized(path, "this server needs 'Authorization: Bearer <token>'")
        }
        // Past the burst of wrong tokens an address may present, no secret it sends is looked at, the right one
        // neither: an answer that told a right guess from a wrong one would let guessing go on at full speed.
        let address = request.peer
        if let blocked = retryAfter(address, now: now) {
            return Problem(
                status: 429, slug: "too-many-attempts", title: "Too many failed attempts",
                detail: "too many wrong tokens from \(address); wait before trying again",
                headers: [("Retry-After", String(blocked))]
            ).response(instance: path)
        }
        if AccessGate.equalInConstantTime(Digest.sha256(Array(presented.utf8)), tokenDigest) {
            lastProved = true
            return nil
        }
        if let token = lookup?(presented) {
            // A scoped token: the operation must be within its scope.
            admitted = Caller(token)
            lastProved = true
            guard let operation = route?.handler(for: request.method)?.operation, let needed = operation.scope,
                needed > token.scope
            else { return nil }
            return Problem(
                status: 403, slug: "insufficient-scope", title: "Insufficient scope",
                detail: "the token '\(token.name)' has the \(token.scope.name) scope; \(operation.rawValue) "
                    + "needs \(needed.name)"
            ).response(instance: path)
        }
        recordFailure(address, now: now)
        return unauthorized(path, "the token is not right")
    }

    /// Whether `request` is a plain one from the server's own token that `check` would admit as it is: no Origin
    /// (no CORS to answer), a Host that is well-formed and allowed, and no token on the server, or the server's
    /// token from an address not blocked for wrong ones. Safe on any loop: it reads the policy, fixed at start, and
    /// the failures under their lock; it counts nothing, so anything else is left to `check`.
    func admitsServerOnAnyLoop(_ request: HTTPRequest, now: Double) -> Bool {
        admitsPlainOnAnyLoop(request)
            && admitsServerSecretOnAnyLoop(AccessGate.bearer(request.header("Authorization")), request.peer, now: now)
    }

    /// Whether `check` lets `request` through whatever its token: no Origin, a Host well-formed and allowed.
    func admitsPlainOnAnyLoop(_ request: HTTPRequest) -> Bool {
        guard request.header("Origin") == nil, HostHeader.problem(in: request) == nil else { return false }
        if let allowed = policy.allowedHosts, let host = request.header("Host"),
            !allowed.contains(HostHeader(host)?.name ?? "")
        {
            return false
        }
        return true
    }

    /// Whether `presented` (a bearer token, aria2's `token:`) is the server's token, from an address not blocked
    /// for wrong ones, or the server has none (as `admitsSecret` admits any then). Safe on any loop, counting
    /// nothing: a wrong or missing one is left to `admitsSecret` on the engine's loop.
    func admitsServerSecretOnAnyLoop(_ presented: String?, _ address: String, now: Double) -> Bool {
        guard let tokenDigest else { return true }
        guard let presented, retryAfter(address, now: now) == nil else { return false }
        return AccessGate.equalInConstantTime(Digest.sha256(Array(presented.utf8)), tokenDigest)
    }

    /// Whether a page of `origin` may change things here: one of --cors-origin, this server's own, a browser
    /// extension's, or `null` on a server with a token (whose calls must then carry it).
    func allowsOrigin(_ origin: String, _ request: HTTPRequest) -> Bool {
        policy.corsOrigins.contains(origin) || AccessGate.isSameOrigin(origin, request)
            || AccessPolicy.isExtensionOrigin(origin) || (origin == "null" && hasToken)
    }

    /// Whether a page of `origin` is one --cors-origin names.
    func allowsConfiguredOrigin(_ origin: String) -> Bool { policy.corsOrigins.contains(origin) }

    /// Whether `address` presented too many wrong secrets lately to have another looked at.
    func isBlocked(_ address: String, now: Double) -> Bool { retryAfter(address, now: now) != nil }

    /// Counts a wrong credential from `address` that is not a secret (qBittorrent's wrong user name).
    func countFailure(_ address: String, now: Double) { recordFailure(address, now: now) }

    /// Whether the server has a token at all.
    var hasToken: Bool { tokenDigest != nil }

    /// Who a secret presented inside a request (aria2's `token:SECRET` parameter) is: the server without a server
    /// token; with one, the server's token or a scoped token, wrong ones counted against the address as a wrong
    /// bearer token is (and refused while it is blocked).
    func admitsSecret(_ presented: String?, address: String, now: Double) -> Caller? {
        guard let tokenDigest else { return .server }
        guard let presented else { return nil }
        // Past the burst, nothing is evaluated: 1,000 guesses in one multicall get 10 looked at.
        guard retryAfter(address, now: now) == nil else { return nil }
        if AccessGate.equalInConstantTime(Digest.sha256(Array(presented.utf8)), tokenDigest) { return .server }
        if let token = lookup?(presented) { return Caller(token) }
        recordFailure(address, now: now)
        return nil
    }

    /// The CORS headers `response` gets for `request`: for a configured origin or a browser extension's; for
    /// `Origin: null` once the request proved the token (`proved`).
    func corsHeaders(for request: HTTPRequest, proved: Bool = false) -> [(name: String, value: String)] {
        guard let origin = request.header("Origin"),
            policy.corsOrigins.contains(origin) || AccessPolicy.isExtensionOrigin(origin)
                || (origin == "null" && proved)
        else { return [] }
        return corsHeaders(origin: origin)
    }

    func corsHeaders(origin: String) -> [(name: String, value: String)] {
        [
            ("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
            ("Access-Control-Expose-Headers", "ETag, Location, Retry-After"),
        ]
    }

    /// Whether the last request `check` admitted proved a secret (a token, a scoped token, a ticket).
    private(set) var lastProved = false

    private func preflight(origin: String) -> HTTPResponse {
        // A preflight carries no credentials: `null` is answered, and its real request must then carry the token.
        guard
            policy.corsOrigins.contains(origin) || AccessPolicy.isExtensionOrigin(origin)
                || (origin == "null" && hasToken)
        else {
            // No Access-Control-Allow-Origin: the browser refuses the real request.
            return HTTPResponse(status: 204, headers: [("Vary", "Origin")])
        }
        return HTTPResponse(
            status: 204,
            headers: [
                ("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
                ("Access-Control-Allow-Methods", "GET, HEAD, POST, PATCH, DELETE"),
                (
                    "Access-Control-Allow-Headers",
                    "Authorization, Content-Type, Idempotency-Key, If-None-Match, "
                        + "Last-Event-ID"
                ),
                ("Access-Control-Max-Age", "600"),
            ])
    }

    private func unauthorized(_ path: String, _ detail: String) -> HTTPResponse {
        Problem(
            status: 401, slug: "unauthorized", title: "Unauthorized", detail: detail,
            headers: [("WWW-Authenticate", "Bearer realm=\"haul\"")]
        ).response(instance: path)
    }

    /// Seconds until `address` may try again, or nil when it may now.
    private func retryAfter(_ address: String, now: Double) -> Int? {
        guard let entry = failuresLock.withLock({ failures[address] }) else { return nil }
        let count = max(0, entry.count - (now - entry.at) / policy.failureRefill)
        guard count + 1 > Double(policy.failureBurst) else { return nil }
        return max(1, Int(((count + 1 - Double(policy.failureBurst)) * policy.failureRefill).rounded(.up)))
    }

    private func recordFailure(_ address: String, now: Double) {
        failuresLock.withLock { recordFailureLocked(address, now: now) }
    }

    private func recordFailureLocked(_ address: String, now: Double) {
        let previous = failures[address].map { max(0, $0.count - (now - $0.at) / policy.failureRefill) } ?? 0
        if failures[address] == nil, failures.count >= AccessGate.maxTrackedAddresses {
            // Forget the addresses whose attempts have all leaked away; if none has, the oldest entry.
            failures = failures.filter { $0.value.count - (now - $0.value.at) / policy.failureRefill > 0 }
            if failures.count >= AccessGate.maxTrackedAddresses,
                let oldest = failures.min(by: { $0.value.at < $1.value.at })
            {
                failures.removeValue(forKey: oldest.key)
            }
        }
        failures[address] = (previous + 1, now)
    }

    /// The token of an `Authorization: Bearer <token>` header.
    static func bearer(_ header: String?) -> String? {
        guard let header, ASCII.hasPrefixIgnoringCase(header, "bearer ") else { return nil }
        let token = header.dropFirst(7).drop(while: { $0 == " " })
        return token.isEmpty ? nil : String(token)
    }

    /// A page served by this server itself (the dashboard): its origin names the host the request went to. A
    /// rebound name cannot pass for it, since its Host is checked against the allowed names first.
    static func isSameOrigin(_ origin: String, _ request: HTTPRequest) -> Bool {
        guard let host = request.header("Host") else { return false }
        return ASCII.equalsIgnoringCase(origin, "http://" + host) || ASCII.equalsIgnoringCase(origin, "https://" + host)
    }

    /// Compares two digests without stopping at the first difference, so timing tells nothing about the token.
    static func equalInConstantTime(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in 0..<a.count { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}
