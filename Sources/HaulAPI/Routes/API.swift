import FoundationEssentials
import HaulAssets
import HaulCore
import HaulLoop

/// The REST API: routes, handlers and JSON shapes, independent of any transport. `handle` turns a request into a
/// response; the HTTP server only carries bytes.
public final class API {
    /// What the handlers decode requests into and encode answers from, done for the server's own token: each
    /// request's handler gets them for its caller instead (`RequestContext.operations`).
    let serverOperations: Operations
    public let events: EventHub
    var router: Router!
    let gate: AccessGate
    let limits: APILimits
    let metrics = RequestMetrics()
    /// The aria2-compatible JSON-RPC front.
    let aria2: Aria2RPC
    /// The qBittorrent-compatible Web API front.
    let qbittorrent: QBittorrentAPI
    /// Readers of unfinished files.
    let readers: FileReaders
    let loop: EventLoop
    /// `--watch-dir`'s lists, once `watch(folder:)` started it.
    private var watchFolder: WatchFolder?
    private let log: Logger?
    /// For `process_start_time_seconds`: the API starts with the process.
    let startedAt = Date().timeIntervalSince1970
    /// Checks that the tokens open streams and sockets were opened with still stand (`checkStreamTokens`).
    private var tokenCheck: ClockTimer?
    /// Seconds between those checks: a token revoked on another node, or expired, is cut off within this.
    static let tokenCheckInterval = 2.0

    public init(
        engine: Engine, loop: EventLoop, events: EventStreamConfig = EventStreamConfig(),
        access: AccessPolicy = AccessPolicy(), limits: APILimits = APILimits(),
        aria2: Aria2Config = Aria2Config(), qbittorrent: QBittorrentConfig = QBittorrentConfig(), log: Logger? = nil
    ) {
        self.loop = loop
        serverOperations = Operations(engine: engine, maxDownloads: limits.maxDownloads)
        self.limits = limits
        self.log = log
        gate = AccessGate(policy: access)
        self.aria2 = Aria2RPC(operations: serverOperations, gate: gate, config: aria2, log: log)
        self.qbittorrent = QBittorrentAPI(operations: serverOperations, gate: gate, config: qbittorrent)
        gate.lookup = { [serverOperations] secret in serverOperations.token(forSecret: secret) }
        gate.byID = { [serverOperations] id in serverOperations.token(id: id) }
        self.events = EventHub(operations: serverOperations, config: events)
        readers = FileReaders(operations: serverOperations, stall: limits.readStall)
        self.events.onEngineChange = { [unowned aria2 = self.aria2, unowned readers] change in
            aria2.engineChanged(change)
            readers.engineChanged(change)
        }
        self.events.onWrote = { [unowned readers] id in readers.wake(id) }
        tokenCheck = serverOperations.clock.every(API.tokenCheckInterval) { [unowned self] in self.checkStreamTokens() }
        router = Router(
            routes: downloadRoutes + serverRoutes + webhookRoutes + categoryRoutes + tokenRoutes + aria2Routes
                + qbittorrentRoutes)
    }

    /// Answers `request`, counting it in the metrics and logging one line for it. A response that comes later
    /// is `.pending` (its `response` is set once the loop has done the work).
    public func handle(_ request: HTTPRequest) -> APIResult {
        var result: APIResult?
        let later = PendingResponse()
        serve(request, receivedAt: ProcessInfo.processInfo.systemUptime) { answer in
            if result == nil {
                result = answer
            } else if case .response(let response) = answer {
                later.resolve(response)
            }
        }
        if case .pending = result { return .pending(later) }
        return result!
    }

    /// Answers `request` through `send` (the transport's reply), then counts it in the metrics and logs one line
    /// whose duration runs from `receivedAt` (the uptime when the transport began reading the request) to the
    /// reply being handed over: reading, routing, the handler and writing, the whole time the loop spent on it.
    public func serve(_ request: HTTPRequest, receivedAt: Double, send: @escaping (APIResult) -> Void) {
        let path = request.path
        let matched = router.match(path)
        let (result, caller) = answer(request, path: path, matched: matched)
        // aria2's front logs its calls itself: its route is open, the token is in each call.
        let changes =
            matched.map { $0.route.access != .open && $0.route.handler(for: request.method)?.changesState == true }
            ?? false
        if case .pending(let pending) = result {
            // For `handle`: the first call says the answer is coming.
            send(result)
            return pending.whenReady { [weak self] response in
                send(.response(response))
                self?.record(
                    request, path: path, route: matched?.route.pattern, status: response.status,
                    seconds: ProcessInfo.processInfo.systemUptime - receivedAt, audited: changes ? caller : nil)
            }
        }
        send(result)
        var status = result.response?.status ?? 200
        if case .webSocket = result { status = 101 }
        record(
            request, path: path, route: matched?.route.pattern, status: status,
            seconds: ProcessInfo.processInfo.systemUptime - receivedAt, audited: changes ? caller : nil)
    }

