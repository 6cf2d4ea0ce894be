import HaulLoop

/// A route: a path pattern whose `{name}` segments capture values, and a handler per method.
struct Route {
    let pattern: String
    let handlers: [String: (RequestContext) throws(Problem) -> APIResult]
    private let segments: [Substring]

    init(pattern: String, handlers: [String: (RequestContext) throws(Problem) -> APIResult]) {
        self.pattern = pattern
        self.handlers = handlers
        segments = pattern.split(separator: "/", omittingEmptySubsequences: false)
    }

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

/// What the API answers: a whole response, or a server-sent event stream for the transport to open.
public enum APIResult {
    case response(HTTPResponse)
    case eventStream(EventStreamRequest)

    /// The response, for callers that know the route does not stream.
    public var response: HTTPResponse? {
        if case .response(let response) = self { return response }
        return nil
    }
}

/// A validated request for an event stream.
public struct EventStreamRequest: Sendable {
    /// Follow one download, or all when nil.
    public let downloadID: String?
    /// From `Last-Event-ID` or `?last_event_id=`.
    public let lastEventID: Int64?
    /// The headers that open the stream: `standardHeaders` and the CORS headers of the request.
    public var headers: [(name: String, value: String)] = EventStreamRequest.standardHeaders

    public static let standardHeaders: [(name: String, value: String)] = [
        ("Content-Type", "text/event-stream"),
        ("Cache-Control", "no-cache"),
        // Reverse proxies (nginx) must pass events through as they come.
        ("X-Accel-Buffering", "no"),
    ]
}

/// What a handler gets: the request and the path parameters.
struct RequestContext {
    let request: HTTPRequest
    let parameters: [String: String]
    let query: [String: String]
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
    func handle(_ request: HTTPRequest, path: String, matched: (route: Route, parameters: [String: String])?)
        -> APIResult {
        guard let (route, parameters) = matched else {
            return .response(Problem.notFound("no route for \(path)").response(instance: path))
        }
        // HEAD is answered like GET; evhttp drops the body.
        let method = request.method == "HEAD" ? "GET" : request.method
        guard let handler = route.handlers[method] else {
            var allowed = route.handlers.keys.sorted()
            if allowed.contains("GET") { allowed.append("HEAD") }
            return .response(Problem.methodNotAllowed(request.method, allowed: allowed).response(instance: path))
        }
        do {
            return try handler(RequestContext(request: request, parameters: parameters, query: request.query))
        } catch {
            return .response(error.response(instance: path))
        }
    }

    /// Every `(pattern, method)` served, for checking against the OpenAPI document.
    var operations: [(path: String, method: String)] {
        routes.flatMap { route in route.handlers.keys.sorted().map { (route.pattern, $0) } }
    }
}
