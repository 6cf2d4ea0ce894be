import FoundationEssentials
import Glibc
import HaulCore
import HaulLoop

/// What the command-line client prints: sizes, durations, a progress bar on a terminal and plain lines elsewhere.
enum Format {
    static func bytes(_ value: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var scaled = Double(value)
        var unit = 0
        while scaled >= 1024, unit < units.count - 1 {
            scaled /= 1024
            unit += 1
        }
        return unit == 0 ? "\(value) B" : Decimals.format(scaled, places: scaled < 10 ? 2 : 1) + " " + units[unit]
    }

    static func duration(_ seconds: Double) -> String {
        let s = max(0, Int(seconds.rounded()))
        func twoDigits(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        if s < 60 { return "\(s) s" }
        if s < 3600 { return "\(s / 60) min \(twoDigits(s % 60)) s" }
        return "\(s / 3600) h \(twoDigits(s % 3600 / 60)) min"
    }

    /// `text` cut or padded to `width` characters.
    static func column(_ text: String, _ width: Int) -> String {
        guard width > 0 else { return "" }
        return text.count > width
            ? String(text.prefix(width - 1)) + "…"
            : text + String(repeating: " ", count: width - text.count)
    }

    /// `text` cut to `width` characters, or padded on the left to it (numbers in a column).
    static func right(_ text: String, _ width: Int) -> String {
        text.count >= width ? column(text, width) : String(repeating: " ", count: width - text.count) + text
    }

    /// A size in at most 7 characters for a column: `1.25GiB`, `12.3MiB`, `1023KiB`, `512B`.
    static func shortBytes(_ value: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
        var scaled = Double(value)
        var unit = 0
        while scaled >= 1024, unit < units.count - 1 {
            scaled /= 1024
            unit += 1
        }
        if unit == 0 { return "\(value)B" }
        let places = scaled < 10 ? 2 : scaled < 100 ? 1 : 0
        return Decimals.format(scaled, places: places) + units[unit]
    }

    /// A duration in at most 6 characters for a column: `45s`, `12m05s`, `3h05m`, `2d03h`.
    static func shortDuration(_ seconds: Double) -> String {
        let s = max(0, Int(seconds.rounded(.up)))
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        if s < 60 { return "\(s)s" }
        if s < 3600 { return "\(s / 60)m\(two(s % 60))s" }
        if s < 86400 { return "\(s / 3600)h\(two(s % 3600 / 60))m" }
        return s / 86400 > 99 ? ">99d" : "\(s / 86400)d\(two(s % 86400 / 3600))h"
    }

    /// A moment in the local time zone, as people read it: `2026-12-03 07:30:05`.
    static func time(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        localtime_r(&seconds, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))"
    }

    /// An RFC 3339 time from the API in local time, or nil.
    static func time(_ value: JSONValue?) -> String? {
        value?.stringValue.flatMap(Timestamp.parse).map(time)
    }
}

/// The fields of a download resource the client shows.
struct DownloadView {
    let id: String
    let state: String
    let name: String
    let path: String?
    let received: Int64
    let total: Int64?
    let progress: Double?
    let speed: Double
    let eta: Double?
    let error: (code: String, message: String)?
    /// Why it is trying again, and in how many seconds (nil while anything of it is under way).
    let lastError: (code: String, message: String)?
    let retryIn: Double?
    let category: String?

    init(_ json: JSONValue) {
        id = json["id"]?.stringValue ?? "?"
        state = json["state"]?.stringValue ?? "?"
        let url = json["url"]?.stringValue ?? ""
        name =
            json["filename"]?.stringValue
            ?? URL(string: url)?.lastPathComponent.nonEmpty ?? url
        path = json["path"]?.stringValue
        received = json["received_bytes"]?.integerValue ?? 0
        total = json["total_bytes"]?.integerValue
        if case .number(let p) = json["progress"] { progress = p } else { progress = nil }
        if case .number(let s) = json["speed"] { speed = s } else { speed = 0 }
        if case .number(let e) = json["eta_seconds"] { eta = e } else { eta = nil }
        func reason(_ value: JSONValue?) -> (code: String, message: String)? {
            guard let value, let code = value["code"]?.stringValue else { return nil }
            return (code, value["message"]?.stringValue ?? "")
        }
        error = reason(json["error"])
        lastError = reason(json["last_error"])
        retryIn = json["next_attempt_at"]?.stringValue.flatMap(Timestamp.parse).map { max(0, $0.timeIntervalSinceNow) }
        category = json["category"]?.stringValue
    }