    /// Counts an answered request in the metrics and logs its line; a state-changing one (`audited`) names the
    /// token it came with, by id and name (never its secret), at info level or above.
    func record(
        _ request: HTTPRequest, path: String, route: String?, status: Int, seconds: Double, audited: Caller?,
        beside: Bool = false
    ) {
        metrics.record(
            route: route ?? "unmatched", method: request.method, status: status, seconds: seconds, beside: beside)
        if let log, log.minimum <= .info {
            // The path only: a query may carry an access token.
            var fields = [
                "http.method": request.method, "http.path": path, "http.status": String(status),
                "http.duration_ms": API.milliseconds(seconds), "client.address": request.peer,
            ]
            if let audited { fields.merge(audited.logFields) { first, _ in first } }
            log.info("request", fields)
        }
    }

    /// The answer to `request`, and who it came from (nil when the gate refused it).
    private func answer(
        _ request: HTTPRequest, path: String,
        matched: (route: Route, parameters: [String: String])?
    ) -> (APIResult, Caller?) {
        var cors = gate.corsHeaders(for: request) + API.everyAnswer
        if request.target.utf8.count > limits.maxTargetBytes {
            return (
                .response(
                    Problem(
                        status: 414, slug: "uri-too-long", title: "URI too long",
                        detail: "the request target must be at most \(limits.maxTargetBytes) bytes"
                    )
                    .response(instance: "/").adding(cors)), nil
            )
        }
        let caller: Caller
        switch gate.check(request, path: path, route: matched?.route, now: ProcessInfo.processInfo.systemUptime) {
        case .refused(let refused):
            // A preflight's answer carries its CORS headers already; a second copy makes browsers refuse it.
            return (
                .response(gate.preflight(request) != nil ? refused.adding(API.everyAnswer) : refused.adding(cors)),
                nil
            )
        case .admitted(let admitted):
            caller = admitted
        }
        // `Origin: null` may read what it asked only with the token (any page can send that Origin).
        cors = gate.corsHeaders(for: request, proved: gate.lastProved) + API.everyAnswer
        switch router.handle(request, path: path, matched: matched, operations: serverOperations.acting(as: caller)) {
        case .response(let response):
            return (.response(response.adding(cors)), caller)
        case .eventStream(var stream):
            stream.headers += cors
            return (.eventStream(stream), caller)
        case .fileStream(var stream):
            stream.headers += cors
            return (.fileStream(stream), caller)
        case .pending(let pending):
            pending.headers += cors
            return (.pending(pending), caller)
        case .webSocket(let upgrade):
            return (.webSocket(upgrade), caller)
        }
    }

    /// Headers on every answer. No page, file or stream of this server tells the next site where it came from: a
    /// URL of it may carry a ticket (or, from older clients, the token).
    static let everyAnswer: [(name: String, value: String)] = [("Referrer-Policy", "no-referrer")]

    /// Serves aria2's JSON-RPC on a WebSocket the transport opened after `.webSocket`: calls answered in order,
    /// with aria2's notifications.
    public func attach(_ socket: any WebSocketEndpoint, for upgrade: WebSocketUpgrade) {
        aria2.attach(socket, caller: upgrade.caller)
    }

    /// Cuts off what token `id` opened: its event streams end, its WebSockets close. A revoked token is refused at
    /// its next request; this stops what it already holds open.
    func cutOff(token id: String) {
        events.closeStreams(ofToken: id)
        aria2.closeSockets(ofToken: id)
        qbittorrent.endSessions(ofToken: id)
        readers.cutOff(token: id)
    }

    /// Cuts off the streams and sockets of tokens that no longer stand: revoked on any node (the store is the
    /// truth), or expired.
    private func checkStreamTokens() {
        for id in events.streamTokens.union(aria2.socketTokens) where gate.byID?(id) == nil { cutOff(token: id) }
        // Reads that waited too long for their next bytes end here too.
        readers.check { [gate] id in gate.byID?(id) != nil }
    }

