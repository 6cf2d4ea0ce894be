import FoundationEssentials
import HaulCore
import HaulLoop

/// aria2's JSON-RPC at `/jsonrpc`, as aria2 serves it: a POST of one call or a batch, a GET with `method`, `id` and
/// base64 `params` (with `jsoncallback`, JSONP). Answers are `application/json-rpc`: 200, or 400 for an error
/// (500 for a body that is not JSON), as aria2 1.36 answers.
extension API {
    var aria2Routes: [Route] {
        [
            Route(
                pattern: API.rpcRoute, access: .open,
                handlers: [
                    "POST": .write(.rpc) { [unowned self] c throws(Problem) in .response(self.rpcPost(c)) },
                    "GET": .read(.rpcRead, query: ["method", "id", "params", "jsoncallback", "token"]) {
                        [unowned self] c throws(Problem) in
                        if let upgrade = c.request.header("Upgrade"), ASCII.equalsIgnoringCase(upgrade, "websocket") {
                            return .webSocket(try self.webSocketHandshake(c.request, query: c.query))
                        }
                        return .response(self.rpcGet(c))
                    },
                ])
        ]
    }

    private func rpcPost(_ c: RequestContext) -> HTTPResponse {
        // `Origin: null` (a page opened from a file, or a sandboxed frame on any site: anyone can send it) gets
        // answers only to calls that carry the token.
        let origin = c.request.header("Origin")
        let caller = Aria2RPC.Request(address: c.request.peer, mayChange: true, needsToken: origin == "null")
        guard c.request.body.count <= RequestBody.maxBytes else {
            return rpcResponse(
                .null, status: 413,
                error: Aria2RPC.RPCError(
                    "the request is larger than "
                        + "\(RequestBody.maxBytes) bytes", code: -32600))
        }
        let response = rpcResponse(aria2.answer(c.request.body, caller: caller))
        guard origin == "null", caller.provedToken else { return response }
        return response.adding(gate.corsHeaders(origin: "null"))
    }

    /// Whether a GET may have been made by a page of another site (a script tag, an image, a link): the browser
    /// marks it (`Sec-Fetch-Site`), or its Referer names another origin. Such a request gets no data without the
    /// token: a script tag walks around CORS, and JSONP is made to be read that way.
    private func mayBeFromAnotherSite(_ request: HTTPRequest) -> Bool {
        if let site = request.header("Sec-Fetch-Site")?.lowercased(), site == "cross-site" || site == "same-site" {
            return true
        }
        guard let referer = request.header("Referer"), let parts = URLComponents(string: referer),
            let scheme = parts.scheme, let host = parts.host
        else { return false }
        let origin = scheme + "://" + (host.contains(":") ? "[\(host)]" : host) + (parts.port.map { ":\($0)" } ?? "")
        return !AccessGate.isSameOrigin(origin, request)
    }

    /// The 101's headers for a valid handshake (RFC 6455 section 4.2.1), else the problem. A page's WebSocket
    /// carries its Origin, which must be this server's own or one of --cors-origin: a socket may change things,
    /// and browsers let any page open one (cross-site WebSocket hijacking).
    private func webSocketHandshake(
        _ request: HTTPRequest, query: [String: String]
    ) throws(Problem)
        -> WebSocketUpgrade
    {
        guard
            request.header("Connection")?.lowercased().split(separator: ",")
                .contains(where: { HTTPField.trimmed(String($0)) == "upgrade" }) == true
        else {
            throw Problem.badRequest("a WebSocket handshake needs 'Connection: Upgrade'")
        }
        guard request.header("Sec-WebSocket-Version") == "13" else {
            throw Problem(
                status: 426, slug: "upgrade-required", title: "Upgrade required",
                detail: "only WebSocket version 13 is spoken", headers: [("Sec-WebSocket-Version", "13")])
        }
        guard let key = request.header("Sec-WebSocket-Key"), Base64.decode(key)?.count == 16 else {
            throw Problem.badRequest("Sec-WebSocket-Key must be 16 bytes in base64")
        }
        if let origin = request.header("Origin"), !gate.allowsOrigin(origin, request) {
            throw Problem(
                status: 403, slug: "origin-not-allowed", title: "Origin not allowed",
                detail: origin == "null"
                    ? "a WebSocket from Origin null (a file, or a sandboxed frame) "
                        + "is answered only by a server with a token"
                    : "WebSockets from \(origin) are not "
                        + "allowed; see --cors-origin")
        }
        try checkLongLivedRoom()
        // A client that only listens (aria2p's notifications) proves the token in its handshake; others by
        // their calls. A wrong one is refused and counted as a wrong bearer token is.
        var caller: Caller?
        if gate.hasToken, let presented = AccessGate.bearer(request.header("Authorization")) ?? query["token"] {
            guard
                let admitted = gate.admitsSecret(
                    presented, address: request.peer,
                    now: ProcessInfo.processInfo.systemUptime)
            else {
                throw Problem(
                    status: 401, slug: "unauthorized", title: "Unauthorized",
                    detail: "the token is not right", headers: [("WWW-Authenticate", "Bearer realm=\"haul\"")])
            }
            caller = admitted
        }
        return WebSocketUpgrade(
            headers: [
                ("Upgrade", "websocket"), ("Connection", "Upgrade"),
                ("Sec-WebSocket-Accept", WebSocketFrames.accept(key: key)),
            ], caller: caller)
    }

