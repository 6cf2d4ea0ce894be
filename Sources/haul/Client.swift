import FoundationEssentials
import Glibc
import HaulCore
import HaulLoop

/// The command-line client: `haul add|ls|pause|resume|rm|watch`, talking to a running `haul serve` over its API.
enum ClientCommand {
    static let usage = """
        usage: haul <command> [options]
          serve                    run the server (haul serve --help for its options)
          add URL [--wait]         add a download and print its id; --wait follows it with a progress bar and
                                   exits when it ends. Also: --filename NAME, --directory DIR, --connections N,
                                   --checksum sha256:HEX, --max-speed BYTES, --header 'Name: value' (repeatable),
                                   --paused, --insecure
          ls [--state S,...] [--json]  list downloads (all pages)
          pause ID...              pause downloads
          resume ID...             resume paused or failed downloads
          rm ID... [--delete-file] remove downloads (the part file goes; --delete-file also a finished file)
          watch [ID]               follow events: every download's changes, or one download's progress until it
                                   ends
          health                   exit 0 if the server answers /healthz (the container's HEALTHCHECK)
        every command takes --server URL (HAUL_SERVER; else the address in HAUL_LISTEN, a wildcard one on
        loopback; else http://127.0.0.1:8080) and --token TOKEN (HAUL_TOKEN)
        exit status: 0 done, 1 the server refused or the download failed, 2 bad usage, 3 no server reachable
        """

    /// Exit statuses.
    enum Status: Int32 {
        case ok = 0, failed = 1, usage = 2, unreachable = 3
    }

    struct Stop: Error {
        let status: Status
        let message: String
    }

    static func run(_ command: String, _ arguments: [String]) -> Int32 {
        do throws(Stop) {
            var options = try Options(arguments, environment: ProcessInfo.processInfo.environment)
            let client = Client(server: options.server, token: options.token)
            switch command {
            case "add": try add(client, &options)
            case "ls": try list(client, &options)
            case "pause": try setState(client, &options, "paused")
            case "resume": try setState(client, &options, "queued")
            case "rm": try remove(client, &options)
            case "watch": try watch(client, &options)
            case "health": try health(client, &options)
            default: throw Stop(status: .usage, message: "unknown command '\(command)'")
            }
            return Status.ok.rawValue
        } catch {
            printError("haul: \(error.message)")
            if error.status == .usage { printError("\n" + usage) }
            return error.status.rawValue
        }
    }

    // MARK: commands

    private static func add(_ client: Client, _ options: inout Options) throws(Stop) {
        let wait = options.flag("wait")
        var members: [(String, JSONValue)] = []
        if let name = options.value("filename") { members.append(("filename", .string(name))) }
        if let directory = options.value("directory") { members.append(("directory", .string(directory))) }
        if let text = options.value("connections") { members.append(("connections", try number(text, "connections"))) }
        if let text = options.value("max-speed") { members.append(("max_speed", try number(text, "max-speed"))) }
        if let checksum = options.value("checksum") { members.append(("checksum", .string(checksum))) }
        if options.flag("paused") { members.append(("start_paused", .bool(true))) }
        if options.flag("insecure") { members.append(("insecure", .bool(true))) }
        var headers: [(String, JSONValue)] = []
        for header in options.values("header") {
            guard let colon = header.firstIndex(of: ":") else {
                throw Stop(status: .usage, message: "--header takes 'Name: value', not '\(header)'")
            }
            headers.append((String(header[..<colon]),
                            .string(header[header.index(after: colon)...].trimmingSpaces())))
        }
        if !headers.isEmpty { members.append(("headers", .object(headers))) }
        let urls = try options.positionals(1...1, "add takes one URL")
        members.insert(("url", .string(urls[0])), at: 0)
        try options.finish()

        // The sequence before the POST: following from it, no event of the new download can be missed.
        let sequence = wait ? try client.call("GET", "/stats")["sequence"]?.integerValue : nil
        let download = DownloadView(try client.call("POST", "/downloads", body: .object(members)))
        printOutput(download.id)
        if wait { try follow(client, download, after: sequence) }
    }

