import FoundationEssentials
import HaulCore
import HaulLoop

/// Status reads and pages of the list answered on the API's own loop, beside the engine's: from the answers the
/// engine put up while what they show rested (`StatusBoard`), with no turn of the engine's loop and no hop between
/// threads.
extension API {
    /// Opens the status board and returns what the API's own loop asks before it hands a request to the engine's:
    /// the answer to a plain `GET /downloads/{id}` of a download at rest, to a `GET /downloads?...` whose page the
    /// engine put up for that very target, to aria2's `tellStatus` about a download at rest (`Aria2Beside`), or to
    /// qBittorrent's `torrents/info` whose list the engine put up (`QBitBeside`), from the server's own token (or
    /// on a server without one), or nil for the engine to answer. Everything else, and anything the gate would have
    /// to count or refuse, goes to the engine's loop as before. The request is counted in the metrics and logged
    /// there, a turn's reads in one post.
    public func readsBeside(on here: EventLoop) -> (_ request: HTTPRequest, _ receivedAt: Double) -> HTTPResponse? {
        let board = serverOperations.statusBoard
        let sessions = qbittorrent.serverSessions
        board.open()
        // Its metrics and log are the engine's loop's: only `record` is called through this, posted there.
        let engineSide = LoopBound(self)
        let ledger = BesideLedger(loop: here, engine: loop) { reads in
            for read in reads {
                // The path only in the log, as the engine logs it: a query may carry a secret.
                let path = read.target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? read.target
                engineSide.value.record(
                    HTTPRequest(method: read.method, target: read.target, peer: read.peer), path: path,
                    route: read.route, status: read.status, seconds: read.seconds, audited: nil, beside: true)
                // A session's call keeps it from timing out, as one answered here would.
                if let session = read.session { engineSide.value.qbittorrent.used(session, at: read.at) }
            }
        }
        return { [gate] request, receivedAt in
            let now = ProcessInfo.processInfo.systemUptime
            let answered: (response: HTTPResponse, route: String)?
            var session: String?
            switch request.method {
            case "GET" where QBitBeside.isInfoTarget(request.target):
                answered = API.qbittorrentBeside(request, board: board, gate: gate, sessions: sessions, now: now)
                session = QBittorrentAPI.cookie("SID", in: request)
            case "GET": answered = API.restBeside(request, board: board, gate: gate, now: now)
            case "POST": answered = API.aria2Beside(request, board: board, gate: gate, now: now)
            default: answered = nil
            }
            guard let answered else { return nil }
            let response = answered.response.adding(API.everyAnswer)
            ledger.note(
                BesideLedger.Read(
                    method: request.method, target: request.target, route: answered.route, peer: request.peer,
                    status: response.status, seconds: ProcessInfo.processInfo.systemUptime - receivedAt,
                    session: session, at: now))
            return response
        }
    }

    /// A status read or a page of the list from the board, with the route it is counted under.
    private static func restBeside(
        _ request: HTTPRequest, board: StatusBoard, gate: AccessGate, now: Double
    ) -> (HTTPResponse, String)? {
        let id = API.statusID(in: request.target)
        guard id != nil || API.isListTarget(request.target), gate.admitsServerOnAnyLoop(request, now: now),
            let published = id.map(board.answer(for:)) ?? board.page(for: request.target)
        else { return nil }
        return (API.conditional(request, tagged: published), id == nil ? API.listRoute : API.statusRoute)
    }

    /// aria2's `tellStatus` from the board: a POST to `/jsonrpc` with no Origin, the server's token in the call.
    private static func aria2Beside(
        _ request: HTTPRequest, board: StatusBoard, gate: AccessGate, now: Double
    ) -> (HTTPResponse, String)? {
        guard request.target == API.rpcRoute, gate.admitsPlainOnAnyLoop(request),
            let call = Aria2Beside.statusCall(request.body),
            gate.admitsServerSecretOnAnyLoop(call.token, request.peer, now: now),
            let published = board.frontAnswer(for: Aria2Beside.key(call.gid)) as? Aria2Beside.Status
        else { return nil }
        return (Aria2Beside.answer(call, from: published), API.rpcRoute)
    }

    /// qBittorrent's `torrents/info` from the board: no Origin or Referer (its CSRF check would look at them), from
    /// a session the server's token logged in and that stands, the server's token as a bearer (with no session),
    /// or anyone on a server without a token.
    private static func qbittorrentBeside(
        _ request: HTTPRequest, board: StatusBoard, gate: AccessGate, sessions: QBitServerSessions, now: Double
    ) -> (HTTPResponse, String)? {
        guard gate.admitsPlainOnAnyLoop(request), request.header("Referer") == nil else { return nil }
        if gate.hasToken {
            if let sid = QBittorrentAPI.cookie("SID", in: request) {
                guard sessions.stands(sid, now: now) else { return nil }
            } else {
                guard let bearer = AccessGate.bearer(request.header("Authorization")),
                    gate.admitsServerSecretOnAnyLoop(bearer, request.peer, now: now)
                else { return nil }
            }
        }
        guard let published = board.page(for: request.target) else { return nil }
        return (published, API.qbittorrentRoute)
    }

    /// The routes a read beside is counted under.
    static let statusRoute = "/downloads/{id}"
    static let listRoute = "/downloads"
    static let rpcRoute = "/jsonrpc"
    static let qbittorrentRoute = "/api/v2/{area}/{name}"

    /// Whether `target` asks for the list (`/downloads`, with or without a query) within a length worth looking up.
    static func isListTarget(_ target: String) -> Bool {
        let bytes = target.utf8
        let path = "/downloads".utf8
        guard bytes.count <= 1024, bytes.starts(with: path) else { return false }
        return bytes.count == path.count || bytes.dropFirst(path.count).first == UInt8(ascii: "?")
    }

    /// The id of `/downloads/{id}` when `target` is exactly that, with no query and nothing encoded in the id.
    static func statusID(in target: String) -> String? {
        let prefix = "/downloads/".utf8
        let bytes = target.utf8
        guard bytes.count > prefix.count, bytes.count <= prefix.count + 64, bytes.starts(with: prefix) else {
            return nil
        }
        let id = bytes.dropFirst(prefix.count)
        guard
            id.allSatisfy({ byte in
                (byte >= 48 && byte <= 57) || (byte >= 65 && byte <= 90) || (byte >= 97 && byte <= 122)
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
            })
        else { return nil }
        return String(decoding: id, as: UTF8.self)
    }
}

/// The reads answered on the API's own loop in one of its turns, handed to the engine's loop in one post when the
/// turn ends (a post each would wake the engine's loop for every read). Confined to the API's loop.
final class BesideLedger {
    struct Read: Sendable {
        let method: String
        let target: String
        let route: String
        let peer: String
        let status: Int
        let seconds: Double
        /// The qBittorrent session it was answered for, if any, and when.
        var session: String? = nil
        var at: Double = 0
    }

    private var reads: [Read] = []
    /// Held so the timer is freed before its loop (see `deinit`).
    private let loop: EventLoop
    private var flush: LoopTimer?

    init(loop: EventLoop, engine: EventLoop, record: @escaping ([Read]) -> Void) {
        self.loop = loop
        let record = LoopBound(record)
        flush = LoopTimer(loop: loop, delay: 0) { [unowned self] in
            let batch = reads
            reads.removeAll(keepingCapacity: true)
            engine.post { record.value(batch) }
        }
    }

    // The timer's event is freed while its event base still is.
    deinit { flush = nil }

    func note(_ read: Read) {
        loop.assertInLoop()
        if reads.isEmpty { flush?.start() }
        reads.append(read)
    }
}
