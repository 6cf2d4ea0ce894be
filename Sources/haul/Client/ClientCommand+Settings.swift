import HaulCore

extension ClientCommand {
    /// `haul settings`: shows them; `haul settings max-active=3 schedule='mon-fri 09:00-18:00 2M'` changes them.
    static func settings(_ client: Client, _ options: Options) throws(Stop) {
        var members: [(String, JSONValue)] = []
        for assignment in options.positional {
            guard let equals = assignment.firstIndex(of: "=") else {
                throw .usage("settings are changed as NAME=VALUE, not '\(assignment)'", command: options.spec)
            }
            let name = assignment[..<equals].replacing("-", with: "_")
            let text = String(assignment[assignment.index(after: equals)...]).trimmingSpaces()
            members.append(try setting(String(name), text, spec: options.spec))
        }
        let answer: JSONValue
        do {
            answer =
                members.isEmpty
                ? try client.call("GET", "/settings")
                : try client.call("PATCH", "/settings", body: .object(members))
        } catch {
            throw Stop(status: error.status, message: spoken(error.message), command: error.command)
        }
        if options.flag("json") { return printOutput(answer.serialized()) }
        let defaults = answer["defaults"] ?? .null
        func line(_ label: String, _ key: String, _ show: (JSONValue) -> String) {
            let value = answer[key] ?? .null
            var text = show(value)
            if let base = defaults[key], base != value { text += " (default \(show(base)))" }
            printOutput(Format.column(label, 26) + text)
        }
        let number = { (value: JSONValue) in value.integerValue.map(String.init) ?? "?" }
        line("max-active", "max_active", number)
        line("max-speed", "max_speed", speed)
        line("default-connections", "default_connections", number)
        line("max-connections-per-host", "max_connections_per_host", number)
        line("schedule", "speed_schedule", schedule)
        line("proxy", "proxy") { $0.stringValue ?? "none" }
        printOutput(Format.column("speed limit now", 26) + speed(answer["current_max_speed"] ?? .null))
    }

    /// The server's words about settings in the words of the command line: `max-active` for `max_active`,
    /// `schedule` for `speed_schedule`, and `default` (what NAME=default sends) for JSON's null.
    static func spoken(_ message: String) -> String {
        var text = message
        for (wire, word) in [
            ("speed_schedule", "schedule"), ("max_connections_per_host", "max-connections-per-host"),
            ("default_connections", "default-connections"), ("max_active", "max-active"),
            ("max_speed", "max-speed"),
        ] {
            text = text.replacing(wire, with: word)
        }
        return text.replacing("or null for the default", with: "or default").replacing(
            "or null for none", with: "or none"
        )
        .replacing("null", with: "default")
    }

    static func stats(_ client: Client, _ options: Options) throws(Stop) {
        _ = try options.positionals(0...0, "stats takes no arguments")
        let answer = try client.call("GET", "/stats")
        if options.flag("json") { return printOutput(answer.serialized()) }
        let number = { (key: String) in answer[key]?.integerValue.map(String.init) ?? "?" }
        printOutput(Format.column("downloads", 14) + number("downloads"))
        for key in ["active", "queued", "paused", "completed", "failed"] {
            printOutput(Format.column(key, 14) + number(key))
        }
        printOutput(Format.column("speed", 14) + Format.bytes(answer["speed"]?.integerValue ?? 0) + "/s")
        printOutput(Format.column("connections", 14) + number("active_connections"))
        let disk = answer["disk"] ?? .null
        if let usable = disk["usable_bytes"]?.integerValue, let free = disk["free_bytes"]?.integerValue,
            let total = disk["total_bytes"]?.integerValue
        {
            printOutput(
                Format.column("disk", 14) + "\(Format.bytes(usable)) usable for downloads (\(Format.bytes(free)) "
                    + "free of \(Format.bytes(total)))")
        }
    }

