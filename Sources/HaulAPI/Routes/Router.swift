import HaulCore
import HaulLoop

/// A route: a path pattern whose `{name}` segments capture values, who may call it, and a handler per method that
/// names the operation it serves (whether it changes anything, the scope it needs). All the access gate and the
/// router know of a route is here.
struct Route {
    /// Who may call the route when the server has a token.
    enum Access {
        /// `Authorization: Bearer <token>`.
        case token
        /// The token as a header, or in the URL as a ticket for this path (`?ticket=`, from `POST /tickets`) or as
        /// `?access_token=`: event streams and files, which a browser's EventSource or link opens without headers.
        case streamToken
        /// Anyone: the dashboard's page and assets (no data in them) and `/healthz`.
        case open
    }

    /// What a method does on the route.
    struct Handler {
        /// The operation it serves: REST is one wire format over them.
        let operation: Operation
        /// A state change (POST, PATCH, DELETE): refused to browsers from origins not allowed, token or not. Said
        /// by the route (`read` or `write`) and by the operation: a test checks they agree.
        let changesState: Bool
        /// The query parameters it reads; any other is a 400 (a misspelt filter must not pass for "all"). nil for
        /// a page that reads none and ignores any (the dashboard's, /healthz).
        let query: Set<String>?
        let run: (RequestContext) throws(Problem) -> APIResult

        static func read(
            _ operation: Operation, query: Set<String>? = [],
            _ run: @escaping (RequestContext) throws(Problem) -> APIResult
        ) -> Handler {
            Handler(operation: operation, changesState: false, query: query, run: run)
        }

        static func write(
            _ operation: Operation, query: Set<String> = [],
            _ run: @escaping (RequestContext) throws(Problem) -> APIResult
        ) -> Handler {
            Handler(operation: operation, changesState: true, query: query, run: run)
        }
    }

    let pattern: String
    let access: Access
    let handlers: [String: Handler]
    /// The route refuses pages of other sites itself (the qBittorrent front, as qBittorrent does: 401, by Origin
    /// or Referer), so the gate leaves that to it.
    let checksOriginItself: Bool
    private let segments: [Substring]

    init(pattern: String, access: Access = .token, checksOriginItself: Bool = false, handlers: [String: Handler]) {
        self.pattern = pattern
        self.access = access
        self.checksOriginItself = checksOriginItself
        self.handlers = handlers
        segments = pattern.split(separator: "/", omittingEmptySubsequences: false)
    }

    /// The handler for `method` (HEAD is answered like GET).
    func handler(for method: String) -> Handler? { handlers[method == "HEAD" ? "GET" : method] }

    /// The captured parameters if the path (split at "/") matches, nil otherwise.
    func match(_ path: [Substring]) -> [String: String]? {
        guard segments.count == path.count else { return nil }
        var parameters: [String: String] = [:]
        for (want, have) in zip(segments, path) {
            if want.first == "{" {
                guard !have.isEmpty else { return nil }
                parameters[String(want.dropFirst().dropLast())] = String(have)
            } else if want != have {
                return nil
            }
        }
        return parameters
    }
}

/// What the API answers: a whole response, a server-sent event stream for the transport to open, or a response
/// that comes later (a bulk change worked through a slice per loop turn).
public enum APIResult {
    case response(HTTPResponse)
    case eventStream(EventStreamRequest)
    /// An unfinished download's file, read as it lands: the transport opens the stream and hands it to
    /// `API.attach(_:for:)`.
    case fileStream(FileStreamRequest)
    case pending(PendingResponse)
    /// A WebSocket handshake accepted: the transport answers 101 with these headers and hands the connection to
    /// `API.attach(_:)`.
    case webSocket(WebSocketUpgrade)

    /// The response, for callers that know the route does not stream.
    public var response: HTTPResponse? {
        if case .response(let response) = self { return response }
        return nil
    }
}

/// A WebSocket handshake the API accepted (RFC 6455 section 4.2.2): the 101's headers.
public struct WebSocketUpgrade: Sendable {
    public let headers: [(name: String, value: String)]
    /// Who the handshake proved the client is (a token in it), nil when it gave none.
    public var caller: Caller?
}

