import FoundationEssentials
import HaulCore
import HaulLoop

/// The REST API: routes, handlers and JSON shapes, independent of any transport. `handle` turns a request into a
/// response; the HTTP server only carries bytes.
public final class API {
    let engine: Engine
    public let events: EventHub
    private var router: Router!
    private let gate: AccessGate
    private let limits: APILimits
    private let metrics = RequestMetrics()
    private let log: Logger?
    /// For `process_start_time_seconds`: the API starts with the process.
    private let startedAt = Date().timeIntervalSince1970

    public init(engine: Engine, loop: EventLoop, events: EventStreamConfig = EventStreamConfig(),
                access: AccessPolicy = AccessPolicy(), limits: APILimits = APILimits(), log: Logger? = nil) {
        self.engine = engine
        self.limits = limits
        self.log = log
        gate = AccessGate(policy: access)
        self.events = EventHub(engine: engine, config: events)
        engine.webhookResource = DownloadResource.json
        router = Router(routes: [
            Route(pattern: "/downloads", handlers: [
                "GET": .read(query: ["state", "limit", "cursor", "changed_since", "q", "sort", "category"]) {
                    [unowned self] c throws(Problem) in .response(try self.listDownloads(c))
                },
                "POST": .write { [unowned self] c throws(Problem) in .response(try self.addDownload(c)) },
                "DELETE": .write(query: ["category", "state", "delete_file"]) { [unowned self] c throws(Problem) in
                    try self.deleteDownloads(c)
                },
            ]),
            Route(pattern: "/downloads/actions", handlers: [
                "POST": .write { [unowned self] c throws(Problem) in try self.act(c) },
            ]),
            Route(pattern: "/downloads/{id}", handlers: [
                "GET": .read { [unowned self] c throws(Problem) in .response(try self.getDownload(c)) },
                "PATCH": .write { [unowned self] c throws(Problem) in .response(try self.patchDownload(c)) },
                "DELETE": .write(query: ["delete_file"]) { [unowned self] c throws(Problem) in
                    .response(try self.deleteDownload(c))
                },
            ]),
            Route(pattern: "/downloads/{id}/file", access: .streamToken, handlers: [
                "GET": .read(query: ["download"]) { [unowned self] c throws(Problem) in .response(try self.file(c)) },
            ]),
            Route(pattern: "/downloads/{id}/events", access: .streamToken, handlers: [
                "GET": .read(query: ["last_event_id"]) { [unowned self] c throws(Problem) in
                    try self.eventStream(c, downloadID: c.parameters["id"])
                },
            ]),
            Route(pattern: "/events", access: .streamToken, handlers: [
                "GET": .read(query: ["last_event_id", "category"]) { [unowned self] c throws(Problem) in
                    try self.eventStream(c, downloadID: nil)
                },
            ]),
            Route(pattern: "/tickets", handlers: [
                "POST": .write { [unowned self] c throws(Problem) in .response(try self.issueTicket(c)) },
            ]),
            Route(pattern: "/stats", handlers: [
                "GET": .read { [unowned self] _ in .response(self.stats()) },
            ]),
            Route(pattern: "/settings", handlers: [
                "GET": .read { [unowned self] c throws(Problem) in
                    .response(try self.conditional(c.request, self.settings()))
                },
                "PATCH": .write { [unowned self] c throws(Problem) in .response(try self.patchSettings(c)) },
            ]),
            Route(pattern: "/", access: .open, handlers: [
                "GET": .read(query: nil) { c in
                    .response(Dashboard.asset(DashboardAssets.indexHTML, type: "text/html", for: c.request))
                },
            ]),
            Route(pattern: "/ui/app.js", access: .open, handlers: [
                "GET": .read(query: nil) { c in
                    .response(Dashboard.asset(DashboardAssets.appJS, type: "text/javascript", for: c.request))
                },
            ]),
            Route(pattern: "/ui/app.css", access: .open, handlers: [
                "GET": .read(query: nil) { c in
                    .response(Dashboard.asset(DashboardAssets.appCSS, type: "text/css", for: c.request))
                },
            ]),
            Route(pattern: "/metrics", handlers: [
                "GET": .read { [unowned self] _ in .response(self.prometheusMetrics()) },
            ]),
            Route(pattern: "/healthz", access: .open, handlers: [
                "GET": .read(query: nil) { [unowned self] _ in
                    // With a shared store, which node answered (the others are behind the same name).
                    var members: [(String, JSONValue)] = [("status", .string("ok"))]
                    if let node = self.engine.node { members.append(("node", .string(node))) }
                    return .response(API.json(200, .object(members)))
                },
            ]),
            // Readiness, beside liveness: 503 while the store cannot be reached, so a load balancer sends clients
            // to a node that can store what they ask (the process itself is fine: /healthz stays 200).
            Route(pattern: "/readyz", access: .open, handlers: [
                "GET": .read(query: nil) { [unowned self] _ in
                    var members: [(String, JSONValue)] = []
                    if let node = self.engine.node { members.append(("node", .string(node))) }
                    guard let problem = self.engine.storeProblem() else {
                        return .response(API.json(200, .object([("status", .string("ready"))] + members)))
                    }
                    return .response(API.json(503, .object([("status", .string("unavailable")),
                                                            ("reason", .string("the store cannot be reached: \(problem)"))]
                                                           + members), headers: [("Retry-After", "5")]))
                },
            ]),
            Route(pattern: "/openapi.yaml", handlers: [
                "GET": .read { _ in
                    .response(HTTPResponse(status: 200, headers: [("Content-Type", "application/yaml")],
                                           body: Array(OpenAPIDocument.yaml.utf8)))
                },
            ]),
        ] + webhookRoutes + categoryRoutes)
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
        let result = answer(request, path: path, matched: matched)
        if case .pending(let pending) = result {
            // For `handle`: the first call says the answer is coming.
            send(result)
            return pending.whenReady { [weak self] response in
                send(.response(response))
                self?.record(request, path: path, route: matched?.route.pattern, status: response.status,
                             receivedAt: receivedAt)
            }
        }
        send(result)
        record(request, path: path, route: matched?.route.pattern, status: result.response?.status ?? 200,
               receivedAt: receivedAt)
    }