    static func category(_ client: Client, _ options: Options) throws(Stop) {
        let words = try options.positionals(1...2, "give put NAME, ls, rm NAME or clean NAME")
        let json = options.flag("json")
        let usage = Stop.usage("give put NAME, ls, rm NAME or clean NAME", command: options.spec)
        // Said before the name goes into a path, where the server could only answer that no route has it.
        if words.count == 2, let problem = Validate.categoryName(words[1]) {
            throw .usage("'\(words[1])' cannot be a category's name: it \(problem)", command: options.spec)
        }
        let path = words.count == 2 ? "/categories/" + Client.escape(words[1]) : ""
        func show(_ c: JSONValue) -> String {
            var line = "\(Format.column(c["name"]?.stringValue ?? "?", 16)) \(c["directory"]?.stringValue ?? "?")"
            if let n = c["connections"]?.integerValue { line += "  connections \(n)" }
            if let speed = c["max_speed"]?.integerValue { line += "  max-speed \(Format.bytes(speed))/s" }
            if let priority = c["priority"]?.integerValue { line += "  priority \(priority)" }
            if let proxy = c["proxy"]?.stringValue { line += "  proxy \(proxy)" }
            if let completed = c["completed_directory"]?.stringValue { line += "  completed \(completed)" }
            return line
        }
        switch (words[0], words.count) {
        case ("put", 2):
            var members: [(String, JSONValue)] = []
            if let directory = options.value("directory") { members.append(("directory", .string(directory))) }
            if let completed = options.value("completed-dir") {
                members.append(("completed_directory", .string(completed)))
            }
            if let text = options.value("connections") {
                guard let n = Int64(text) else { throw .usage("--connections takes a number", command: options.spec) }
                members.append(("connections", JSONValue(n)))
            }
            if let text = options.value("max-speed") {
                members.append(("max_speed", JSONValue(try speedValue(text, spec: options.spec))))
            }
            if let text = options.value("priority") {
                guard let n = Int64(text) else { throw .usage("--priority takes a number", command: options.spec) }
                members.append(("priority", JSONValue(n)))
            }
            if let proxy = options.value("proxy") { members.append(("proxy", .string(proxy))) }
            let answer = try client.call("PUT", path, body: .object(members))
            printOutput(json ? answer.serialized() : show(answer))
        case ("ls", 1):
            let answer = try client.call("GET", "/categories")
            if json { return printOutput(answer["categories"]?.serialized() ?? "[]") }
            guard case .array(let list)? = answer["categories"] else { return }
            for c in list { printOutput(show(c)) }
        case ("rm", 2):
            _ = try client.call("DELETE", path)
            printOutput("\(words[1]) removed")
        case ("clean", 2):
            var query =
                "?category=" + Client.escape(words[1]) + "&state="
                + Client.escape(options.value("state") ?? "completed")
            if options.flag("delete-file") { query += "&delete_file=true" }
            let answer = try client.call("DELETE", "/downloads" + query)
            if json { return printOutput(answer.serialized()) }
            guard case .array(let removed)? = answer["removed"] else { return }
            for id in removed { printOutput("\(id.stringValue ?? "?") removed") }
        default:
            throw usage
        }
    }

    static func webhook(_ client: Client, _ options: Options) throws(Stop) {
        let words = try options.positionals(1...2, "give add URL, ls, deliveries ID or rm ID")
        let json = options.flag("json")
        switch (words[0], words.count) {
        case ("add", 2):
            var members: [(String, JSONValue)] = [("url", .string(words[1]))]
            if let events = options.value("events") {
                members.append(
                    (
                        "events",
                        .array(
                            events.split(separator: ",").map {
                                .string(String($0).trimmingSpaces())
                            })
                    ))
            }
            if let category = options.value("category") { members.append(("category", .string(category))) }
            let hook = try client.call("POST", "/webhooks", body: .object(members))
            if json { return printOutput(hook.serialized()) }
            printOutput("\(hook["id"]?.stringValue ?? "?") \(hook["secret"]?.stringValue ?? "?")")
        case ("ls", 1):
            let answer = try client.call("GET", "/webhooks")
            if json { return printOutput(answer["webhooks"]?.serialized() ?? "[]") }
            guard case .array(let hooks)? = answer["webhooks"] else { return }
            for hook in hooks {
                var events: [String] = []
                if case .array(let names)? = hook["events"] { events = names.compactMap(\.stringValue) }
                var line =
                    "\(Format.column(hook["id"]?.stringValue ?? "?", 17)) \(hook["url"]?.stringValue ?? "?")  "
                    + events.joined(separator: ",")
                if let category = hook["category"]?.stringValue { line += "  category \(category)" }
                printOutput(line)
            }
        case ("deliveries", 2):
            var query = ""
            if let text = options.value("limit") {
                guard let n = Int(text), (1...1000).contains(n) else {
                    throw .usage("--limit takes a number from 1 to 1000, not '\(text)'", command: options.spec)
                }
                query = "?limit=\(n)"
            }
            let answer = try client.call("GET", "/webhooks/" + Client.escape(words[1]) + "/deliveries" + query)
            if json { return printOutput(answer["deliveries"]?.serialized() ?? "[]") }
            guard case .array(let list)? = answer["deliveries"] else { return }
            guard !list.isEmpty else { return printOutput("nothing sent yet") }
            func row(_ cells: [String]) -> String {
                zip(cells, [19, 9, 9, 5, 6, 15]).map { Format.column($0, $1) }.joined(separator: " ") + " "
                    + (cells.count > 6 ? cells[6] : "")
            }
            printOutput(row(["TIME", "EVENT", "STATE", "TRIES", "STATUS", "DOWNLOAD", "ERROR / NEXT TRY"]))
            for d in list {
                var note = d["last_error"]?.stringValue ?? ""
                if let next = Format.time(d["next_attempt_at"]) { note += (note.isEmpty ? "" : "; ") + "next \(next)" }
                printOutput(
                    row([
                        Format.time(d["created_at"]) ?? "?",
                        d["event"]?.stringValue ?? "?",
                        d["state"]?.stringValue ?? "?",
                        String(d["attempts"]?.integerValue ?? 0),
                        d["last_status"]?.integerValue.map(String.init) ?? "-",
                        d["download_id"]?.stringValue ?? "?",
                        note,
                    ]))
            }
        case ("rm", 2):
            _ = try client.call("DELETE", "/webhooks/" + Client.escape(words[1]))
            printOutput("\(words[1]) removed")
        default:
            throw .usage("give add URL, ls, deliveries ID or rm ID", command: options.spec)
        }
    }