/// A validated request for an event stream.
public struct EventStreamRequest: Sendable {
    /// Follow one download, or all when nil.
    public let downloadID: String?
    /// Follow the downloads of one category (`?category=`).
    public var category: String?
    /// From `Last-Event-ID` or `?last_event_id=`.
    public let lastEventID: Int64?
    /// Whose stream it is: it carries only what the caller's token sees.
    public var caller: Caller = .server
    /// The headers that open the stream: `standardHeaders` and the CORS headers of the request.
    public var headers: [(name: String, value: String)] = EventStreamRequest.standardHeaders

    public static let standardHeaders: [(name: String, value: String)] = [
        ("Content-Type", "text/event-stream"),
        ("Cache-Control", "no-cache"),
        // Reverse proxies (nginx) must pass events through as they come.
        ("X-Accel-Buffering", "no"),
    ]
}

/// What a handler gets: the request, the path parameters, and the operations done for its caller.
struct RequestContext {
    let request: HTTPRequest
    let parameters: [String: String]
    let query: [String: String]
    /// Everything a handler does with downloads goes through these: they hold who asked (`caller`).
    let operations: Operations

    var caller: Caller { operations.caller }
}

/// One method of one route as the operation table sees it.
public struct RouteEntry: Sendable {
    public let path: String
    public let method: String
    public let operation: Operation
    /// What the route declares: a write, and whether anyone may call it.
    public let changesState: Bool
    public let open: Bool
}

/// Matches a request to a route and method; answers 404 and 405 itself.
struct Router {
    let routes: [Route]

    /// The route serving `path`, with its captured parameters.
    func match(_ path: String) -> (route: Route, parameters: [String: String])? {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        for route in routes {
            if let parameters = route.match(segments) { return (route, parameters) }
        }
        return nil
    }

    /// Answers `request` for `path` (its decoded path) with the route `match` found, or 404/405.
    func handle(
        _ request: HTTPRequest, path: String, matched: (route: Route, parameters: [String: String])?,
        operations: Operations
    ) -> APIResult {
        guard let (route, parameters) = matched else {
            return .response(Problem.notFound("no route for \(path)").response(instance: path))
        }
        // HEAD is answered like GET; evhttp drops the body.
        guard let handler = route.handler(for: request.method) else {
            var allowed = route.handlers.keys.sorted()
            if allowed.contains("GET") { allowed.append("HEAD") }
            return .response(Problem.methodNotAllowed(request.method, allowed: allowed).response(instance: path))
        }
        let pairs = request.queryPairs
        var query: [String: String] = [:]
        for (name, value) in pairs { query[name] = value }
        if var allowed = handler.query {
            // `?category=junk&category=keep`: one reader takes the first, another the last; neither is guessed.
            if query.count != pairs.count {
                var seen: Set<String> = []
                let repeated = pairs.first { !seen.insert($0.name).inserted }!.name
                return .response(
                    Problem.badRequest("the query parameter '\(repeated)' is given twice")
                        .response(instance: path))
            }
            // The token of a route that takes it as a parameter (a browser's EventSource or link cannot send one).
            if route.access == .streamToken { allowed.formUnion(["access_token", "ticket"]) }
            if let unknown = query.keys.sorted().first(where: { !allowed.contains($0) }) {
                let known = allowed.isEmpty ? "none" : allowed.sorted().joined(separator: ", ")
                return .response(
                    Problem.badRequest("unknown query parameter '\(unknown)' (this route takes \(known))")
                        .response(instance: path))
            }
        }
        do {
            return try handler.run(
                RequestContext(
                    request: request, parameters: parameters, query: query,
                    operations: operations))
        } catch {
            return .response(error.response(instance: path))
        }
    }

    /// Every `(pattern, method)` served, for checking against the OpenAPI document.
    var operations: [(path: String, method: String)] {
        routes.flatMap { route in route.handlers.keys.sorted().map { (route.pattern, $0) } }
    }

    /// Every `(pattern, method)` with what it serves and declares, for checking against the operation table.
    var table: [RouteEntry] {
        routes.flatMap { route in
            route.handlers.sorted { $0.key < $1.key }.map { method, handler in
                RouteEntry(
                    path: route.pattern, method: method, operation: handler.operation,
                    changesState: handler.changesState, open: route.access == .open)
            }
        }
    }
}