    /// Counts an answered request in the metrics and logs its line.
    private func record(_ request: HTTPRequest, path: String, route: String?, status: Int, receivedAt: Double) {
        let seconds = ProcessInfo.processInfo.systemUptime - receivedAt
        metrics.record(route: route ?? "unmatched", method: request.method, status: status, seconds: seconds)
        if let log, log.minimum <= .info {
            // The path only: a query may carry an access token.
            log.info("request", ["http.method": request.method, "http.path": path, "http.status": String(status),
                                 "http.duration_ms": API.milliseconds(seconds),
                                 "client.address": request.peer])
        }
    }

    private func answer(_ request: HTTPRequest, path: String,
                        matched: (route: Route, parameters: [String: String])?) -> APIResult {
        let cors = gate.corsHeaders(for: request) + API.everyAnswer
        if request.target.utf8.count > limits.maxTargetBytes {
            return .response(Problem(status: 414, slug: "uri-too-long", title: "URI too long",
                                     detail: "the request target must be at most \(limits.maxTargetBytes) bytes")
                .response(instance: "/").adding(cors))
        }
        if let refused = gate.check(request, path: path, route: matched?.route,
                                    now: ProcessInfo.processInfo.systemUptime) {
            // A preflight's answer carries its CORS headers already; a second copy makes browsers refuse it.
            return .response(gate.preflight(request) != nil ? refused.adding(API.everyAnswer) : refused.adding(cors))
        }
        switch router.handle(request, path: path, matched: matched) {
        case .response(let response):
            return .response(response.adding(cors))
        case .eventStream(var stream):
            stream.headers += cors + API.everyAnswer
            return .eventStream(stream)
        case .pending(let pending):
            pending.headers += cors
            return .pending(pending)
        }
    }

    /// Headers on every answer. No page, file or stream of this server tells the next site where it came from: a
    /// URL of it may carry a ticket (or, from older clients, the token).
    static let everyAnswer: [(name: String, value: String)] = [("Referrer-Policy", "no-referrer")]

    /// Starts sending events to `sink`, a stream the transport opened for `request`.
    public func attach(_ sink: EventSink, for request: EventStreamRequest) {
        events.subscribe(sink, downloadID: request.downloadID, category: request.category,
                         lastEventID: request.lastEventID)
    }

    /// Every `(path, method)` the API serves, for the contract test.
    public var operations: [(path: String, method: String)] { router.operations }

    // MARK: handlers

    /// What POST /downloads makes of `request` without adding anything: the download, or the status of the problem
    /// it would answer. For the fuzzer, which feeds it anything.
    public static func decodeNewDownload(_ request: HTTPRequest) -> (download: NewDownload?, status: Int) {
        do {
            return (try newDownload(from: request), 201)
        } catch {
            return (nil, error.status)
        }
    }

    /// What POST /downloads makes of a batch body without adding anything: each element's download (nil for one
    /// refused), or the status of the problem the whole batch would answer. For the fuzzer.
    public static func decodeBatch(_ request: HTTPRequest) -> (downloads: [NewDownload?], status: Int) {
        do {
            var body = try RequestBody(request)
            let (items, atomic) = try newDownloads(from: request, &body)
            return (items.map { try? $0.get() }, atomic ? 201 : 200)
        } catch {
            return ([], error.status)
        }
    }

    /// A POST /downloads body as a new download: every field checked, all problems reported at once (422), or
    /// 400/413/415 for a body that is not a JSON object.
    static func newDownload(from http: HTTPRequest) throws(Problem) -> NewDownload {
        var body = try RequestBody(http)
        let request = newDownload(&body)
        checkIdempotencyKey(http, &body)
        try body.finish()
        return request
    }

