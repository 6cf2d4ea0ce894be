import FoundationEssentials
import HaulCore
import HaulLoop

/// The qBittorrent-compatible front's settings.
public struct QBittorrentConfig: Sendable {
    /// The user name `auth/login` takes; the password is Haul's token (the server's or a scoped one).
    public var username = "admin"
    /// Lists HTTP, FTP and HLS downloads too, with a key made from their id (clients expect torrents).
    public var listAll = false

    public init() {}
}

/// qBittorrent's Web API v2 (as 4.5 answers it) over Haul's operations: what Sonarr, Radarr, Lidarr, Prowlarr,
/// autobrr and qbittorrent-api call, with qBittorrent's fields, states, plain-text answers and status codes, and
/// Haul's rules (the gate's scopes per call, a token's root and quota, the option table's checks). Transport-free:
/// it takes a request and gives the response. Confined to the loop thread.
///
/// In parts: `QBitForm` (the parameters: query, form or multipart), the method table (`QBitMethod`: a path, its
/// operation, its answer), `QBitTorrent` (a download as a torrent), `QBitSync` (`sync/maindata`'s deltas); here,
/// sessions (the `SID` cookie `auth/login` sets), the CSRF check and one access path.
final class QBittorrentAPI {
    /// The operations for the server's own token.
    let base: Operations
    let gate: AccessGate
    let config: QBittorrentConfig

    struct Session {
        var caller: Caller
        var lastUsed: Double
        /// What `sync/maindata` last sent this session.
        var sync = QBitSync()
    }

    /// Logged-in sessions by SID.
    private var sessions: [String: Session] = [:]
    /// The server's own token's sessions, for the API's own loop (`QBitBeside`).
    let serverSessions = QBitServerSessions()
    /// What callers without a session (a server without a token, or a bearer token) were last sent by
    /// `sync/maindata`, by who they are.
    private var anonymousSync: [String: QBitSync] = [:]
    /// Tags made by `torrents/createTags` that no download holds yet (the others are the downloads' own).
    var createdTags: Set<String> = []
    /// A session unused this long is forgotten (qBittorrent's default session timeout).
    static let sessionTimeout = 3600.0
    /// The most sessions held; past it the least recently used is forgotten.
    static let maxSessions = 4096

    init(operations: Operations, gate: AccessGate, config: QBittorrentConfig) {
        base = operations
        self.gate = gate
        self.config = config
    }

    var root: String { base.config.downloadRoot }

    /// Answers a call to `/api/v2/AREA/NAME`.
    func answer(_ request: HTTPRequest, area: String, name: String) -> HTTPResponse {
        do throws(QBitError) {
            return try respond(request, path: area + "/" + name)
        } catch {
            return QBittorrentAPI.text(error.status, error.message)
        }
    }

    private func respond(_ request: HTTPRequest, path: String) throws(QBitError) -> HTTPResponse {
        // qBittorrent's CSRF protection: a page of another site (its Origin or Referer) gets 401. The *arr
        // applications and scripts send neither.
        guard !fromAnotherSite(request) else { throw QBitError(401, "Unauthorized") }
        guard let method = QBittorrentAPI.methods[path] else { throw QBitError.notFound }
        if method.operation.changesState || path == "auth/login" || path == "auth/logout",
            request.method != "POST"
        {
            throw QBitError(405, "Method Not Allowed")
        }
        let now = ProcessInfo.processInfo.systemUptime
        let form = try QBitForm(request)
        if path == "auth/login" { return try login(request, form: form, now: now) }
        let sid = QBittorrentAPI.cookie("SID", in: request)
        guard let caller = caller(of: request, sid: sid, now: now) else { throw QBitError.forbidden }
        if path == "auth/logout" {
            if let sid {
                sessions[sid] = nil
                serverSessions.end(sid)
            }
            return QBittorrentAPI.text(200, "")
        }
        if let needed = method.operation.scope, needed > caller.scope {
            throw QBitError(
                403, "the token has the \(caller.scope.name) scope; \(path) needs \(needed.name)")
        }
        let call = QBitCall(
            path: path, form: form, request: request, operations: base.acting(as: caller),
            syncKey: sid.map { "sid:" + $0 } ?? "caller:" + (caller.token?.id ?? ""))
        switch try method.answer(self, call) {
        case .text(let text): return QBittorrentAPI.text(200, text)
        case .json(let value):
            return QBittorrentAPI.json(value)
        case .listing(let value, let ids):
            let response = QBittorrentAPI.json(value)
            // While every download it lists rests, the API's own loop answers the same GET with it (`QBitBeside`).
            if request.method == "GET" { call.operations.publishPage(response, for: request.target, showing: ids) }
            return response
        }
    }