    /// Event streams and WebSockets open: one budget of long-lived connections (`--max-event-streams`).
    var longLivedCount: Int { events.streamCount + aria2.socketCount + readers.count }

    /// Starts sending events to `sink`, a stream the transport opened for `request`.
    public func attach(_ sink: EventSink, for request: EventStreamRequest) {
        events.subscribe(
            sink, downloadID: request.downloadID, category: request.category, caller: request.caller,
            lastEventID: request.lastEventID)
    }

    /// Adds the lists of links dropped into `folder` (`--watch-dir`), those there now first.
    public func watch(folder: String) throws(FileError) {
        watchFolder = try WatchFolder(path: folder, operations: serverOperations, loop: loop, log: log)
    }

    /// `POST /shutdown`: stops the server after the answer has gone out, when `--rpc-allow-shutdown` allows it
    /// (as `aria2.shutdown` does).
    func shutdown() throws(Problem) -> HTTPResponse {
        guard aria2.allowsShutdown, let onShutdown else {
            throw Problem(
                status: 409, slug: "shutdown-refused", title: "Shutdown refused",
                detail: "this server does not stop by request: start it with --rpc-allow-shutdown to allow it")
        }
        onShutdown()
        return API.json(202, .object([("status", .string("stopping"))]))
    }

    /// Stops the server soon: what `aria2.shutdown` and `POST /shutdown` call when `--rpc-allow-shutdown` allows it.
    public var onShutdown: (() -> Void)? {
        get { aria2.onShutdown }
        set { aria2.onShutdown = newValue }
    }

    /// Every `(path, method)` the API serves, for the contract test.
    public var routes: [(path: String, method: String)] { router.operations }

    /// Every route and method with the operation it serves, for the operation table's test (and the access rules
    /// of scoped tokens).
    public var routeTable: [RouteEntry] { router.table }

    // MARK: helpers

    /// Adds an ETag (a hash of the body) and answers 304 when the client's If-None-Match names it: a poller that
    /// already has the current state pays for no body.
    func conditional(_ request: HTTPRequest, _ response: HTTPResponse) throws(Problem) -> HTTPResponse {
        API.conditional(request, tagged: API.tagged(response))
    }

    /// `response` with its entity tag.
    static func tagged(_ response: HTTPResponse) -> HTTPResponse {
        response.adding([("ETag", ETag.of(response.body))])
    }

    /// `tagged` (a response with its entity tag), or 304 when the request's If-None-Match names its tag.
    static func conditional(_ request: HTTPRequest, tagged response: HTTPResponse) -> HTTPResponse {
        if let header = request.header("If-None-Match"), let tag = response.header("ETag"), ETag.matches(header, tag) {
            return HTTPResponse(status: 304, headers: [("ETag", tag)])
        }
        return response
    }

    /// Evaluates an engine call, mapping its error to a problem.
    func attempt<T>(_ call: @autoclosure () throws(EngineError) -> T) throws(Problem) -> T {
        do {
            return try call()
        } catch {
            throw Problem(error)
        }
    }

    /// `seconds` as milliseconds with three decimals ("0.412").
    static func milliseconds(_ seconds: Double) -> String {
        Decimals.format(max(0, seconds * 1000), places: 3)
    }

    static func json(_ status: Int, _ value: JSONValue, headers: [(name: String, value: String)] = []) -> HTTPResponse {
        json(status, bytes: value.serializedBytes(), headers: headers)
    }

    /// An answer whose JSON was written straight to bytes (`JSONWriter`).
    static func json(_ status: Int, bytes: [UInt8], headers: [(name: String, value: String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json")] + headers, body: bytes)
    }
}

/// How much clients may make the server hold.
public struct APILimits: Sendable {
    /// Path and query of one request.
    public var maxTargetBytes = 8192
    /// Downloads stored, finished ones included.
    public var maxDownloads = 1_000_000
    /// Event streams open at once (readers of unfinished files and WebSockets count too).
    public var maxEventStreams = 10_000
    /// A read of a queued download's file starts it ahead of the queue (`--start-on-read`), as `?start=1` does.
    public var startOnRead = false
    /// Seconds a reader of an unfinished file waits for its next bytes before it is answered with what it has.
    public var readStall = 30.0

    public init() {}
}