    private static func list(_ client: Client, _ options: inout Options) throws(Stop) {
        let state = options.value("state")
        let json = options.flag("json")
        _ = try options.positionals(0...0, "ls takes no arguments")
        try options.finish()
        var all: [JSONValue] = []
        var cursor: String?
        repeat {
            var path = "/downloads?limit=1000"
            if let state { path += "&state=" + Client.escape(state) }
            if let cursor { path += "&cursor=" + cursor }
            let page = try client.call("GET", path)
            if case .array(let downloads) = page["downloads"] { all += downloads }
            cursor = page["next_cursor"]?.stringValue
        } while cursor != nil
        if json {
            printOutput(JSONValue.array(all).serialized())
            return
        }
        printOutput("\(Format.column("ID", 17)) \(Format.column("STATE", 12)) \(Format.column("DONE", 5)) "
              + "\(Format.column("SIZE", 24)) \(Format.column("SPEED", 12)) NAME")
        for item in all {
            let d = DownloadView(item)
            let speed = d.isRunning && d.speed > 0 ? Format.bytes(Int64(d.speed)) + "/s" : ""
            var line = "\(Format.column(d.id, 17)) \(Format.column(d.state, 12)) \(Format.column(d.percent, 5)) "
                + "\(Format.column(d.size, 24)) \(Format.column(speed, 12)) \(d.name)"
            if let error = d.error { line += "  (\(error.code): \(error.message))" }
            printOutput(line)
        }
    }

    private static func setState(_ client: Client, _ options: inout Options, _ state: String) throws(Stop) {
        let ids = try options.positionals(1...Int.max, "give the id of at least one download")
        try options.finish()
        for id in ids {
            let download = DownloadView(try client.call("PATCH", "/downloads/" + Client.escape(id),
                                                        body: .object([("state", .string(state))])))
            printOutput("\(download.id) \(download.state) \(download.name)")
        }
    }

    private static func remove(_ client: Client, _ options: inout Options) throws(Stop) {
        let deleteFile = options.flag("delete-file")
        let ids = try options.positionals(1...Int.max, "give the id of at least one download")
        try options.finish()
        for id in ids {
            _ = try client.call("DELETE", "/downloads/" + Client.escape(id) + (deleteFile ? "?delete_file=true" : ""))
            printOutput("\(id) removed")
        }
    }

    private static func watch(_ client: Client, _ options: inout Options) throws(Stop) {
        let ids = try options.positionals(0...1, "watch takes at most one id")
        try options.finish()
        if let id = ids.first {
            let sequence = try client.call("GET", "/stats")["sequence"]?.integerValue
            let download = DownloadView(try client.call("GET", "/downloads/" + Client.escape(id)))
            return try follow(client, download, after: sequence)
        }
        var lastProgress: [String: Double] = [:]
        func describe(_ d: DownloadView) -> String {
            var line = "\(d.id) \(d.state) \(d.name)"
            if let error = d.error { line += " (\(error.code): \(error.message))" }
            if d.state == "completed", let path = d.path { line += " -> \(path)" }
            return line
        }
        try client.events("/events") { event in
            guard let data = try? JSONValue.parse(event.data) else { return true }
            switch event.name {
            case "created", "state":
                printOutput(describe(DownloadView(data)))
            case "snapshot":
                // Away longer than the server remembers: where everything stands now.
                if case .array(let all)? = data["downloads"] { for d in all { printOutput(describe(DownloadView(d))) } }
            case "progress":
                let d = DownloadView(data)
                let now = ProcessInfo.processInfo.systemUptime
                guard now - (lastProgress[d.id] ?? 0) >= 1 else { break }
                lastProgress[d.id] = now
                printOutput("\(d.id) \(d.state) \(d.name) \(d.percent) \(d.size) \(Format.bytes(Int64(d.speed)))/s")
            case "removed":
                printOutput("\(data["id"]?.stringValue ?? "?") removed")
            default:
                break
            }
            return true
        }
    }

