import Glibc
import HaulCore
import HaulLoop

/// `haul info`: everything about one download; `haul set`: its speed limit, connections, priority and place.
extension ClientCommand {
    static func info(_ client: Client, _ options: Options) throws(Stop) {
        let words = try options.positionals(1...1, "give the id of one download")
        let id = try resolve(client, words[0]).id
        let json = try client.call("GET", "/downloads/" + Client.escape(id))
        if options.flag("json") { return printOutput(json.serialized()) }
        // What the webhooks were sent about it: an admin's to see (another token is answered 403, and sees none).
        let deliveries =
            (try? client.call("GET", "/downloads/" + Client.escape(id) + "/deliveries?limit=20"))
            .flatMap { $0["deliveries"] } ?? .array([])
        for line in infoLines(json, deliveries: deliveries) { printOutput(line) }
    }

    /// `haul cat`: the file's bytes to standard output as they arrive. A reader that stops (`| head`) ends it.
    static func cat(_ client: Client, _ options: Options) throws(Stop) {
        let words = try options.positionals(1...1, "give the id of one download")
        let id = try resolve(client, words[0]).id
        var headers: [(String, String)] = []
        if let range = options.value("range") {
            let parts = range.split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 2, parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
                !(parts[0].isEmpty && parts[1].isEmpty),
                parts[0].isEmpty || parts[1].isEmpty || Int64(parts[0])! <= Int64(parts[1])!
            else {
                throw Stop(status: .usage, message: "--range takes FIRST-LAST, FIRST- or -COUNT (bytes), like 0-1023")
            }
            headers.append(("Range", "bytes=" + range))
        }
        let path = "/downloads/" + Client.escape(id) + "/file" + (options.flag("start") ? "?start=1" : "")
        // A reader that has gone (`| head`) stops the read; that is no failure.
        try client.bytes(path, headers: headers, what: "the read of \(id)") { chunk in
            Files.writeFully(chunk, to: STDOUT_FILENO)
        }
    }

