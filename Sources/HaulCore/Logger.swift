import Foundation

/// One line per event on standard error: time, level, message, then `key=value` metadata with dotted keys.
public struct Logger: Sendable {
    public enum Level: Int, Sendable, Comparable {
        case debug, info, warning, error
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
    }

    public var minimum: Level

    public init(minimum: Level = .info) { self.minimum = minimum }

    public func log(_ level: Level, _ message: String, _ metadata: [String: String] = [:]) {
        guard level >= minimum else { return }
        var line = "\(Timestamp.rfc3339(Date())) \(level) \(message)"
        for key in metadata.keys.sorted() { line += " \(key)=\(metadata[key]!)" }
        line += "\n"
        FileHandle.standardError.write(Data(line.utf8))
    }

    public func debug(_ m: String, _ meta: [String: String] = [:]) { log(.debug, m, meta) }
    public func info(_ m: String, _ meta: [String: String] = [:]) { log(.info, m, meta) }
    public func warning(_ m: String, _ meta: [String: String] = [:]) { log(.warning, m, meta) }
    public func error(_ m: String, _ meta: [String: String] = [:]) { log(.error, m, meta) }
}

/// RFC 3339 UTC timestamps, as the API prints them.
public enum Timestamp {
    public static func rfc3339(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let millis = Int((date.timeIntervalSince1970 - Double(seconds)) * 1000)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
                      Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), millis)
    }
}