    private func rpcGet(_ c: RequestContext) -> HTTPResponse {
        let caller = Aria2RPC.Request(
            address: c.request.peer, mayChange: false,
            needsToken: c.query["jsoncallback"] != nil || mayBeFromAnotherSite(c.request)
                || c.request.header("Origin") == "null")
        var request: [(String, JSONValue)] = [("jsonrpc", .string("2.0"))]
        if let id = c.query["id"] { request.append(("id", .string(id))) }
        if let method = c.query["method"] { request.append(("method", .string(method))) }
        var answer: JSONValue
        if let encoded = c.query["params"] {
            // Base64 in a query: a '+' may arrive as a space, and some clients use the URL-safe alphabet.
            let normalized = String(encoded.map { $0 == " " || $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
            if let bytes = Base64.decode(normalized), let params = try? JSONValue.parse(bytes) {
                request.append(("params", params))
                answer = aria2.answer(.object(request), caller: caller)
            } else {
                answer = .object([
                    ("id", JSONValue(c.query["id"])), ("jsonrpc", .string("2.0")),
                    ("error", Aria2RPC.RPCError("Parse error.", code: -32700).json),
                ])
            }
        } else {
            answer = aria2.answer(.object(request), caller: caller)
        }
        // JSONP runs the answer as a script on whatever page asked: only an answer to a call that carried the
        // token is wrapped; any other goes back as plain JSON, which a script tag cannot read.
        guard let callback = c.query["jsoncallback"], caller.provedToken else { return rpcResponse(answer) }
        guard API.isCallbackName(callback) else {
            return rpcResponse(
                .object([
                    ("id", JSONValue(c.query["id"])), ("jsonrpc", .string("2.0")),
                    ("error", Aria2RPC.RPCError("Invalid jsoncallback.", code: -32600).json),
                ]))
        }
        var body = Array(callback.utf8) + Array("(".utf8)
        body += answer.serializedBytes()
        body += Array(");".utf8)
        return HTTPResponse(status: 200, headers: [("Content-Type", "text/javascript")], body: body)
    }

    /// A response of `answer`: 400 when it is one error, 500 for a parse error, 200 otherwise (a batch).
    private func rpcResponse(_ answer: JSONValue, status: Int? = nil, error: Aria2RPC.RPCError? = nil) -> HTTPResponse {
        var answer = answer
        if let error { answer = .object([("id", .null), ("jsonrpc", .string("2.0")), ("error", error.json)]) }
        var code = 200
        if let failure = answer["error"] {
            code = failure["code"]?.integerValue == -32700 ? 500 : 400
        }
        return HTTPResponse(
            status: status ?? code, headers: [("Content-Type", "application/json-rpc")],
            body: answer.serializedBytes())
    }

    /// What `aria2.addUri` makes of a JSON-RPC body without adding anything (nil when it is refused), for the
    /// fuzzer, which feeds it anything: the options through aria2's names, `dir` against `root`.
    public static func decodeAria2AddURI(_ body: [UInt8], root: String) -> NewDownload? {
        guard let call = try? JSONValue.parse(body), case .array(let params)? = call["params"],
            case .array(let uris)? = params.first
        else { return nil }
        var options: [(String, JSONValue)] = []
        if params.count > 1, case .object(let members) = params[1] { options = members }
        let sources = uris.compactMap(\.stringValue)
        guard sources.count == uris.count, (1...(API.maxMirrors + 1)).contains(sources.count) else { return nil }
        return try? Aria2Options.newDownload(uris: sources, options: options, root: root)
    }

    /// A JSONP callback: a JavaScript name or dotted path, nothing that could end the call and start another.
    static func isCallbackName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 128
            && name.utf8.allSatisfy { byte in
                (byte >= 48 && byte <= 57) || (byte >= 65 && byte <= 90) || (byte >= 97 && byte <= 122)
                    || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "$") || byte == UInt8(ascii: ".")
            }
    }
}