    /// The lines of `haul info`: a label in a column of 14, then the value.
    static func infoLines(_ json: JSONValue, deliveries: JSONValue) -> [String] {
        let d = DownloadView(json)
        var lines: [String] = []
        func add(_ label: String, _ value: String?) {
            guard let value, !value.isEmpty else { return }
            lines.append(Format.column(label, 13) + " " + value)
        }
        let text = { (key: String) in json[key]?.stringValue }
        add("id", d.id)
        add("name", d.name)
        var state = d.state
        if let note = d.retryNote { state += " (\(note))" }
        add("state", state)
        var progress = d.percent.isEmpty ? d.size : "\(d.percent) (\(d.size))"
        if d.isRunning, d.speed > 0 { progress += ", \(Format.bytes(Int64(d.speed)))/s" }
        if d.isRunning, let eta = d.eta { progress += ", ETA \(Format.duration(eta))" }
        add("progress", progress)
        add("url", text("url"))
        if let final = text("final_url"), final != text("url") { add("final url", final) }
        add("path", text("path"))
        if let completed = text("completed_directory") {
            add("moves to", completed + (json["moved"]?.boolValue == true ? " (moved)" : ""))
        }
        if let why = text("move_error") { add("not moved", why) }
        add("category", d.category ?? "none")
        add("tags", text("tags").map { $0.split(separator: ",").joined(separator: ", ") })
        add("priority", json["priority"]?.integerValue.map(String.init))
        let active = json["active_connections"]?.integerValue ?? 0
        add("connections", "\(active) open of \(json["connections"]?.integerValue ?? 0)")
        add("max speed", json["max_speed"]?.integerValue.map { Format.bytes($0) + "/s" } ?? "none")
        add(
            "resumable",
            json["resumable"]?.boolValue == true
                ? "yes"
                : "no (ranges, a size and a validator "
                    + "are needed)")
        add("checksum", text("checksum"))
        add("proxy", text("proxy"))
        add("user", text("username"))
        add("user agent", text("user_agent"))
        add("referer", text("referer"))
        if let hls = json["hls"], case .object = hls {
            let done = hls["segments_done"]?.integerValue ?? 0, total = hls["segments_total"]?.integerValue ?? 0
            var line = "\(done) of \(total) segments, " + (hls["container"]?.stringValue == "mp4" ? "fMP4" : "MPEG-TS")
            if hls["encrypted"]?.boolValue == true { line += ", AES-128" }
            if let size = hls["size"]?.integerValue {
                line += ", " + (hls["size_estimated"]?.boolValue == true ? "about " : "") + Format.bytes(size)
            }
            add("hls", line)
            if let variant = hls["variant"], case .object = variant {
                let parts =
                    [variant["name"]?.stringValue, variant["resolution"]?.stringValue]
                    .compactMap { $0 } + [variant["bandwidth"]?.integerValue.map { Format.bytes($0 / 8) + "/s" } ?? ""]
                add(
                    "variant",
                    parts.filter { !$0.isEmpty }.joined(separator: ", ") + " (asked: \(text("variant") ?? "best"))")
            }
            if case .array(let audio)? = hls["audio"], !audio.isEmpty {
                add("audio", audio.compactMap { $0["name"]?.stringValue }.joined(separator: ", "))
            }
        }
        if let torrent = json["torrent"], case .object = torrent {
            add("info-hash", torrent["info_hash"]?.stringValue)
            let peers = torrent["peers"]?.integerValue ?? 0, seeds = torrent["seeds"]?.integerValue ?? 0
            let uploaded = torrent["uploaded"]?.integerValue ?? 0
            let ratio = torrent["ratio"].flatMap { value -> Double? in if case .number(let n) = value { n } else { nil }
            }
            add(
                "bittorrent",
                "\(torrent["phase"]?.stringValue ?? "?"), \(peers) peers (\(seeds) seeding), uploaded "
                    + Format.bytes(uploaded) + " (ratio \(((ratio ?? 0) * 100).rounded() / 100))")
            if case .array(let files)? = torrent["files"], !files.isEmpty {
                add("files", "\(files.count)")
                for file in files.prefix(20) {
                    let done = file["done"]?.integerValue ?? 0, size = file["size"]?.integerValue ?? 0
                    add("", "\(file["path"]?.stringValue ?? "?") \(Format.bytes(done)) of \(Format.bytes(size))")
                }
                if files.count > 20 { add("", "and \(files.count - 20) more") }
            }
        }
        if let error = d.error { add("error", "\(error.code): \(error.message)") }
        if let last = d.lastError, d.error == nil { add("last error", "\(last.code): \(last.message)") }
        if let attempts = json["attempts"]?.integerValue, attempts > 1 { add("attempts", String(attempts)) }
        add("added", Format.time(json["created_at"]))
        add("started", Format.time(json["started_at"]))
        add("completed", Format.time(json["completed_at"]))
        add("changed", Format.time(json["updated_at"]))
        add("node", text("node"))
        if case .array(let segments)? = json["segments"], !segments.isEmpty {
            add("segments", "\(segments.count)")
            for segment in segments {
                let start = segment["start"]?.integerValue ?? 0
                let received = segment["received"]?.integerValue ?? 0
                var line = "  bytes \(start)-" + (segment["end"]?.integerValue.map(String.init) ?? "")
                if let end = segment["end"]?.integerValue {
                    let length = end - start + 1
                    line += received >= length ? ": done" : ": \(Format.bytes(received)) of \(Format.bytes(length))"
                } else {
                    line += ": \(Format.bytes(received))"
                }
                lines.append(Format.column("", 13) + line)
            }
        }
        if case .array(let mirrors)? = json["mirrors"], !mirrors.isEmpty {
            add("mirrors", "\(mirrors.count)")
            for mirror in mirrors {
                var line = "  \(mirror["url"]?.stringValue ?? "?") \(mirror["state"]?.stringValue ?? "?")"
                if let received = mirror["received_bytes"]?.integerValue, received > 0 {
                    line += ", \(Format.bytes(received))"
                }
                if let reason = mirror["reason"]?.stringValue { line += ": \(reason)" }
                lines.append(Format.column("", 13) + line)
            }
        }
        if case .array(let sent) = deliveries, !sent.isEmpty {
            add("webhooks", "\(sent.count) sent")
            for delivery in sent {
                var line =
                    "  \(delivery["event"]?.stringValue ?? "?") to \(delivery["webhook_id"]?.stringValue ?? "?"): "
                    + (delivery["state"]?.stringValue ?? "?")
                if let status = delivery["last_status"]?.integerValue { line += ", HTTP \(status)" }
                if let attempts = delivery["attempts"]?.integerValue { line += ", \(attempts) attempt(s)" }
                if let at = Format.time(delivery["last_attempt_at"]) { line += ", \(at)" }
                if let error = delivery["last_error"]?.stringValue { line += " (\(error))" }
                lines.append(Format.column("", 13) + line)
            }
        }
        return lines
    }