    private static func health(_ client: Client, _ options: inout Options) throws(Stop) {
        _ = try options.positionals(0...0, "health takes no arguments")
        try options.finish()
        let answer = try client.call("GET", "/healthz")
        guard answer["status"]?.stringValue == "ok" else {
            throw Stop(status: .failed, message: "the server at \(client.server) is not healthy: \(answer.serialized())")
        }
        printOutput("ok")
    }

    /// Shows one download's progress until it completes (returns) or fails or is removed (throws).
    private static func follow(_ client: Client, _ start: DownloadView, after sequence: Int64?) throws(Stop) {
        let display = ProgressDisplay()
        var current = start
        var removed = false
        // The events replayed from `sequence` tell the whole story; `start` may be newer than the first of them.
        if !current.isFinished {
            var path = "/downloads/" + Client.escape(current.id) + "/events"
            if let sequence { path += "?last_event_id=\(sequence)" }
            try client.events(path) { event in
                switch event.name {
                case "created", "progress", "state":
                    guard let data = try? JSONValue.parse(event.data) else { return true }
                    current = DownloadView(data)
                case "snapshot":
                    guard let data = try? JSONValue.parse(event.data), case .array(let all)? = data["downloads"],
                          let first = all.first else { return true }
                    current = DownloadView(first)
                case "removed":
                    removed = true
                    return false
                default:
                    return true
                }
                display.show(current)
                return !current.isFinished
            }
        }
        display.finish()
        if removed { throw Stop(status: .failed, message: "\(current.id) was removed") }
        switch current.state {
        case "completed":
            printError("\(current.name): completed, \(Format.bytes(current.received))"
                       + (current.path.map { " -> \($0)" } ?? ""))
        case "failed":
            let reason = current.error.map { "\($0.code): \($0.message)" } ?? "no reason given"
            throw Stop(status: .failed, message: "\(current.name) failed: \(reason)")
        default:
            throw Stop(status: .failed, message: "the event stream ended while \(current.id) was \(current.state)")
        }
    }

    private static func number(_ text: String, _ name: String) throws(Stop) -> JSONValue {
        guard let value = Int64(text) else { throw Stop(status: .usage, message: "--\(name) takes a number") }
        return JSONValue(value)
    }
}

/// The API as the client calls it: JSON in and out, problems turned into messages.
struct Client {
    let server: String
    let token: String?

    private func request(_ method: String, _ path: String) -> APIRequest {
        var request = APIRequest(method: method, url: server + path)
        request.headers.append(("Accept", "application/json"))
        if let token { request.headers.append(("Authorization", "Bearer " + token)) }
        return request
    }

    /// Sends one request; a 2xx answer's JSON (null for none), or a Stop carrying the server's problem.
    func call(_ method: String, _ path: String, body: JSONValue? = nil) throws(ClientCommand.Stop) -> JSONValue {
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
        if reply.body.isEmpty { return .null }
        do {
            return try JSONValue.parse(reply.body)
        } catch {
            throw ClientCommand.Stop(status: .failed, message: "the server at \(server) sent something other than "
                                     + "JSON (\(error)); is it a Haul server?")
        }
    }

