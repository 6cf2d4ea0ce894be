import HaulCore

/// Which downloads a command means: ids (or their first characters), `all`, or the ones in some states of a
/// category, as transmission-remote and qBittorrent's users name them.
extension ClientCommand {
    /// The states a download can be in, as `--state` takes them.
    static let states = [
        "queued", "probing", "downloading", "verifying", "seeding", "paused", "completed", "failed",
    ]

    static let selectionOptions: [CommandSpec.Option] = [
        .init(
            name: "state", value: "S,...",
            help: "instead of ids: the downloads in these states ("
                + states.joined(separator: ", ") + ")"),
        .init(name: "category", value: "NAME", help: "instead of ids: the downloads of this category"),
    ]

    static func selectionDetails(_ which: String) -> String {
        "Give ids (their first characters are enough when only one id starts with them), or all for every download "
            + "\(which), or --state and --category for those. An id that fails is reported and the others go on; "
            + "the exit status is then 1."
    }

    enum Selection {
        case pause, resume, remove

        var verb: String {
            switch self {
            case .pause: "pause"
            case .resume: "resume"
            case .remove: "remove"
            }
        }

        /// What `all` (or --category alone) means.
        var defaultStates: [String] {
            switch self {
            case .pause: ["queued", "probing", "downloading", "verifying", "seeding"]
            case .resume: ["paused", "failed"]
            case .remove: ClientCommand.states
            }
        }
    }

    /// The states `--state` names, each one a state (a usage error names the ones there are).
    static func parseStates(_ text: String, extra: [String] = [], spec: CommandSpec) throws(Stop) -> [String] {
        let known = states + extra
        let given = text.split(separator: ",").map { String($0).trimmingSpaces().lowercased() }
        guard !given.isEmpty else { throw .usage("--state needs a state", command: spec) }
        for state in given where !known.contains(state) {
            throw .usage("no state '\(state)': " + known.joined(separator: ", "), command: spec)
        }
        return given
    }

    /// `haul pause|resume|rm`: ids (or prefixes), or `all`, or `--state`/`--category`.
    static func select(_ client: Client, _ options: Options, _ selection: Selection) throws(Stop) {
        let words = options.positional
        let filtered = options.value("state") != nil || options.value("category") != nil
        if filtered || words == ["all"] {
            guard !filtered || words.isEmpty else {
                throw .usage("give ids, or --state and --category, not both", command: options.spec)
            }
            let states =
                try options.value("state").map { text throws(Stop) in
                    try parseStates(text, spec: options.spec)
                } ?? selection.defaultStates
            var members: [(String, JSONValue)] = [
                ("action", .string(selection == .remove ? "remove" : selection.verb)),
                ("state", .array(states.map { .string($0) })),
            ]
            if let category = options.value("category") {
                if let problem = Validate.categoryName(category) {
                    throw .usage("--category: \(problem)", command: options.spec)
                }
                members.append(("category", .string(category)))
            }
            if selection == .remove, options.flag("delete-file") { members.append(("delete_file", .bool(true))) }
            return try report(client.call("POST", "/downloads/actions", body: .object(members)), selection)
        }
        guard !words.isEmpty else {
            throw .usage("give the id of at least one download, or all", command: options.spec)
        }
        if words.contains("all") { throw .usage("all stands alone, without ids", command: options.spec) }
        let deleteFile = options.flag("delete-file")
        try eachID(words) { word throws(Stop) in
            let d = try resolve(client, word)
            let path = "/downloads/" + Client.escape(d.id)
            switch selection {
            case .remove:
                _ = try client.call("DELETE", path + (deleteFile ? "?delete_file=true" : ""))
                printOutput("\(d.id) removed")
            case .pause, .resume:
                // Said plainly before the server refuses it in its own words.
                if d.state == "completed" {
                    throw Stop(
                        status: .failed,
                        message: "\(d.name) is completed already: there is nothing to "
                            + selection.verb)
                }
                if selection == .pause, d.state == "failed" {
                    throw Stop(
                        status: .failed,
                        message: "\(d.name) failed: there is nothing to pause (haul resume "
                            + "\(d.id) tries it again)")
                }
                // Already going: nothing to change, and nothing wrong.
                if selection == .resume, d.state == "queued" || d.isRunning {
                    return printOutput("\(d.id) \(d.state) \(d.name)")
                }
                let state = selection == .pause ? "paused" : "queued"
                let changed = DownloadView(try client.call("PATCH", path, body: .object([("state", .string(state))])))
                printOutput("\(changed.id) \(changed.state) \(changed.name)")
            }
        }
    }

    /// Prints what a bulk action did to each download; any refused makes the exit status 1.
    private static func report(_ answer: JSONValue, _ selection: Selection) throws(Stop) {
        guard case .array(let results)? = answer["results"] else { return }
        var failed = 0
        for result in results {
            let id = result["id"]?.stringValue ?? "?"
            if let problem = result["problem"] {
                failed += 1
                printError("haul: \(id): \(Client.message(of: problem))")
            } else if let download = result["download"] {
                let d = DownloadView(download)
                printOutput("\(d.id) \(d.state) \(d.name)")
            } else {
                printOutput("\(id) removed")
            }
        }
        if results.isEmpty { printError("haul: no download to \(selection.verb)") }
        if failed > 0 { throw Stop(status: .failed, message: "") }
    }

    /// The download an id, or the first characters of one, names: the one whose id starts with them. None, or more
    /// than one, is an error saying so.
    static func resolve(_ client: Client, _ text: String) throws(Stop) -> DownloadView {
        guard !text.isEmpty, text.utf8.count <= 64 else {
            throw Stop(status: .failed, message: "'\(text)' is not a download id")
        }
        let page = try client.call("GET", "/downloads?limit=2&id_prefix=" + Client.escape(text))
        guard case .array(let found)? = page["downloads"], let first = found.first else {
            throw Stop(status: .failed, message: "no download's id starts with '\(text)' (haul ls lists them)")
        }
        guard found.count == 1 else {
            let ids = found.compactMap { $0["id"]?.stringValue }.joined(separator: ", ")
            throw Stop(status: .failed, message: "'\(text)' starts more than one id (\(ids), ...): give more of it")
        }
        return DownloadView(first)
    }
}