    static func set(_ client: Client, _ options: Options) throws(Stop) {
        let words = try options.positionals(1...Int.max, "give the id of at least one download")
        var members: [(String, JSONValue)] = []
        if let text = options.value("max-speed") {
            members.append(
                (
                    "max_speed",
                    ["none", "0", "default"].contains(text.lowercased())
                        ? .null
                        : JSONValue(try speedValue(text, spec: options.spec))
                ))
        }
        for (flag, field) in [("connections", "connections"), ("priority", "priority")] {
            guard let text = options.value(flag) else { continue }
            guard let n = Int64(text) else {
                throw .usage("--\(flag) takes a number, not '\(text)'", command: options.spec)
            }
            members.append((field, JSONValue(n)))
        }
        var move: String?
        if let position = options.value("position") {
            if let n = Int64(position), n >= 0 {
                members.append(("queue_position", JSONValue(n)))
            } else if ["top", "up", "down", "bottom"].contains(position) {
                move = position
            } else {
                throw .usage(
                    "--position takes top, up, down, bottom or a place (0 starts first), not '\(position)'",
                    command: options.spec)
            }
        }
        guard !members.isEmpty || move != nil else {
            throw .usage(
                "give what to change: --max-speed, --connections, --priority or --position",
                command: options.spec)
        }
        try eachID(words) { word throws(Stop) in
            let id = try resolve(client, word).id
            var answer =
                members.isEmpty
                ? try client.call("GET", "/downloads/" + Client.escape(id))
                : try client.call("PATCH", "/downloads/" + Client.escape(id), body: .object(members))
            var place = ""
            if let move {
                let body = JSONValue.object([
                    ("action", .string("move")), ("to", .string(move)),
                    ("ids", .array([.string(id)])),
                ])
                guard case .array(let results)? = try client.call("POST", "/downloads/actions", body: body)["results"],
                    let result = results.first
                else {
                    throw Stop(status: .failed, message: "the server's answer lists no result")
                }
                if let problem = result["problem"] { throw Stop(status: .failed, message: Client.message(of: problem)) }
                answer = result["download"] ?? answer
                if let position = result["queue_position"]?.integerValue { place = ", place \(position) in the queue" }
            }
            let d = DownloadView(answer)
            let speed = answer["max_speed"]?.integerValue.map { Format.bytes($0) + "/s" } ?? "no limit"
            printOutput(
                "\(d.id) \(d.state) \(d.name): priority \(answer["priority"]?.integerValue ?? 0), "
                    + "\(answer["connections"]?.integerValue ?? 0) connections, max speed \(speed)\(place)")
        }
    }
}