    /// The fields of one download (a POST body, or one element of a batch's `downloads`), their problems
    /// collected in `body`.
    static func newDownload(_ body: inout RequestBody) -> NewDownload {
        body.rejectUnknown(except: ["url", "urls", "mirrors", "filename", "directory", "connections", "headers",
                                    "priority", "max_speed", "start_paused", "checksum", "insecure", "size",
                                    "category"])
        // `urls` names every source, the first one first; or `url` and its `mirrors`.
        let urls = body.array("urls", count: 1...(API.maxMirrors + 1))?.map { $0.stringValue }
        if urls != nil, body.has("url") || body.has("mirrors") {
            body.reject("urls", "give urls, or url with mirrors, not both")
        }
        let url = urls != nil ? urls?.first ?? nil : body.string("url", required: true)
        if urls?.contains(nil) == true { body.reject("urls", "must be strings") }
        if let url, let problem = Validate.url(url) { body.reject(urls == nil ? "url" : "urls[0]", problem) }
        var request = NewDownload(url: url ?? "")
        let mirrors = urls.map { Array($0.dropFirst()) } ?? body.array("mirrors", count: 0...API.maxMirrors)?
            .map { $0.stringValue }
        let field = urls == nil ? "mirrors" : "urls"
        for (index, mirror) in (mirrors ?? []).enumerated() {
            let at = "\(field)[\(urls == nil ? index : index + 1)]"
            guard let mirror else { body.reject(at, "must be a string"); continue }
            if let problem = Validate.url(mirror) { body.reject(at, problem) }
            // A source named twice is one source.
            else if mirror != url && !request.mirrors.contains(mirror) { request.mirrors.append(mirror) }
        }
        if let filename = body.string("filename") {
            if let problem = Validate.filename(filename) {
                body.reject("filename", problem)
            } else {
                request.filename = FileName.sanitize(filename)
            }
        }
        if let directory = body.string("directory") {
            if let problem = Validate.directory(directory) { body.reject("directory", problem) }
            request.directory = Validate.sanitizedDirectory(directory)
        }
        request.connections = body.integer("connections", in: 1...32).map(Int.init)
        request.priority = body.integer("priority", in: -1000...1000).map(Int.init)
        if let category = body.string("category") {
            if let problem = Validate.categoryName(category) { body.reject("category", problem) }
            request.category = category
        }
        request.maxSpeed = body.integer("max_speed", in: 0...Int64(1) << 50).flatMap { $0 == 0 ? nil : $0 }
        request.startPaused = body.bool("start_paused") ?? false
        request.insecure = body.bool("insecure") ?? false
        request.expectedBytes = body.integer("size", in: 0...Int64(1) << 50)
        if let checksum = body.string("checksum") {
            if let parsed = Checksum(checksum) {
                request.checksum = parsed.description
            } else {
                body.reject("checksum", "must be sha256:, sha1: or md5: followed by the digest in hex")
            }
        }
        if let headers = body.object("headers") {
            let checked = Validate.headers(headers)
            for (field, message) in checked.errors { body.reject(field, message) }
            request.headers = checked.headers
        }
        return request
    }

    /// The most mirrors one download may have.
    static let maxMirrors = 16

    private static func checkIdempotencyKey(_ http: HTTPRequest, _ body: inout RequestBody) {
        if let key = http.header("Idempotency-Key"),
           key.isEmpty || key.utf8.count > 255 || !HTTPField.isValue(key) {
            body.reject("Idempotency-Key", "must be 1 to 255 bytes without control characters")
        }
    }

    /// The most downloads one batch may add.
    static let maxBatch = 1000

    /// A batch POST body, `{"downloads": [...], "atomic": false}`: each element checked on its own (its problem,
    /// or the download), or, with `atomic`, every element's problems in one 422 with fields like
    /// `downloads[3].url`.
    static func newDownloads(from http: HTTPRequest, _ body: inout RequestBody) throws(Problem)
        -> (items: [Result<NewDownload, Problem>], atomic: Bool) {
        body.rejectUnknown(except: ["downloads", "atomic"])
        let atomic = body.bool("atomic") ?? false
        let elements = body.array("downloads", count: 1...maxBatch, required: true) ?? []
        checkIdempotencyKey(http, &body)
        try body.finish()
        var items: [Result<NewDownload, Problem>] = []
        var all: [(field: String, message: String)] = []
        for (index, element) in elements.enumerated() {
            guard case .object(let members) = element else {
                items.append(.failure(.invalid([("downloads[\(index)]", "must be an object")])))
                all.append(("downloads[\(index)]", "must be an object"))
                continue
            }
            var item = RequestBody(members: members)
            let request = newDownload(&item)
            if item.errors.isEmpty {
                items.append(.success(request))
            } else {
                items.append(.failure(.invalid(item.errors)))
                all += item.errors.map { ("downloads[\(index)].\($0.field)", $0.message) }
            }
        }
        if atomic && !all.isEmpty {
            var combined = RequestBody(members: [])
            for error in all { combined.reject(error.field, error.message) }
            do {
                try combined.finish()
            } catch var problem {
                // As a refusal found later (507): every element's fate, 424 for the valid ones.
                let notAdded = Problem(EngineError.notAdded)
                problem.extra = [("results", .array(items.map { item in
                    var refusal = notAdded
                    if case .failure(let problem) = item { refusal = problem }
                    return batchResult(refusal.status, refusal.json(instance: "/downloads"))
                }))]
                throw problem
            }
        }
        return (items, atomic)
    }

