import FoundationEssentials
import Glibc
import HaulLoop

/// One line per event on standard error: time, level, message, then `key=value` metadata with dotted keys; or, in
/// the JSON format, one object per line with the members `time`, `level`, `msg` and the metadata keys.
public struct Logger: Sendable {
    public enum Format: String, Sendable {
        case text, json
    }

    public enum Level: Int, Sendable, Comparable {
        case debug, info, warning, error

        /// The name printed in log lines (interpolating the case itself goes through reflection).
        public var name: String {
            switch self {
            case .debug: "debug"
            case .info: "info"
            case .warning: "warning"
            case .error: "error"
            }
        }
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
    }

    public var minimum: Level
    public var format: Format
    /// When set, lines collect here and go out in one write per loop turn (warnings and errors at once); without
    /// it each line is its own write.
    public var buffer: LogBuffer?

    public init(minimum: Level = .info, format: Format = .text, buffer: LogBuffer? = nil) {
        self.minimum = minimum
        self.format = format
        self.buffer = buffer
    }

    public func log(_ level: Level, _ message: String, _ metadata: [String: String] = [:]) {
        guard level >= minimum else { return }
        // Built as bytes: a line is written for every API request, so its cost shows in request rates.
        var line: [UInt8] = []
        line.reserveCapacity(128 + message.utf8.count)
        let keys = metadata.count > 1 ? metadata.keys.sorted() : Array(metadata.keys)
        switch format {
        case .text:
            line += Timestamp.rfc3339(Date()).utf8
            line.append(UInt8(ascii: " "))
            line += level.name.utf8
            line.append(UInt8(ascii: " "))
            line += message.utf8
            for key in keys {
                line.append(UInt8(ascii: " "))
                line += key.utf8
                line.append(UInt8(ascii: "="))
                Logger.appendQuoted(metadata[key]!, to: &line)
            }
        case .json:
            var members: [(String, JSONValue)] = [
                ("time", .string(Timestamp.rfc3339(Date()))),
                ("level", .string(level.name)), ("msg", .string(message)),
            ]
            for key in keys where key != "time" && key != "level" && key != "msg" {
                members.append((key, .string(metadata[key]!)))
            }
            line = JSONValue.object(members).serializedBytes()
        }
        line.append(UInt8(ascii: "\n"))
        if let buffer { return buffer.append(line, urgent: level >= .warning) }
        Logger.write(line)
    }

    /// Writes whole lines with as few write(2) calls as the kernel allows, so lines never interleave mid-line.
    static func write(_ bytes: [UInt8]) {
        Files.writeAll(bytes, to: STDERR_FILENO)
    }

    /// A value as logfmt writes it: bare when it holds no space, quote, `=`, backslash or control character, else
    /// quoted with those escaped.
    static func quoted(_ value: String) -> String {
        var bytes: [UInt8] = []
        appendQuoted(value, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    static func appendQuoted(_ value: String, to out: inout [UInt8]) {
        let plain =
            !value.isEmpty
            && value.utf8.allSatisfy {
                $0 > 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "=") && $0 != UInt8(ascii: "\\")
                    && $0 != 0x7f
            }
        if plain {
            out += value.utf8
            return
        }
        out.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out += Array("\\\"".utf8)
            case UInt8(ascii: "\\"): out += Array("\\\\".utf8)
            case UInt8(ascii: "\n"): out += Array("\\n".utf8)
            case UInt8(ascii: "\r"): out += Array("\\r".utf8)
            case UInt8(ascii: "\t"): out += Array("\\t".utf8)
            case 0..<0x20, 0x7f: out += Array("\\u{\(String(byte, radix: 16))}".utf8)
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    public func debug(_ m: String, _ meta: [String: String] = [:]) { log(.debug, m, meta) }
    public func info(_ m: String, _ meta: [String: String] = [:]) { log(.info, m, meta) }
    public func warning(_ m: String, _ meta: [String: String] = [:]) { log(.warning, m, meta) }
    public func error(_ m: String, _ meta: [String: String] = [:]) { log(.error, m, meta) }
}

/// Log lines waiting for the end of the loop turn: a line per API request cost a write(2) each, 10% of the request
/// rate. `schedule` (set by the loop's owner) arranges one `flush` at the end of the turn and answers false off the
/// loop's thread, where a line is written at once; so are a warning, an error, and 64 KiB of lines. The lock keeps
/// lines whole when a worker thread logs while the loop flushes.
public final class LogBuffer: @unchecked Sendable {
    private let lock = Lock()
    private var pending: [UInt8] = []
    private var scheduled = false
    /// Arranges for `flush` to run at the end of the current loop turn; false when it cannot (another thread).
    public var schedule: (() -> Bool)?

    public init() {}

    func append(_ line: [UInt8], urgent: Bool) {
        let now = lock.withLock {
            pending += line
            if urgent || pending.count >= 64 * 1024 { return true }
            if scheduled { return false }
            if let schedule, schedule() {
                scheduled = true
                return false
            }
            return true
        }
        if now { flush() }
    }

    /// Writes every line waiting, in order.
    public func flush() {
        let lines = lock.withLock {
            let lines = pending
            pending.removeAll(keepingCapacity: true)
            scheduled = false
            return lines
        }
        if !lines.isEmpty { Logger.write(lines) }
    }
}

/// RFC 3339 UTC timestamps, as the API prints them.
public enum Timestamp {
    /// `2026-11-29T17:00:36.473Z`, formatted by hand: it runs several times for every download in every answer.
    public static func rfc3339(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let millis = min(999, Int((date.timeIntervalSince1970 - Double(seconds)) * 1000))
        var out: [UInt8] = []
        out.reserveCapacity(24)
        func digits(_ value: Int, _ count: Int) {
            var divisor = 1
            for _ in 1..<count { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                out.append(UInt8(ascii: "0") + UInt8(rest / divisor % 10))
                rest %= divisor
                divisor /= 10
            }
        }
        digits(Int(parts.tm_year) + 1900, 4); out.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mon) + 1, 2); out.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mday), 2); out.append(UInt8(ascii: "T"))
        digits(Int(parts.tm_hour), 2); out.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_min), 2); out.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_sec), 2); out.append(UInt8(ascii: "."))
        digits(millis, 3); out.append(UInt8(ascii: "Z"))
        return String(decoding: out, as: UTF8.self)
    }

    /// What `rfc3339` prints, read back: `2026-11-29T17:00:36.473Z` (fraction optional, UTC only).
    public static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.last == UInt8(ascii: "Z"), bytes[4] == UInt8(ascii: "-"),
            bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"),
            bytes[16] == UInt8(ascii: ":")
        else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in bytes[range] {
                guard let digit = PercentEncoding.hexValue(byte), digit < 10 else { return nil }
                value = value * 10 + Int(digit)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var fraction = 0.0
        if bytes.count > 20 {
            guard bytes[19] == UInt8(ascii: "."), bytes.count > 21, let digits = number(20..<(bytes.count - 1)),
                bytes.count - 21 <= 9
            else { return nil }
            fraction = Double(digits) / pow(10, Double(bytes.count - 21))
        }
        let days = HTTPDate.daysSinceEpoch(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: Double(days * 86_400 + hour * 3_600 + minute * 60 + second) + fraction)
    }
}