    static func token(_ client: Client, _ options: Options) throws(Stop) {
        let words = try options.positionals(1...2, "give create NAME, ls or rm ID")
        let json = options.flag("json")
        switch (words[0], words.count) {
        case ("create", 2):
            var members: [(String, JSONValue)] = [
                ("name", .string(words[1])),
                ("scope", .string(options.value("scope") ?? "read")),
            ]
            if let expires = options.value("expires") { members.append(("expires_at", .string(expires))) }
            if let root = options.value("root") { members.append(("root", .string(root))) }
            if let text = options.value("quota") {
                guard let bytes = ByteSize.parse(text) else {
                    throw .usage("--quota takes a size like 50G or 500M, not '\(text)'", command: options.spec)
                }
                members.append(("quota_bytes", JSONValue(bytes)))
            }
            if let text = options.value("max-active") {
                guard let count = Int64(text) else {
                    throw .usage("--max-active takes a number, not '\(text)'", command: options.spec)
                }
                members.append(("max_active", JSONValue(count)))
            }
            let token = try client.call("POST", "/tokens", body: .object(members))
            if json { return printOutput(token.serialized()) }
            // Labelled: the secret is shown this once, and must not be mistaken for the id.
            printOutput("id      \(token["id"]?.stringValue ?? "?")")
            printOutput("secret  \(token["secret"]?.stringValue ?? "?")")
            printError("haul: the secret is shown this once: keep it now (haul token ls never shows it)")
        case ("ls", 1):
            let answer = try client.call("GET", "/tokens")
            if json { return printOutput(answer["tokens"]?.serialized() ?? "[]") }
            guard case .array(let tokens)? = answer["tokens"], !tokens.isEmpty else { return printOutput("no tokens") }
            for token in tokens {
                var line =
                    "\(Format.column(token["id"]?.stringValue ?? "?", 17)) "
                    + "\(Format.column(token["scope"]?.stringValue ?? "?", 7)) \(token["name"]?.stringValue ?? "?")"
                if let root = token["root"]?.stringValue { line += "  root \(root)" }
                if let quota = token["quota_bytes"]?.integerValue {
                    line += "  quota \(Format.bytes(token["used_bytes"]?.integerValue ?? 0))/\(Format.bytes(quota))"
                }
                if let most = token["max_active"]?.integerValue { line += "  max-active \(most)" }
                if let expires = Format.time(token["expires_at"]) { line += "  expires \(expires)" }
                printOutput(line)
            }
        case ("rm", 2):
            _ = try client.call("DELETE", "/tokens/" + Client.escape(words[1]))
            printOutput("\(words[1]) revoked")
        default:
            throw .usage("give create NAME, ls or rm ID", command: options.spec)
        }
    }

