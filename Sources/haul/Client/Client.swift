import FoundationEssentials
import Glibc
import HaulCore
import HaulLoop

/// The API as the client calls it: JSON in and out, problems turned into messages.
struct Client {
    let server: String
    let token: String?

    init(server: String, token: String?) {
        self.server = server
        self.token = token
    }

    /// The server and token from the options, else the environment: --server, HAUL_SERVER, the address in
    /// HAUL_LISTEN (a wildcard one on loopback: the container's HEALTHCHECK follows its port), 127.0.0.1:8080.
    init(options: Options, environment: [String: String]) throws(ClientCommand.Stop) {
        // An empty variable (`HAUL_SERVER=` in a script or a compose file) is no setting.
        let set = { (name: String) in environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        var server =
            options.value("server") ?? set("HAUL_SERVER")
            ?? set("HAUL_LISTEN").flatMap(ListenAddress.init)?.localURL ?? "http://127.0.0.1:8080"
        if !server.contains("://") { server = "http://" + server }
        while server.hasSuffix("/") { server.removeLast() }
        self.server = server
        token = options.value("token") ?? set("HAUL_TOKEN")
    }

    private func request(_ method: String, _ path: String) -> APIRequest {
        var request = APIRequest(method: method, url: server + path)
        request.headers.append(("Accept", "application/json"))
        if let token { request.headers.append(("Authorization", "Bearer " + token)) }
        return request
    }

    /// Sends one request; a 2xx answer's JSON (null for none), or a Stop carrying the server's problem.
    func call(_ method: String, _ path: String, body: JSONValue? = nil) throws(ClientCommand.Stop) -> JSONValue {
        try exchange(method, path, body: body).json
    }

    /// `call`'s answer with its status (200 and 201 tell an existing download from a new one).
    func exchange(
        _ method: String, _ path: String, body: JSONValue? = nil
    ) throws(ClientCommand.Stop)
        -> (status: Int, json: JSONValue)
    {
        var request = request(method, path)
        if let body {
            request.headers.append(("Content-Type", "application/json"))
            request.body = body.serializedBytes()
        }
        let reply: (status: Int, body: [UInt8])
        do {
            reply = try request.send()
        } catch {
            throw unreachable(error)
        }
        guard (200..<300).contains(reply.status) else { throw problem(reply.status, reply.body) }
        if reply.body.isEmpty { return (reply.status, .null) }
        guard let json = try? JSONValue.parse(reply.body) else {
            throw ClientCommand.Stop(
                status: .failed,
                message: "\(server) is not a Haul server: it answered \(path) "
                    + "with something other than JSON (set --server or HAUL_SERVER)")
        }
        return (reply.status, json)
    }

    /// Follows an event stream, handing each event to `onEvent` until it returns false. A stream that drops after
    /// it opened (the server restarted, the network blinked) is opened again every two seconds with
    /// `Last-Event-ID`, so nothing is missed; a refusal (401, 404, ...) ends it with the server's problem.
    /// `notice` says that the stream was lost and found again (on a line of its own: a bar may be drawn).
    func events(
        _ path: String, notice: @escaping (String) -> Void = { printError($0) },
        _ onEvent: @escaping (EventParser.Event) -> Bool
    ) throws(ClientCommand.Stop) {
        var lastEventID: String?
        var opened = false
        var lost = false
        while true {
            var request = request("GET", path)
            request.headers = [("Accept", "text/event-stream")] + request.headers.filter { $0.0 != "Accept" }
            if let lastEventID { request.headers.append(("Last-Event-ID", lastEventID)) }
            request.timeout = 0
            var parser = EventParser()
            var errorBody: [UInt8] = []
            var done = false
            var status = 0
            do {
                status = try request.stream { status, chunk in
                    guard (200..<300).contains(status) else {
                        errorBody += chunk
                        return true
                    }
                    opened = true
                    if lost {
                        notice("haul: reconnected")
                        lost = false
                    }
                    for event in parser.feed(chunk) {
                        if let id = event.id { lastEventID = id }
                        if !onEvent(event) {
                            done = true
                            return false
                        }
                    }
                    return true
                }
            } catch {
                if !opened { throw unreachable(error) }
            }
            if done { return }
            if status != 0, !(200..<300).contains(status) { throw problem(status, errorBody) }
            if !lost {
                notice("haul: lost the event stream from \(server); reconnecting")
                lost = true
            }
            sleep(2)
        }
    }

    /// Streams the bytes of `path` (with `headers`) to `onBytes` as they arrive, until it returns false; a refusal
    /// is a Stop carrying the server's problem, a transfer cut off one naming `what`.
    func bytes(
        _ path: String, headers: [(String, String)], what: String, _ onBytes: @escaping ([UInt8]) -> Bool
    ) throws(ClientCommand.Stop) {
        var request = request("GET", path)
        request.headers = request.headers.filter { $0.0 != "Accept" } + headers
        request.timeout = 0
        var errorBody: [UInt8] = []
        var opened = false
        let status: Int
        do {
            status = try request.stream { status, chunk in
                guard (200..<300).contains(status) else {
                    errorBody += chunk
                    return true
                }
                opened = true
                return onBytes(chunk)
            }
        } catch {
            if !opened { throw unreachable(error) }
            throw ClientCommand.Stop(status: .failed, message: "\(what) was cut off: \(error)")
        }
        if !(200..<300).contains(status) { throw problem(status, errorBody) }
    }

    private func unreachable(_ error: APIRequest.Failure) -> ClientCommand.Stop {
        ClientCommand.Stop(
            status: .unreachable,
            message: "cannot reach the server at \(server): \(error.description)"
                + " (is `haul serve` running? set --server or HAUL_SERVER)")
    }

    /// The message of a problem+json answer: its detail (or title); a 422's are the invalid fields.
    private func problem(_ status: Int, _ body: [UInt8]) -> ClientCommand.Stop {
        guard let json = try? JSONValue.parse(body), json["title"]?.stringValue != nil else {
            return ClientCommand.Stop(
                status: .failed,
                message: "\(server) answered HTTP \(status), and not as Haul "
                    + "does: it is not a Haul server, or none is behind it (set --server or "
                    + "HAUL_SERVER)")
        }
        var message = Client.message(of: json)
        if status == 401 { message += " (pass --token or set HAUL_TOKEN)" }
        return ClientCommand.Stop(status: .failed, message: message)
    }

    /// What a problem document says: each invalid field (`url: must be ...`), else its detail, else its title.
    static func message(of problem: JSONValue) -> String {
        if case .array(let errors)? = problem["errors"], !errors.isEmpty {
            return errors.map { "\($0["field"]?.stringValue ?? "?"): \($0["message"]?.stringValue ?? "")" }
                .joined(separator: "; ")
        }
        return problem["detail"]?.stringValue ?? problem["title"]?.stringValue ?? "refused"
    }

    /// Percent-encodes a path segment or query value.
    static func escape(_ text: String) -> String {
        PercentEncoding.encode(text, keeping: ",")
    }
}