    var isRunning: Bool { ["probing", "downloading", "verifying"].contains(state) }
    var isFinished: Bool { state == "completed" || state == "failed" }

    var percent: String { progress.map { "\(Int(($0 * 100).rounded(.down)))%" } ?? "" }

    /// "retrying in 4 s" while it waits to try again.
    var retrying: String? { retryIn.map { "retrying in \(Format.duration($0))" } }

    /// "retrying in 4 s: http_503: the server answered HTTP 503", for lines that have room for the reason.
    var retryNote: String? {
        retrying.map { note in lastError.map { "\(note): \($0.code): \($0.message)" } ?? note }
    }

    var size: String {
        guard let total else { return received > 0 ? "\(Format.bytes(received)) of unknown" : "size unknown" }
        return "\(Format.bytes(received)) of \(Format.bytes(total))"
    }

    /// What its bar shows; `compact` in the short forms a narrow terminal has room for (`1.2MiB/4.8MiB`, `3s`).
    func bar(compact: Bool = false) -> BarLine {
        var tail: [String] = []
        if isRunning, speed > 0 {
            tail.append((compact ? Format.shortBytes(Int64(speed)) : Format.bytes(Int64(speed))) + "/s")
        }
        if isRunning, let eta { tail.append("ETA " + (compact ? Format.shortDuration(eta) : Format.duration(eta))) }
        if let retryIn { tail.append(compact ? "retry in \(Format.shortDuration(retryIn))" : retrying!) }
        if !isRunning { tail.append(state) }
        var size = self.size
        if compact {
            size =
                total.map { "\(Format.shortBytes(received))/\(Format.shortBytes($0))" }
                ?? (received > 0 ? Format.shortBytes(received) : "size unknown")
        }
        return BarLine(
            name: name, fraction: progress ?? (state == "completed" ? 1 : nil), percent: percent,
            size: size, tail: tail)
    }
}

/// One line of progress: a name, a bar, then the numbers (never cut: the ETA is the last of them).
struct BarLine {
    var name: String
    /// 0...1, nil while the size is unknown.
    var fraction: Double?
    var percent: String
    var size: String
    /// Speed, ETA, a wait to retry, the state: each shown after the size.
    var tail: [String]

    /// The line for a terminal `width` columns wide: name, bar, then the numbers, which are never cut (the ETA is
    /// the last of them); the name shrinks first, then the bar, then the bar goes. The last column stays free, as
    /// some terminals wrap a line that fills it. `tailWidth` is the widest tail drawn yet: the bar keeps its width
    /// while the numbers after it change. Lines drawn one above the other give the same `nameWidth`, so their bars
    /// line up.
    func render(width: Int, tailWidth: inout Int, nameWidth wanted: Int? = nil) -> String {
        var tail = " \(Format.column(percent, 4)) \(size)"
        for part in self.tail { tail += "  " + part }
        tailWidth = max(tailWidth, tail.count)
        let room = width - 1
        let reserved = min(tailWidth, max(tail.count, room - 8 - 3 - 5))
        let nameWidth = max(8, min(24, wanted ?? name.count, room - reserved - 3 - 10))
        let barWidth = room - nameWidth - 3 - reserved
        guard barWidth >= 5 else {
            // Too narrow for a bar: as much of the name as fits before the numbers.
            let nameRoom = room - tail.count
            return nameRoom >= 2 ? Format.column(name, nameRoom) + tail : String(tail.dropFirst().prefix(room))
        }
        let filled = min(barWidth, Int(((fraction ?? 0) * Double(barWidth)).rounded(.down)))
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: barWidth - filled)
        return Format.column(name, nameWidth) + " [" + bar + "]" + Format.column(tail, reserved)
    }
}

/// Shows one download's progress: a bar redrawn in place on a terminal, or a line per state change and at most one
/// progress line a second when the output is a file or a pipe.
final class ProgressDisplay {
    private let terminal: Bool
    private var lastState = ""
    private var lastLineAt = 0.0
    private var drawn = false
    /// The longest tail drawn yet: the bar keeps its width while the numbers after it change.
    private var tailWidth = 0

    init(terminal: Bool = isatty(STDERR_FILENO) == 1) {
        self.terminal = terminal
    }

