import FoundationEssentials
import Glibc
import HaulAPI
import HaulCore
import HaulLoop

/// `haul watch`, `haul health`, and following one download's progress (`watch ID`, `add --wait`).
extension ClientCommand {
    static func watch(_ client: Client, _ options: Options) throws(Stop) {
        let ids = try options.positionals(0...1, "watch takes at most one id")
        if let id = ids.first {
            let sequence = try client.call("GET", "/stats")["sequence"]?.integerValue
            let download = DownloadView(try client.call("GET", "/downloads/" + Client.escape(id)))
            return try follow(client, download, after: sequence)
        }
        var lastProgress: [String: Double] = [:]
        func describe(_ d: DownloadView) -> String {
            var line = "\(d.id) \(d.state) \(d.name)"
            if let error = d.error { line += " (\(error.code): \(error.message))" }
            if let note = d.retryNote { line += " (\(note))" }
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
                printOutput(
                    "\(d.id) \(d.state) \(d.name) \(d.percent) \(d.size) \(Format.bytes(Int64(d.speed)))/s"
                        + (d.retryNote.map { " (\($0))" } ?? ""))
            case "removed":
                printOutput("\(data["id"]?.stringValue ?? "?") removed")
            default:
                break
            }
            return true
        }
    }

    static func health(_ client: Client, _ options: Options) throws(Stop) {
        _ = try options.positionals(0...0, "health takes no arguments")
        let answer = try client.call("GET", "/healthz")
        guard answer["status"]?.stringValue == "ok" else {
            throw Stop(
                status: .failed,
                message: "the server at \(client.server) is not healthy: \(answer.serialized())")
        }
        printOutput("ok")
    }

    /// Shows one download's progress until it completes (returns) or fails or is removed (throws).
    static func follow(_ client: Client, _ start: DownloadView, after sequence: Int64?) throws(Stop) {
        let display = ProgressDisplay()
        var current = start
        var removed = false
        // The events replayed from `sequence` tell the whole story; `start` may be newer than the first of them.
        if !current.isFinished {
            Interrupt.onInterrupt(
                say: "haul: stopped following; \(current.name) goes on on the server (haul watch "
                    + "\(current.id) follows it again, haul pause \(current.id) pauses it)")
            var path = "/downloads/" + Client.escape(current.id) + "/events"
            if let sequence { path += "?last_event_id=\(sequence)" }
            try client.events(path, notice: display.notice) { event in
                switch event.name {
                case "created", "progress", "state":
                    guard let data = try? JSONValue.parse(event.data) else { return true }
                    current = DownloadView(data)
                case "snapshot":
                    guard let data = try? JSONValue.parse(event.data), case .array(let all)? = data["downloads"],
                        let first = all.first
                    else { return true }
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
            printError(
                "\(current.name): completed, \(Format.bytes(current.received))"
                    + (current.path.map { " -> \($0)" } ?? ""))
        case "failed":
            let reason = current.error.map { "\($0.code): \($0.message)" } ?? "no reason given"
            throw Stop(status: .failed, message: "\(current.name) failed: \(reason)")
        default:
            throw Stop(status: .failed, message: "the event stream ended while \(current.id) was \(current.state)")
        }
    }

    /// Follows several downloads until each has ended: on a terminal a block of bars, one a download and a total,
    /// redrawn in place; elsewhere a line for each change of state and one for each end.
    /// Follows a batch's downloads until each has completed, failed or is paused (nothing would move it on), then
    /// says how many of all asked for (`refused` ones too) ended how.
    static func followAll(
        _ client: Client, _ downloads: [DownloadView], refused: Int, after sequence: Int64?
    )
        throws(Stop)
    {
        var open = Set(downloads.filter { !$0.isFinished && $0.state != "paused" }.map(\.id))
        var failures: [String] = downloads.filter { $0.state == "failed" }.map(failure)
        var completed = downloads.filter { $0.state == "completed" }.count
        var paused: [String] = downloads.filter { $0.state == "paused" }.map(pausedLine)
        var lastState: [String: String] = Dictionary(downloads.map { ($0.id, $0.state) }, uniquingKeysWith: { $1 })
        let block = isatty(STDERR_FILENO) == 1 ? ProgressBlock(downloads) : nil
        func report(_ d: DownloadView) {
            guard open.contains(d.id) else { return }
            block?.update(d)
            guard lastState[d.id] != d.state else { return }
            lastState[d.id] = d.state
            switch d.state {
            case "completed":
                open.remove(d.id)
                completed += 1
                if block == nil {
                    printError("\(d.name): completed, \(Format.bytes(d.received))" + (d.path.map { " -> \($0)" } ?? ""))
                }
            case "failed":
                open.remove(d.id)
                failures.append(failure(d))
                if block == nil { printError(failures.last!) }
            case "paused":
                open.remove(d.id)
                paused.append(pausedLine(d))
                if block == nil { printError(paused.last!) }
            default:
                if block == nil { printError("\(d.name): \(d.state)") }
            }
        }
        if !open.isEmpty {
            Interrupt.onInterrupt(
                say: "haul: stopped following; the \(downloads.count) downloads go on on the server "
                    + "(haul ls shows them, haul watch follows them, haul pause all pauses them)")
            let path = "/events" + (sequence.map { "?last_event_id=\($0)" } ?? "")
            try client.events(path, notice: { text in if let block { block.notice(text) } else { printError(text) } }) {
                event in
                guard let data = try? JSONValue.parse(event.data) else { return true }
                switch event.name {
                case "created", "state", "progress":
                    report(DownloadView(data))
                case "snapshot":
                    if case .array(let all)? = data["downloads"] { for d in all { report(DownloadView(d)) } }
                case "removed":
                    if let id = data["id"]?.stringValue, open.remove(id) != nil {
                        failures.append("haul: \(id) was removed")
                        if block == nil { printError(failures.last!) }
                    }
                default:
                    break
                }
                return !open.isEmpty
            }
        }
        if let block {
            block.finish()
            for line in failures + paused { printError(line) }
        }
        var total = "\(completed) of \(downloads.count + refused) completed"
        if !failures.isEmpty { total += ", \(failures.count) failed" }
        if !paused.isEmpty { total += ", \(paused.count) paused" }
        if refused > 0 { total += ", \(refused) refused" }
        printError(total)
        if !failures.isEmpty || !paused.isEmpty { throw Stop(status: .failed, message: "") }
    }

    private static func pausedLine(_ d: DownloadView) -> String {
        "haul: \(d.name) is paused (haul resume \(d.id) lets it go on)"
    }

    /// How a failed download is reported.
    private static func failure(_ d: DownloadView) -> String {
        "haul: \(d.name) failed: " + (d.error.map { "\($0.code): \($0.message)" } ?? "no reason given")
    }
}