    /// Who a call is from: its session's caller, a bearer token's, or anyone on a server without a token. A
    /// session whose token was revoked or expired ends.
    private func caller(of request: HTTPRequest, sid: String?, now: Double) -> Caller? {
        if let sid, let session = sessions[sid] {
            if now - session.lastUsed > QBittorrentAPI.sessionTimeout {
                sessions[sid] = nil
                serverSessions.end(sid)
            } else if let id = session.caller.token?.id, gate.byID?(id) == nil {
                sessions[sid] = nil
            } else {
                used(sid, at: now)
                return session.caller
            }
        }
        if let bearer = AccessGate.bearer(request.header("Authorization")) {
            return gate.admitsSecret(bearer, address: request.peer, now: now)
        }
        return gate.hasToken ? nil : .server
    }

    /// `auth/login`: the configured user name and Haul's token as the password start a session (the `SID`
    /// cookie). A wrong one answers `Fails.` and counts against the address as a wrong bearer token does; past
    /// the burst the address is refused for a while, as qBittorrent bans it.
    private func login(_ request: HTTPRequest, form: QBitForm, now: Double) throws(QBitError) -> HTTPResponse {
        guard !gate.isBlocked(request.peer, now: now) else {
            throw QBitError(403, "Your IP address has been banned after too many failed authentication attempts.")
        }
        let password = form["password"] ?? ""
        guard form["username"] == config.username || !gate.hasToken,
            let caller = gate.admitsSecret(password, address: request.peer, now: now)
        else {
            if form["username"] != config.username { gate.countFailure(request.peer, now: now) }
            return QBittorrentAPI.text(200, "Fails.")
        }
        if sessions.count >= QBittorrentAPI.maxSessions {
            sessions = sessions.filter { now - $0.value.lastUsed <= QBittorrentAPI.sessionTimeout }
            if sessions.count >= QBittorrentAPI.maxSessions,
                let oldest = sessions.min(by: { $0.value.lastUsed < $1.value.lastUsed })
            {
                sessions[oldest.key] = nil
            }
            serverSessions.keep { sessions[$0] != nil }
        }
        let sid = QBittorrentAPI.newSID()
        sessions[sid] = Session(caller: caller, lastUsed: now)
        if caller.token == nil { serverSessions.used(sid, at: now) }
        var response = QBittorrentAPI.text(200, "Ok.")
        response.headers.append(("Set-Cookie", "SID=\(sid); HttpOnly; path=/; SameSite=Strict"))
        return response
    }

    /// Marks session `sid` used `now`: by a call here, or by one the API's own loop answered (`QBitBeside`).
    func used(_ sid: String, at now: Double) {
        guard let caller = sessions[sid]?.caller else { return }
        sessions[sid]?.lastUsed = now
        if caller.token == nil { serverSessions.used(sid, at: now) }
    }

    static func json(_ value: JSONValue) -> HTTPResponse {
        HTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: value.serializedBytes())
    }

    /// Ends the sessions of token `id` (revoked or expired).
    func endSessions(ofToken id: String) {
        sessions = sessions.filter { $0.value.caller.token?.id != id }
    }

    /// Whether a page of another site sent the request: its Origin, else its Referer, names another host than
    /// the one asked (and not one of --cors-origin, nor a browser extension, which the user installed).
    private func fromAnotherSite(_ request: HTTPRequest) -> Bool {
        if let origin = request.header("Origin") {
            return
                !(AccessGate.isSameOrigin(origin, request) || gate.allowsConfiguredOrigin(origin)
                || AccessPolicy.isExtensionOrigin(origin))
        }
        guard let referer = request.header("Referer") else { return false }
        guard let parts = URLComponents(string: referer), let scheme = parts.scheme, let host = parts.host else {
            return true
        }
        let origin = scheme + "://" + (host.contains(":") ? "[\(host)]" : host) + (parts.port.map { ":\($0)" } ?? "")
        return !(AccessGate.isSameOrigin(origin, request) || gate.allowsConfiguredOrigin(origin))
    }

    // MARK: sync state

    func syncState(_ key: String) -> QBitSync {
        if key.hasPrefix("sid:") { return sessions[String(key.dropFirst(4))]?.sync ?? QBitSync() }
        return anonymousSync[key] ?? QBitSync()
    }

    func keep(_ sync: QBitSync, for key: String) {
        if key.hasPrefix("sid:") {
            sessions[String(key.dropFirst(4))]?.sync = sync
        } else {
            // A few callers without sessions: the server itself and bearer tokens.
            if anonymousSync[key] == nil, anonymousSync.count >= 64 { anonymousSync.removeAll() }
            anonymousSync[key] = sync
        }
    }

    // MARK: helpers

    static func text(_ status: Int, _ text: String) -> HTTPResponse {
        HTTPResponse(
            status: status, headers: [("Content-Type", "text/plain; charset=UTF-8")], body: Array(text.utf8))
    }

    /// A cookie's value from the request's `Cookie` header.
    static func cookie(_ name: String, in request: HTTPRequest) -> String? {
        guard let header = request.header("Cookie") else { return nil }
        for pair in header.split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2, HTTPField.trimmed(String(parts[0])) == name {
                return HTTPField.trimmed(String(parts[1]))
            }
        }
        return nil
    }

    /// 32 random characters of base64's alphabet, as qBittorrent's SIDs.
    static func newSID() -> String {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        return String((0..<32).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] })
    }
}