    /// The terminal's width now (it may be resized while the bar runs), else COLUMNS, else 80.
    private var width: Int {
        Terminal.columns(STDERR_FILENO)
            ?? ProcessInfo.processInfo.environment["COLUMNS"].flatMap(Int.init).flatMap { $0 > 0 ? $0 : nil } ?? 80
    }

    func show(_ d: DownloadView) {
        if terminal {
            draw(d)
        } else {
            // The end is told by the caller's closing line.
            let now = ProcessInfo.processInfo.systemUptime
            guard !d.isFinished, d.state != lastState || (d.isRunning && now - lastLineAt >= 1) else { return }
            lastLineAt = now
            var line = "\(d.name): \(d.state)"
            if d.progress != nil || d.received > 0 {
                line += " \(d.percent) (\(d.size)"
                if d.isRunning, d.speed > 0 { line += ", \(Format.bytes(Int64(d.speed)))/s" }
                line += ")"
            }
            if let note = d.retryNote { line += ", " + note }
            printError(line)
        }
        lastState = d.state
    }

    /// Ends the bar's line, so what follows starts on its own.
    func finish() {
        if terminal && drawn { writeError("\n") }
        drawn = false
    }

    private func draw(_ d: DownloadView) {
        writeError("\r" + ProgressDisplay.line(d, width: width, tailWidth: &tailWidth) + "\u{1B}[K")
        drawn = true
    }

    /// The bar's line for a terminal `width` columns wide (see `BarLine.render`).
    static func line(_ d: DownloadView, width: Int, tailWidth: inout Int) -> String {
        d.bar().render(width: width, tailWidth: &tailWidth)
    }

    /// Writes `text` on a line of its own: the bar is taken off its line first and drawn again with the next change.
    func notice(_ text: String) {
        if terminal && drawn { writeError("\r\u{1B}[K") }
        drawn = false
        printError(text)
    }
}

/// Server-sent events from a byte stream: complete events come out as the bytes arrive.
struct EventParser {
    struct Event {
        var id: String?
        var name = "message"
        var data = ""
    }

    private var buffer: [UInt8] = []

    mutating func feed(_ bytes: [UInt8]) -> [Event] {
        buffer += bytes
        var events: [Event] = []
        while let end = blankLine() {
            let block = String(decoding: buffer[..<end.start], as: UTF8.self)
            buffer.removeSubrange(..<end.after)
            scanned = 0
            var event = Event()
            var dataLines: [Substring] = []
            for line in block.split(separator: "\n", omittingEmptySubsequences: false) {
                let line = line.hasSuffix("\r") ? line.dropLast() : line
                if line.isEmpty || line.hasPrefix(":") { continue }
                let colon = line.firstIndex(of: ":")
                let field = colon.map { line[..<$0] } ?? line
                var value = colon.map { line[line.index(after: $0)...] } ?? ""
                if value.hasPrefix(" ") { value = value.dropFirst() }
                switch field {
                case "id": event.id = String(value)
                case "event": event.name = String(value)
                case "data": dataLines.append(value)
                default: break
                }
            }
            guard !dataLines.isEmpty else { continue }
            event.data = dataLines.joined(separator: "\n")
            events.append(event)
        }
        return events
    }

    /// Where the first blank line ("\n\n" or "\r\n\r\n") starts and where the bytes after it begin.
    /// Where the search for a blank line goes on: the bytes before it hold none, so a large event (a snapshot)
    /// arriving in many pieces is scanned once, not once per piece.
    private var scanned = 0

    private mutating func blankLine() -> (start: Int, after: Int)? {
        var index = scanned
        defer { scanned = max(0, index - 1) }
        while index + 1 < buffer.count {
            if buffer[index] == 10 {
                if buffer[index + 1] == 10 { return (index, index + 2) }
                if buffer[index + 1] == 13, index + 2 < buffer.count, buffer[index + 2] == 10 {
                    return (index, index + 3)
                }
            }
            index += 1
        }
        return nil
    }
}

func writeError(_ text: String) {
    Files.writeAll(text.utf8, to: STDERR_FILENO)
}

func printError(_ line: String) {
    writeError(line + "\n")
}

extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}

/// A line on standard output, written at once (a watcher's output may be a pipe read as it comes).
func printOutput(_ line: String) {
    Files.writeAll((line + "\n").utf8, to: STDOUT_FILENO)
}
