import HaulCore
import HaulLoop

/// The command-line client: `haul add|ls|pause|resume|rm|watch|health`, talking to a running `haul serve`.
enum ClientCommand {
    /// Exit statuses.
    enum Status: Int32 {
        case ok = 0, failed = 1, usage = 2, unreachable = 3
    }

    struct Stop: Error {
        let status: Status
        let message: String
        /// The command whose help a usage error points to.
        var command: CommandSpec?

        static func usage(_ message: String, command: CommandSpec? = nil) -> Stop {
            Stop(status: .usage, message: message, command: command)
        }
    }

    static let commands: [CommandSpec] = [
        CommandSpec(
            name: "add", arguments: "URL...",
            summary: "Adds downloads (http, https, ftp, ftps or sftp URLs, magnet links, .torrent files) and prints "
                + "each one's id on its own line.",
            details: "Several URLs (or -i FILE) go as one batch: each is added or refused on its own, and the exit "
                + "status is 1 if any was refused. With --wait the command follows the downloads until they end: a "
                + "progress bar for one on a terminal, a line per change otherwise.",
            options: [
                .init(
                    name: "input", value: "FILE",
                    help: "also add the URLs in FILE, one a line ('-' for standard "
                        + "input; blank lines and lines starting with # are skipped)", short: "i"),
                .init(name: "wait", value: nil, help: "follow the downloads until they complete or fail"),
                .init(
                    name: "mirror", value: "URL",
                    help: "another source of the same file (one URL only; "
                        + "repeatable)", repeatable: true),
            ]
                + DownloadOptions.all.compactMap(\.flag).map { flag in
                    // The download options' flags, from their table.
                    .init(name: flag.name, value: flag.placeholder, help: flag.help, repeatable: flag.repeatable)
                }),
        CommandSpec(
            name: "ls", arguments: "",
            summary: "Lists downloads: id, state, progress, size, speed, ETA, category and name, then the totals.",
            details: "Ids are shown as long as they need to be told apart (at least 6 characters); every command "
                + "takes an id's first characters wherever it takes an id. Names are cut to fit the terminal "
                + "(--json has everything).",
            options: [
                .init(
                    name: "state", value: "S,...",
                    help: "only these states: " + ClientCommand.states.joined(separator: ", ")
                        + ", or retrying (waiting to try again)"),
                .init(name: "search", value: "TEXT", help: "only downloads whose name or URL holds TEXT, without case"),
                .init(name: "category", value: "NAME", help: "only downloads of this category"),
                .init(
                    name: "sort", value: "KEY",
                    help: "created (the default), name, size, progress, speed or queue "
                        + "(the order they start in); -KEY for descending"),
                .init(name: "json", value: nil, help: "print the downloads as a JSON array"),
            ]),
        CommandSpec(
            name: "info", arguments: "ID",
            summary: "Shows everything about one download: sources, path, times, segments, mirrors, the whole error "
                + "and what the webhooks were sent.",
            details: "", options: [.init(name: "json", value: nil, help: "print the download as JSON")]),
        CommandSpec(
            name: "cat", arguments: "ID",
            summary: "Writes a download's file to standard output as it arrives, finished or not "
                + "(haul cat ID | mpv -).",
            details: "The bytes on disk come at once and the rest as they land; the command ends with the file (or "
                + "the range), and fails if the read is cut off (the file changed at the origin, the download "
                + "paused or failed). A queued download is started for it only with --start.",
            options: [
                .init(name: "range", value: "FIRST-LAST", help: "only these bytes, like 0-1023, 1048576- or -4096"),
                .init(name: "start", value: nil, help: "start a queued download ahead of the queue"),
            ]),
        CommandSpec(
            name: "set", arguments: "ID...",
            summary: "Changes downloads' speed limit, connections, priority or place in the queue.",
            details: "Each id is changed on its own; one that fails is reported and the others go on (exit status "
                + "1). A position moves a waiting (queued or paused) download; moved past one of another priority "
                + "it takes that priority, so the queue stays in priority order.",
            options: [
                .init(name: "max-speed", value: "SIZE", help: "bytes per second like 500k or 1.5M; none for no limit"),
                .init(name: "connections", value: "N", help: "connections, 1-32 (a running download takes it at once)"),
                .init(name: "priority", value: "N", help: "higher starts first, -1000 to 1000"),
                .init(
                    name: "position", value: "WHERE",
                    help: "top, up, down, bottom, or a place in the queue (0 "
                        + "starts first)"),
            ]),
        CommandSpec(
            name: "pause", arguments: "ID...|all", summary: "Pauses downloads; the part file stays.",
            details: ClientCommand.selectionDetails("queued or running"),
            options: ClientCommand.selectionOptions),
        CommandSpec(
            name: "resume", arguments: "ID...|all", summary: "Resumes paused downloads and retries failed ones.",
            details: ClientCommand.selectionDetails("paused or failed"),
            options: ClientCommand.selectionOptions),
        CommandSpec(
            name: "rm", arguments: "ID...|all", summary: "Removes downloads; an unfinished one's part file goes too.",
            details: ClientCommand.selectionDetails("in any state"),
            options: ClientCommand.selectionOptions
                + [.init(name: "delete-file", value: nil, help: "also delete a finished download's file")]),
        CommandSpec(
            name: "watch", arguments: "[ID]",
            summary: "Follows events: every download's changes, or one download's progress until it ends.",
            details: "A stream that drops is opened again with Last-Event-ID, so nothing is missed.",
            options: []),
        CommandSpec(
            name: "settings", arguments: "[NAME=VALUE...]",
            summary: "Shows the settings that can change while the server runs, or changes them.",
            details: "Names: max-active, max-speed (like 2M; 0 or none for no limit), default-connections, "
                + "max-connections-per-host, schedule (windows separated by ';', each [DAYS] HH:MM-HH:MM SPEED, "
                + "like 'mon-fri 09:00-18:00 2M; sat,sun 00:00-24:00 0'; none for no schedule), proxy (a URL like "
                + "socks5h://user:pass@host:1080, or none for direct). VALUE default puts "
                + "a setting back to the server's flag. Changes are kept by the server across restarts.",
            options: [.init(name: "json", value: nil, help: "print the settings as JSON")]),
        CommandSpec(
            name: "category", arguments: "put NAME | ls | rm NAME | clean NAME",
            summary: "Makes, lists and removes categories; clean removes a category's finished downloads.",
            details: "put makes or replaces a category: its folder (default its name) and the connections, speed "
                + "limit (over all its downloads) and priority its downloads get. clean removes its completed "
                + "downloads (--state to choose others); their files stay unless --delete-file.",
            options: [
                .init(name: "directory", value: "DIR", help: "the category's folder under the download root (put)"),
                .init(
                    name: "completed-dir", value: "DIR",
                    help: "where its finished files move, under the completed "
                        + "root (put)"),
                .init(name: "connections", value: "N", help: "connections of its downloads, 1-32 (put)"),
                .init(name: "max-speed", value: "SIZE", help: "bytes per second over all its downloads (put)"),
                .init(name: "priority", value: "N", help: "priority of its downloads (put)"),
                .init(name: "proxy", value: "URL", help: "its downloads' proxy, or none for direct (put)"),
                .init(name: "state", value: "S,...", help: "the states clean removes (default completed)"),
                .init(name: "delete-file", value: nil, help: "clean deletes the finished files too"),
                .init(name: "json", value: nil, help: "print the answer as JSON"),
            ]),
        CommandSpec(
            name: "webhook", arguments: "add URL | ls | deliveries ID | rm ID",
            summary: "Adds, lists and removes webhooks, and shows what was sent to one, newest first.",
            details: "add prints the webhook's id and its secret (shown this once: keep it to check the "
                + "Haul-Signature of each delivery). Events: created, completed, failed, removed (the default) and "
                + "state (every change of state).",
            options: [
                .init(name: "events", value: "E,...", help: "the events to send (add)"),
                .init(name: "category", value: "NAME", help: "only downloads of this category (add)"),
                .init(name: "limit", value: "N", help: "the newest N deliveries, 1-1000 (deliveries; default 50)"),
                .init(name: "json", value: nil, help: "print the answer as JSON"),
            ]),
        CommandSpec(
            name: "token", arguments: "create NAME | ls | rm ID",
            summary: "Makes, lists and revokes tokens with a scope (read, add, manage or admin).",
            details: "create prints the token's id and its secret (shown this once: hand it to the client, which "
                + "uses it as --token or HAUL_TOKEN). read looks; add also adds, pauses, resumes and removes "
                + "downloads; manage also changes settings and categories; admin also webhooks and tokens. "
                + "A token with a root sees only its own downloads, which land under that folder. "
                + "Needs the server's own token.",
            options: [
                .init(name: "scope", value: "SCOPE", help: "read, add, manage or admin (create; default read)"),
                .init(
                    name: "expires", value: "TIME", help: "when it stops working, like 2027-06-30T00:00:00Z (create)"),
                .init(
                    name: "root", value: "DIR",
                    help: "a folder under the download root for its downloads; it then "
                        + "sees only its own (create)"),
                .init(
                    name: "quota", value: "SIZE", help: "the most its downloads may hold together, like 50G (create)"),
                .init(name: "max-active", value: "N", help: "the most of its downloads running at once (create)"),
                .init(name: "json", value: nil, help: "print the answer as JSON"),
            ]),
        CommandSpec(
            name: "stats", arguments: "",
            summary: "Shows the totals: downloads by state, speed, connections and the disk's free space.",
            details: "", options: [.init(name: "json", value: nil, help: "print /stats as JSON")]),
        CommandSpec(
            name: "health", arguments: "",
            summary: "Exits 0 if the server answers /healthz (the container's HEALTHCHECK).", details: "",
            options: []),
    ]