    /// Follows an event stream, handing each event to `onEvent` until it returns false. A stream that drops after
    /// it opened (the server restarted, the network blinked) is opened again every two seconds with
    /// `Last-Event-ID`, so nothing is missed; a refusal (401, 404, ...) ends it with the server's problem.
    func events(_ path: String, _ onEvent: @escaping (EventParser.Event) -> Bool) throws(ClientCommand.Stop) {
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
                        printError("haul: reconnected")
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
                printError("haul: lost the event stream from \(server); reconnecting")
                lost = true
            }
            sleep(2)
        }
    }

    private func unreachable(_ error: APIRequest.Failure) -> ClientCommand.Stop {
        ClientCommand.Stop(status: .unreachable, message: "cannot reach the server at \(server): \(error.description)"
                           + " (is `haul serve` running? set --server or HAUL_SERVER)")
    }

    /// The message of a problem+json answer: title, detail and each invalid field.
    private func problem(_ status: Int, _ body: [UInt8]) -> ClientCommand.Stop {
        guard let json = try? JSONValue.parse(body), let title = json["title"]?.stringValue else {
            return ClientCommand.Stop(status: .failed, message: "the server answered HTTP \(status)")
        }
        var message = json["detail"]?.stringValue ?? title
        if status == 401 { message += " (pass --token or set HAUL_TOKEN)" }
        if case .array(let errors)? = json["errors"] {
            for error in errors {
                message += "\n  \(error["field"]?.stringValue ?? "?"): \(error["message"]?.stringValue ?? "")"
            }
        }
        return ClientCommand.Stop(status: .failed, message: message)
    }

    /// Percent-encodes a path segment or query value.
    static func escape(_ text: String) -> String {
        PercentEncoding.encode(text, keeping: ",")
    }
}

/// Client command lines: `--name value`, `--name=value`, switches, and positional arguments, in any order.
struct Options {
    private static let switches: Set<String> = ["wait", "json", "delete-file", "paused", "insecure"]
    private static let valued: Set<String> = ["server", "token", "filename", "directory", "connections", "checksum",
                                              "max-speed", "header", "state"]
    private var named: [String: [String]] = [:]
    private var consumed: Set<String> = ["server", "token"]
    private var positional: [String] = []
    let server: String
    let token: String?

    init(_ arguments: [String], environment: [String: String]) throws(ClientCommand.Stop) {
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            guard argument.hasPrefix("--"), argument.count > 2 else {
                positional.append(argument)
                continue
            }
            var name = String(argument.dropFirst(2))
            var value: String?
            if let equals = name.firstIndex(of: "=") {
                value = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            if Options.switches.contains(name) {
                named[name, default: []].append(value ?? "1")
            } else if Options.valued.contains(name) {
                if value == nil {
                    guard index < arguments.count else {
                        throw ClientCommand.Stop(status: .usage, message: "--\(name) needs a value")
                    }
                    value = arguments[index]
                    index += 1
                }
                named[name, default: []].append(value!)
            } else {
                throw ClientCommand.Stop(status: .usage, message: "unknown option --\(name)")
            }
        }
        var server = named["server"]?.last ?? environment["HAUL_SERVER"]
            ?? environment["HAUL_LISTEN"].flatMap(ListenAddress.init)?.localURL ?? "http://127.0.0.1:8080"
        if !server.contains("://") { server = "http://" + server }
        while server.hasSuffix("/") { server.removeLast() }
        self.server = server
        token = named["token"]?.last ?? environment["HAUL_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
    }

    mutating func flag(_ name: String) -> Bool {
        consumed.insert(name)
        return named[name].map { $0.last != "0" } ?? false
    }

    mutating func value(_ name: String) -> String? {
        consumed.insert(name)
        return named[name]?.last
    }

    mutating func values(_ name: String) -> [String] {
        consumed.insert(name)
        return named[name] ?? []
    }

    func positionals(_ count: ClosedRange<Int>, _ message: String) throws(ClientCommand.Stop) -> [String] {
        guard count.contains(positional.count) else { throw ClientCommand.Stop(status: .usage, message: message) }
        return positional
    }

    /// Rejects options this command does not take.
    func finish() throws(ClientCommand.Stop) {
        if let extra = named.keys.sorted().first(where: { !consumed.contains($0) }) {
            throw ClientCommand.Stop(status: .usage, message: "this command does not take --\(extra)")
        }
    }
}