    /// What makes two POSTs "the same request" for an Idempotency-Key: the body's JSON, whatever the member order
    /// or spacing.
    static func requestHash(_ body: [UInt8]) -> String {
        ETag.of((try? JSONValue.parse(body).canonical().serializedBytes()) ?? body)
    }

    private func addDownload(_ c: RequestContext) throws(Problem) -> HTTPResponse {
        var body = try RequestBody(c.request)
        if body.has("downloads") { return try addDownloads(c, &body) }
        let request = API.newDownload(&body)
        API.checkIdempotencyKey(c.request, &body)
        try body.finish()
        let key = c.request.header("Idempotency-Key")
        if engine.count >= limits.maxDownloads {
            throw tooManyDownloads
        }
        let (snapshot, created): (DownloadSnapshot, Bool)
        if let key {
            (snapshot, created) = try attempt(engine.add(request, idempotencyKey: key,
                                                         requestHash: API.requestHash(c.request.body)))
        } else {
            (snapshot, created) = try attempt(engine.add(request))
        }
        let location = "/downloads/\(snapshot.download.id)"
        return API.json(created ? 201 : 200, DownloadResource.json(snapshot), headers: [("Location", location)])
    }

    private var tooManyDownloads: Problem {
        Problem(status: 507, slug: "too-many-downloads", title: "Too many downloads",
                detail: "this server holds at most \(limits.maxDownloads) downloads; remove finished ones")
    }

    /// A batch: one answer listing each download's result (`status` 201, 200 for an existing one, or a problem's),
    /// with one commit for all. Per-item (the default) answers 200; `atomic` adds all (201) or none (the problem).
    /// A repeated Idempotency-Key answers what the first request did, each download as it is now.
    private func addDownloads(_ c: RequestContext, _ body: inout RequestBody) throws(Problem) -> HTTPResponse {
        let (items, atomic) = try API.newDownloads(from: c.request, &body)
        let key = c.request.header("Idempotency-Key")
        let hash = API.requestHash(c.request.body)
        if let key, let first = try attempt(engine.batchAnswer(key: key, requestHash: hash)) {
            return try replay(first, atomic: atomic)
        }
        let requests = items.compactMap { try? $0.get() }
        let outcomes = try attempt(engine.add(batch: requests, atomic: atomic,
                                              capacity: max(0, limits.maxDownloads - engine.count)))
        var results: [(status: Int, json: JSONValue, id: String?)] = []
        var next = outcomes.makeIterator()
        for item in items {
            switch item {
            case .failure(let problem):
                results.append((problem.status, problem.json(instance: "/downloads"), nil))
            case .success:
                switch next.next()! {
                case .added(let snapshot):
                    results.append((201, DownloadResource.json(snapshot), snapshot.download.id))
                case .existing(let snapshot):
                    results.append((200, DownloadResource.json(snapshot), snapshot.download.id))
                case .refused(let error):
                    let problem = error == .tooMany ? tooManyDownloads : Problem(error)
                    results.append((problem.status, problem.json(instance: "/downloads"), nil))
                }
            }
        }
        if atomic, let refusal = results.first(where: { $0.status >= 400 && $0.status != 424 }) {
            // Nothing was added: the answer is the refusal itself, with the others' fate in `results`.
            var problem = Problem(status: refusal.status, slug: "batch-refused", title: "Batch refused",
                                  detail: "one download of the batch was refused, so none was added: "
                                      + (refusal.json["detail"]?.stringValue ?? ""))
            problem.extra = [("results", .array(results.map { API.batchResult($0.status, $0.json) }))]
            throw problem
        }
        if let key {
            let answer = JSONValue.array(results.map { result in
                result.id.map { .object([("status", JSONValue(result.status)), ("id", .string($0))]) }
                    ?? .object([("status", JSONValue(result.status)), ("problem", result.json)])
            })
            try attempt(engine.rememberBatchAnswer(key: key, requestHash: hash, answer: answer.serialized()))
        }
        return API.batchResponse(results.map { ($0.status, $0.json) }, atomic: atomic)
    }