    static var usage: String {
        var text = """
            usage: haul [--server URL] [--token TOKEN] COMMAND [ARGS] [options]
                   haul serve [options]      run the server (haul serve --help lists its options)
                   haul --version
            commands:

            """
        for command in commands {
            text += CommandSpec.entry(
                command.name + (command.arguments.isEmpty ? "" : " " + command.arguments),
                command.summary)
        }
        text += """

            haul COMMAND --help tells more of each. Sizes take k, m, g or t (powers of 1024): 500k, 1.5M, 10MB.
            exit status: 0 done, 1 the server refused or a download failed, 2 bad usage, 3 no server reachable
            """
        return text
    }

    /// Runs the client for `arguments` (what follows `haul`): global options, the command, its arguments.
    static func main(_ arguments: [String], environment: [String: String]) -> Int32 {
        var globals: [String] = []
        var index = 0
        while index < arguments.count, arguments[index].hasPrefix("-") {
            let argument = arguments[index]
            switch argument {
            case "--version", "-V":
                printOutput("haul \(HaulVersion.current)")
                return Status.ok.rawValue
            case "--help", "-h":
                printOutput(usage)
                return Status.ok.rawValue
            case "--server", "--token":
                guard index + 1 < arguments.count else { return fail(.usage("\(argument) needs a value")) }
                globals += [argument, arguments[index + 1]]
                index += 2
            default:
                guard argument.hasPrefix("--server=") || argument.hasPrefix("--token=") else {
                    return fail(.usage("unknown option \(argument) before the command"))
                }
                globals.append(argument)
                index += 1
            }
        }
        guard index < arguments.count else {
            writeError(usage + "\n")
            return Status.usage.rawValue
        }
        let name = arguments[index]
        let rest = Array(arguments[(index + 1)...])
        if name == "help" {
            guard let topic = rest.first else {
                printOutput(usage)
                return Status.ok.rawValue
            }
            guard let spec = commands.first(where: { $0.name == topic }) else {
                return topic == "serve" ? help(ServeConfig.usage) : fail(.usage("unknown command '\(topic)'"))
            }
            return help(spec.help)
        }
        if name == "serve" {
            return fail(
                .usage(
                    "--server and --token are the client's; haul serve takes --listen and --token after "
                        + "serve"))
        }
        guard let spec = commands.first(where: { $0.name == name }) else {
            return fail(.usage("unknown command '\(name)'"))
        }
        do throws(Stop) {
            let options = try Options(globals + rest, spec: spec)
            if options.flag("help") { return help(spec.help) }
            let client = try Client(options: options, environment: environment)
            switch name {
            case "add": try add(client, options)
            case "ls": try list(client, options)
            case "info": try info(client, options)
            case "cat": try cat(client, options)
            case "set": try set(client, options)
            case "pause": try select(client, options, .pause)
            case "resume": try select(client, options, .resume)
            case "rm": try select(client, options, .remove)
            case "watch": try watch(client, options)
            case "settings": try settings(client, options)
            case "stats": try stats(client, options)
            case "webhook": try webhook(client, options)
            case "token": try token(client, options)
            case "category": try category(client, options)
            default: try health(client, options)
            }
            return Status.ok.rawValue
        } catch {
            return fail(error)
        }
    }

    private static func help(_ text: String) -> Int32 {
        printOutput(text)
        return Status.ok.rawValue
    }

    /// Prints the error once (a Stop without a message follows errors already printed, one each); a usage error
    /// also says where the help is.
    private static func fail(_ stop: Stop) -> Int32 {
        guard !stop.message.isEmpty else { return stop.status.rawValue }
        var text = "haul: \(stop.message)"
        if stop.status == .usage {
            text += stop.command.map { " (haul \($0.name) --help)" } ?? " (haul --help)"
        }
        printError(text)
        return stop.status.rawValue
    }
}
