import Foundation

/// One line per event on standard error: time, level, message, then `key=value` metadata with dotted keys.
public struct Logger: Sendable {
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

    public init(minimum: Level = .info) { self.minimum = minimum }

    public func log(_ level: Level, _ message: String, _ metadata: [String: String] = [:]) {
        guard level >= minimum else { return }
        var line = "\(Timestamp.rfc3339(Date())) \(level.name) \(message)"
        for key in metadata.keys.sorted() { line += " \(key)=\(metadata[key]!)" }
        line += "\n"
        // One write(2) per line, so lines from the loop and from worker threads never interleave mid-line.
        line.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let n = write(STDERR_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }
                offset += n
            }
        }
    }

    public func debug(_ m: String, _ meta: [String: String] = [:]) { log(.debug, m, meta) }
    public func info(_ m: String, _ meta: [String: String] = [:]) { log(.info, m, meta) }
    public func warning(_ m: String, _ meta: [String: String] = [:]) { log(.warning, m, meta) }
    public func error(_ m: String, _ meta: [String: String] = [:]) { log(.error, m, meta) }
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
}