    /// The answer of the first request with this Idempotency-Key, each download as it is now.
    private func replay(_ stored: String, atomic: Bool) throws(Problem) -> HTTPResponse {
        guard case .array(let entries)? = try? JSONValue.parse(Array(stored.utf8)) else {
            throw Problem.internalError("the stored answer of this Idempotency-Key cannot be read")
        }
        let results: [(Int, JSONValue)] = entries.map { entry in
            let status = Int(entry["status"]?.integerValue ?? 500)
            if let id = entry["id"]?.stringValue {
                guard let snapshot = engine.snapshot(id) else {
                    return (404, Problem.notFound("the download created for this batch, '\(id)', has been removed")
                        .json(instance: "/downloads"))
                }
                return (status, DownloadResource.json(snapshot))
            }
            return (status, entry["problem"] ?? .null)
        }
        return API.batchResponse(results, atomic: atomic)
    }

    private static func batchResult(_ status: Int, _ json: JSONValue) -> JSONValue {
        .object([("status", JSONValue(status)), (status < 300 ? "download" : "problem", json)])
    }

    private static func batchResponse(_ results: [(status: Int, json: JSONValue)], atomic: Bool) -> HTTPResponse {
        let created = results.filter { $0.status == 201 }.count
        let existing = results.filter { $0.status == 200 }.count
        return API.json(atomic && created > 0 ? 201 : 200, .object([
            ("results", .array(results.map { batchResult($0.status, $0.json) })),
            ("created", JSONValue(created)),
            ("existing", JSONValue(existing)),
            ("failed", JSONValue(results.count - created - existing)),
        ]))
    }

    /// The states of a `?state=a,b` filter (nil without one), its unknown names added to `errors`.
    static func states(_ filter: String?, _ errors: inout [(field: String, message: String)]) -> Set<DownloadState>? {
        guard let filter else { return nil }
        var states: Set<DownloadState> = []
        for name in filter.split(separator: ",", omittingEmptySubsequences: false) {
            if let state = DownloadState(rawValue: String(name)) {
                states.insert(state)
            } else {
                errors.append(("state", "'\(name)' is not a state"))
            }
        }
        return states
    }

    private func listDownloads(_ c: RequestContext) throws(Problem) -> HTTPResponse {
        var errors: [(field: String, message: String)] = []
        let states = API.states(c.query["state"], &errors)
        var limit = 100
        if let text = c.query["limit"] {
            if let value = Int(text), (1...1000).contains(value) { limit = value }
            else { errors.append(("limit", "must be an integer from 1 to 1000")) }
        }
        var order = DownloadOrder.created
        var descending = false
        if var text = c.query["sort"] {
            descending = text.hasPrefix("-")
            if descending { text.removeFirst() }
            if let value = DownloadOrder(rawValue: text) {
                order = value
            } else {
                errors.append(("sort", "must be created, name, size, progress or speed, with - before it for "
                               + "descending"))
            }
        }
        // Creation order pages by sequence number (stable while downloads come and go); another order by position.
        var after: Int64 = 0
        var offset = 0
        var byPosition = order != .created || descending
        if let cursor = c.query["cursor"] {
            // A position ("o200", or a bare number in an order other than creation), or a sequence number.
            let position = cursor.hasPrefix("o") ? Int(cursor.dropFirst()) : byPosition ? Int(cursor) : nil
            if let position, position >= 0 {
                offset = position
                byPosition = true
            } else if let value = Int64(cursor), value >= 0 {
                after = value
            } else {
                errors.append(("cursor", "is not the next_cursor of an earlier page"))
            }
        }
        var search: String?
        if let text = c.query["q"] {
            if (1...200).contains(text.count) { search = text.lowercased() }
            else { errors.append(("q", "must be 1 to 200 characters")) }
        }
        let category = c.query["category"]
        if let category, let problem = Validate.categoryName(category) { errors.append(("category", problem)) }
        var changes: (changed: Set<String>, removed: [String])??
        if let text = c.query["changed_since"] {
            if let since = Int64(text), since >= 0 { changes = .some(events.changes(since: since)) }
            else { errors.append(("changed_since", "must be a sequence number from an earlier answer")) }
        }
        if !errors.isEmpty { throw Problem.invalid(errors) }
        // Read before listing: a change made after this number shows up in the next delta, never lost.
        let sequence = events.sequence
        let changed = changes??.changed
        let wanted = { (download: Download) in
            (states?.contains(download.state) ?? true) && (search.map(download.matches(search:)) ?? true)
                && (category == nil || download.category == category)
        }
        let (page, more) = if byPosition {
            engine.page(by: order, descending: descending, offset: offset, limit: limit) { download in
                (changed?.contains(download.id) ?? true) && wanted(download)
            }
        } else if let changed {
            engine.page(of: changed, after: after, limit: limit, where: wanted)
        } else {
            engine.page(after: after, limit: limit, where: wanted)
        }
        let next: JSONValue = !more ? .null
            : byPosition ? .string("o\(offset + page.count)") : .string(String(page.last!.download.sequence))
        var members: [(String, JSONValue)] = [
            ("downloads", .array(page.map(DownloadResource.json))),
            ("next_cursor", next),
            ("sequence", JSONValue(sequence)),
        ]
        if let changes {
            members.append(("removed", .array((changes?.removed ?? []).map { .string($0) })))
            // The removals before `changed_since` are forgotten: this is the full list, start afresh.
            members.append(("reset", .bool(changes == nil)))
        }
        return try conditional(c.request, API.json(200, .object(members)))
    }