    private static func setting(_ name: String, _ text: String, spec: CommandSpec) throws(Stop) -> (String, JSONValue) {
        if text == "default" { return (name == "schedule" ? "speed_schedule" : name, .null) }
        switch name {
        case "max_active", "default_connections", "max_connections_per_host":
            guard let value = Int64(text) else { throw .usage("\(name) takes a number, not '\(text)'", command: spec) }
            return (name, JSONValue(value))
        case "max_speed":
            return (name, JSONValue(try speedValue(text, spec: spec)))
        case "schedule", "speed_schedule":
            return ("speed_schedule", try scheduleValue(text, spec: spec))
        case "proxy":
            // A URL or none; the server checks it.
            return (name, .string(text))
        default:
            throw .usage(
                "no setting '\(name)': max-active, max-speed, default-connections, "
                    + "max-connections-per-host, schedule, proxy", command: spec)
        }
    }

    static func speedValue(_ text: String, spec: CommandSpec) throws(Stop) -> Int64 {
        if ["none", "unlimited"].contains(text.lowercased()) { return 0 }
        guard let bytes = ByteSize.parse(text) else {
            throw .usage(
                "a speed is bytes per second like 500k or 2M (0 or none: no limit), not '\(text)'",
                command: spec)
        }
        return bytes
    }

    /// `mon-fri 09:00-18:00 2M; sat,sun 00:00-24:00 0` as the API's windows; `none` for no schedule.
    private static func scheduleValue(_ text: String, spec: CommandSpec) throws(Stop) -> JSONValue {
        if text.lowercased() == "none" { return .array([]) }
        var windows: [JSONValue] = []
        for part in text.split(separator: ";") {
            let words = part.split(separator: " ").map(String.init)
            guard words.count == 2 || words.count == 3, let dash = words[words.count - 2].firstIndex(of: "-") else {
                throw .usage(
                    "a schedule window is [DAYS] HH:MM-HH:MM SPEED, not '\(part.trimmingSpaces())'",
                    command: spec)
            }
            let times = words[words.count - 2]
            var members: [(String, JSONValue)] = []
            if words.count == 3 { members.append(("days", .array(try days(words[0], spec: spec).map { .string($0) }))) }
            members.append(("from", .string(String(times[..<dash]))))
            members.append(("to", .string(String(times[times.index(after: dash)...]))))
            members.append(("max_speed", JSONValue(try speedValue(words[words.count - 1], spec: spec))))
            windows.append(.object(members))
        }
        return .array(windows)
    }

    /// `mon-fri`, `sat,sun`, `mon,wed-fri`: the day names in order.
    private static func days(_ text: String, spec: CommandSpec) throws(Stop) -> [String] {
        let names = SpeedWindow.dayNames
        var days: Set<Int> = []
        for item in text.lowercased().split(separator: ",") {
            let ends = item.split(separator: "-").map(String.init)
            guard (1...2).contains(ends.count), let first = names.firstIndex(of: ends[0]),
                let last = names.firstIndex(of: ends.last!), first <= last
            else {
                throw .usage("days are like mon-fri or sat,sun, not '\(text)'", command: spec)
            }
            days.formUnion(first...last)
        }
        return days.sorted().map { names[$0] }
    }

    private static func speed(_ value: JSONValue) -> String {
        guard let bytes = value.integerValue else { return "?" }
        return bytes == 0 ? "none" : Format.bytes(bytes) + "/s"
    }

    private static func schedule(_ value: JSONValue) -> String {
        guard case .array(let windows) = value, !windows.isEmpty else { return "none" }
        return windows.map { window in
            var days: [String] = []
            if case .array(let names)? = window["days"] { days = names.compactMap(\.stringValue) }
            let from = window["from"]?.stringValue ?? "?", to = window["to"]?.stringValue ?? "?"
            return "\(dayRanges(days)) \(from)-\(to) \(speed(window["max_speed"] ?? .null))"
        }.joined(separator: "; ")
    }

    /// `mon-fri`, `sat,sun`, `every day`.
    private static func dayRanges(_ days: [String]) -> String {
        let indices = days.compactMap { SpeedWindow.dayNames.firstIndex(of: $0) }.sorted()
        if indices.count == 7 { return "every day" }
        var ranges: [String] = []
        var start = 0
        while start < indices.count {
            var end = start
            while end + 1 < indices.count, indices[end + 1] == indices[end] + 1 { end += 1 }
            let first = SpeedWindow.dayNames[indices[start]], last = SpeedWindow.dayNames[indices[end]]
            let each = (start...end).map { SpeedWindow.dayNames[indices[$0]] }.joined(separator: ",")
            ranges.append(end - start >= 2 ? "\(first)-\(last)" : each)
            start = end + 1
        }
        return ranges.joined(separator: ",")
    }
}