    private func eventStream(_ c: RequestContext, downloadID: String?) throws(Problem) -> APIResult {
        if let downloadID, engine.snapshot(downloadID) == nil { throw Problem(EngineError.notFound(downloadID)) }
        var lastEventID: Int64?
        if let text = c.request.header("Last-Event-ID") ?? c.query["last_event_id"] {
            guard let value = Int64(text.trimmingSpaces()), value >= 0 else {
                throw Problem.invalid([("last_event_id", "must be the id of an event this server sent")])
            }
            lastEventID = value
        }
        if events.streamCount >= limits.maxEventStreams {
            throw Problem(status: 503, slug: "too-many-streams", title: "Too many event streams",
                          detail: "this server serves at most \(limits.maxEventStreams) event streams at once",
                          headers: [("Retry-After", "5")])
        }
        if c.request.method == "HEAD" {
            return .response(HTTPResponse(status: 200, headers: EventStreamRequest.standardHeaders))
        }
        var request = EventStreamRequest(downloadID: downloadID, lastEventID: lastEventID)
        if let category = c.query["category"] {
            if let problem = Validate.categoryName(category) { throw Problem.invalid([("category", problem)]) }
            request.category = category
        }
        return .eventStream(request)
    }

    /// `POST /tickets`: a ticket that opens one stream or file path for a minute, for a URL a browser opens without
    /// headers (a link, an EventSource), so that the token never goes into a URL.
    private func issueTicket(_ c: RequestContext) throws(Problem) -> HTTPResponse {
        var body = try RequestBody(c.request)
        body.rejectUnknown(except: ["path"])
        let path = body.string("path", required: true)
        if let path, router.match(path)?.route.access != .streamToken || path.contains("?") {
            body.reject("path", "must be the path of a file or an event stream: /events, /downloads/ID/events or "
                + "/downloads/ID/file")
        }
        try body.finish()
        let issued = gate.tickets.issue(path: path!, now: Date().timeIntervalSince1970)
        return API.json(201, .object([
            ("ticket", .string(issued.ticket)),
            ("path", .string(path!)),
            ("url", .string(path! + "?ticket=" + issued.ticket)),
            ("expires_at", .string(Timestamp.rfc3339(Date(timeIntervalSince1970: issued.expires)))),
        ]))
    }

    /// The settings in force, the speed limit of this moment (the schedule's), and the defaults the flags gave.
    private func settings() -> HTTPResponse {
        guard case .object(var members) = engine.currentSettings.json else { return API.json(200, .null) }
        members.append(("current_max_speed", JSONValue(engine.currentSpeedLimit ?? 0)))
        members.append(("defaults", engine.defaultSettings.json))
        return API.json(200, .object(members))
    }

    private func patchSettings(_ c: RequestContext) throws(Problem) -> HTTPResponse {
        let body = try RequestBody(c.request)
        let (change, errors) = SettingsChange.parse(body.allMembers)
        if !errors.isEmpty {
            var invalid = RequestBody(members: [])
            for error in errors { invalid.reject(error.field, error.message) }
            try invalid.finish()
        }
        _ = try attempt(engine.changeSettings(change))
        return settings()
    }

    private func stats() -> HTTPResponse {
        let totals = engine.totals()
        return API.json(200, .object([
            ("downloads", JSONValue(totals.downloads)),
            ("active", JSONValue(totals.active)),
            ("queued", JSONValue(totals.count(.queued))),
            ("paused", JSONValue(totals.count(.paused))),
            ("completed", JSONValue(totals.count(.completed))),
            ("failed", JSONValue(totals.count(.failed))),
            ("speed", .number(totals.speed.rounded())),
            ("received_bytes", JSONValue(totals.receivedBytes)),
            ("active_connections", JSONValue(totals.activeConnections)),
            ("event_streams", JSONValue(events.streamCount)),
            ("slow_event_streams", JSONValue(events.slowStreamCount)),
            ("event_queued_bytes", JSONValue(events.queuedBytes)),
            ("sequence", JSONValue(events.sequence)),
            ("disk", engine.diskSpace().map { space in
                .object([("free_bytes", JSONValue(space.free)), ("total_bytes", JSONValue(space.total)),
                         ("reserved_bytes", JSONValue(space.reserved)), ("usable_bytes", JSONValue(space.usable))])
            } ?? .null),
        ]))
    }

    /// `GET /metrics`: the Prometheus text exposition of downloads, transfers, API requests and event streams.
    private func prometheusMetrics() -> HTTPResponse {
        let totals = engine.totals()
        var out = PrometheusText()
        if let node = engine.node {
            out.family("haul_node_info", type: "gauge", help: "This node's name among the nodes sharing the store.")
            out.sample("haul_node_info", ["node": node], 1)
            out.single("haul_node_running_downloads", type: "gauge", help: "Downloads this node runs (the others' "
                       + "are in haul_downloads too).", Double(engine.runningIDs.count))
            out.single("haul_nodes_alive", type: "gauge", help: "Nodes sharing the store heard of within a lease, "
                       + "this one included: the limits are shared out among them.", Double(engine.nodeShare))
        }
        out.family("haul_downloads", type: "gauge", help: "Downloads stored, by state.")
        for state in DownloadState.allCases {
            out.sample("haul_downloads", ["state": state.rawValue], Double(totals.count(state)))
        }
        out.single("haul_downloaded_bytes_total", type: "counter",
                   help: "Body bytes written to part files since the server started.", Double(engine.bytesReceived))
        out.single("haul_download_speed_bytes_per_second", type: "gauge",
                   help: "Current transfer speed over all running downloads.", totals.speed.rounded())
        out.single("haul_download_connections", type: "gauge",
                   help: "Connections to origins open for running downloads.", Double(totals.activeConnections))
        out.single("haul_event_streams", type: "gauge", help: "Server-sent event clients connected.",
                   Double(events.streamCount))
        out.single("haul_event_streams_slow", type: "gauge",
                   help: "Event clients with events queued because they read slower than events come.",
                   Double(events.slowStreamCount))
        out.single("haul_event_queued_bytes", type: "gauge", help: "Event bytes waiting for slow clients.",
                   Double(events.queuedBytes))
        if let counts = engine.webhookDeliveryCounts() {
            out.family("haul_webhook_deliveries", type: "gauge", help: "Webhook deliveries in the outbox, by state "
                       + "(pending: not yet answered 2xx; delivered: the newest hundred per webhook kept; failed: given "
                       + "up on within a week).")
            for state in [WebhookDelivery.State.pending, .delivered, .failed] {
                out.sample("haul_webhook_deliveries", ["state": state.rawValue], Double(counts[state] ?? 0))
            }
        }
        if let space = engine.diskSpace() {
            out.single("haul_disk_free_bytes", type: "gauge", help: "Free bytes of the download root's file system "
                       + "(for unprivileged users).", Double(space.free))
            out.single("haul_disk_total_bytes", type: "gauge", help: "Size of the download root's file system.",
                       Double(space.total))
            out.single("haul_disk_usable_bytes", type: "gauge", help: "Free bytes downloads may still take: the free "
                       + "space less --min-free-space.", Double(space.usable))
        }
        metrics.render(into: &out)
        if let resident = ProcessStats.residentBytes {
            out.single("process_resident_memory_bytes", type: "gauge", help: "Resident memory size in bytes.",
                       resident)
        }
        out.single("process_cpu_seconds_total", type: "counter", help: "User and system CPU time spent in seconds.",
                   ProcessStats.cpuSeconds)
        if let descriptors = ProcessStats.openDescriptors {
            out.single("process_open_fds", type: "gauge", help: "Number of open file descriptors.", descriptors)
        }
        out.single("process_start_time_seconds", type: "gauge",
                   help: "Start time of the process since unix epoch in seconds.", startedAt.rounded())
        return HTTPResponse(status: 200, headers: [("Content-Type", PrometheusText.contentType)],
                            body: Array(out.text.utf8))
    }

    private func getDownload(_ c: RequestContext) throws(Problem) -> HTTPResponse {
        let id = c.parameters["id"]!
        guard let snapshot = engine.snapshot(id) else { throw Problem(EngineError.notFound(id)) }
        return try conditional(c.request, API.json(200, DownloadResource.json(snapshot)))
    }

    private func patchDownload(_ c: RequestContext) throws(Problem) -> HTTPResponse {
        let id = c.parameters["id"]!
        guard engine.snapshot(id) != nil else { throw Problem(EngineError.notFound(id)) }
        var body = try RequestBody(c.request)
        body.rejectUnknown(except: ["state", "priority", "max_speed", "connections"])
        var changes = DownloadChanges()
        if let state = body.string("state") {
            if state == DownloadState.paused.rawValue || state == DownloadState.queued.rawValue {
                changes.state = DownloadState(rawValue: state)
            } else {
                body.reject("state", "must be 'paused' or 'queued'")
            }
        }
        changes.priority = body.integer("priority", in: -1000...1000).map(Int.init)
        changes.connections = body.integer("connections", in: 1...32).map(Int.init)
        if let speed = body.nullableInteger("max_speed", in: 0...Int64(1) << 50) {
            changes.maxSpeed = .some(speed.flatMap { $0 == 0 ? nil : $0 })
        }
        try body.finish()
        return API.json(200, DownloadResource.json(try attempt(engine.update(id, changes))))
    }

    /// The most downloads one action names.
    static let maxActionIDs = 10_000

    /// `POST /downloads/actions`: pause, resume or remove the downloads named by `ids` or the ones in `state`
    /// (`{"action": "remove", "state": ["completed"]}` clears the finished ones); each answered on its own.
    private func act(_ c: RequestContext) throws(Problem) -> APIResult {
        var body = try RequestBody(c.request)
        body.rejectUnknown(except: ["action", "ids", "state", "delete_file"])
        let action = body.string("action", required: true)
        if let action, !["pause", "resume", "remove"].contains(action) {
            body.reject("action", "must be pause, resume or remove")
        }
        let deleteFile = body.bool("delete_file") ?? false
        if deleteFile, action != "remove" { body.reject("delete_file", "goes with remove only") }
        var ids: [String] = []
        if let list = body.array("ids", count: 1...API.maxActionIDs) {
            ids = list.compactMap(\.stringValue)
            if ids.count != list.count { body.reject("ids", "must be download ids (strings)") }
        }
        var states: Set<DownloadState>?
        if let list = body.array("state", count: 1...DownloadState.allCases.count) {
            let parsed = list.compactMap { $0.stringValue.flatMap(DownloadState.init(rawValue:)) }
            if parsed.count == list.count { states = Set(parsed) } else { body.reject("state", "must be states") }
        }
        if body.has("ids") == body.has("state") { body.reject("ids", "give ids or state, one of them") }
        try body.finish()
        if let states {
            ids = engine.ids { states.contains($0.state) }
        }
        let results = Box<[JSONValue]>([])
        let failed = Box(0)
        func failure(_ id: String, _ error: EngineError) -> JSONValue {
            failed.value += 1
            let problem = Problem(error)
            return .object([("id", .string(id)), ("status", JSONValue(problem.status)),
                            ("problem", problem.json(instance: "/downloads/" + id))])
        }
        let total = ids.count
        return inSlices(ids, { [engine] slice throws(Problem) in
            switch action {
            case "remove":
                do throws(EngineError) {
                    let removed = Set(try engine.remove(batch: Array(slice), deleteFile: deleteFile))
                    for id in slice {
                        results.value.append(removed.contains(id)
                            ? .object([("id", .string(id)), ("status", JSONValue(204))])
                            : failure(id, .notFound(id)))
                    }
                } catch {
                    for id in slice { results.value.append(failure(id, error)) }
                }
            default:
                let target: DownloadState = action == "pause" ? .paused : .queued
                for (id, result) in engine.update(batch: Array(slice), DownloadChanges(state: target)) {
                    switch result {
                    case .success(let snapshot):
                        results.value.append(.object([("id", .string(id)), ("status", JSONValue(200)),
                                                      ("download", DownloadResource.json(snapshot))]))
                    case .failure(let error):
                        results.value.append(failure(id, error))
                    }
                }
            }
        }, finish: {
            API.json(200, .object([("results", .array(results.value)), ("succeeded", JSONValue(total - failed.value)),
                                   ("failed", JSONValue(failed.value))]))
        })
    }

    private func deleteDownload(_ c: RequestContext) throws(Problem) -> HTTPResponse {
        let id = c.parameters["id"]!
        var deleteFile = false
        if let flag = c.query["delete_file"] {
            guard flag == "true" || flag == "false" else {
                throw Problem.invalid([("delete_file", "must be true or false")])
            }
            deleteFile = flag == "true"
        }
        try attempt(engine.remove(id, deleteFile: deleteFile))
        return HTTPResponse(status: 204)
    }

    // MARK: helpers

    /// Adds an ETag (a hash of the body) and answers 304 when the client's If-None-Match names it: a poller that
    /// already has the current state pays for no body.
    func conditional(_ request: HTTPRequest, _ response: HTTPResponse) throws(Problem) -> HTTPResponse {
        let tag = ETag.of(response.body)
        var response = response
        response.headers.append(("ETag", tag))
        if let header = request.header("If-None-Match"), ETag.matches(header, tag) {
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
        HTTPResponse(status: status, headers: [("Content-Type", "application/json")] + headers,
                     body: value.serializedBytes())
    }
}

/// How much clients may make the server hold.
public struct APILimits: Sendable {
    /// Path and query of one request.
    public var maxTargetBytes = 8192
    /// Downloads stored, finished ones included.
    public var maxDownloads = 100_000
    /// Event streams open at once.
    public var maxEventStreams = 10_000

    public init() {}
}
