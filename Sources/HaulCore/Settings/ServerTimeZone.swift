import FoundationEssentials
import Glibc
import HaulLoop

/// The time zone the speed schedule's windows are read in, as a person recognises it: the IANA name (`TZ`, else
/// what /etc/localtime links to, else /etc/timezone; `UTC` in the container unless set) and the offset now.
public enum ServerTimeZone {
    /// The zone's name, or its abbreviation (`CET`) when no name can be found.
    public static func name(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if var tz = environment["TZ"], !tz.isEmpty {
            if tz.hasPrefix(":") { tz.removeFirst() }
            return zoneName(inPath: tz) ?? tz
        }
        var buffer = [CChar](repeating: 0, count: 512)
        let length = readlink("/etc/localtime", &buffer, buffer.count - 1)
        if length > 0,
            let name = zoneName(
                inPath: String(
                    decoding: buffer[..<length].map { UInt8(bitPattern: $0) },
                    as: UTF8.self))
        {
            return name
        }
        if let text = try? String(contentsOfFile: "/etc/timezone", encoding: .utf8),
            case let name = text.trimmingSpaces(), !name.isEmpty, !name.contains("\n")
        {
            return name
        }
        return abbreviation(at: Date()) ?? "UTC"
    }

    /// The offset from UTC at `date` as `+01:00` (`+00:00` for UTC).
    public static func offset(at date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        localtime_r(&seconds, &parts)
        let minutes = Int(parts.tm_gmtoff) / 60
        let sign = minutes < 0 ? "-" : "+"
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(sign)\(two(abs(minutes) / 60)):\(two(abs(minutes) % 60))"
    }

    private static func abbreviation(at date: Date) -> String? {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        localtime_r(&seconds, &parts)
        return parts.tm_zone.map { String(cString: $0) }
    }

    /// `Europe/Berlin` of `/usr/share/zoneinfo/Europe/Berlin`.
    private static func zoneName(inPath path: String) -> String? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard let index = parts.lastIndex(of: "zoneinfo") else { return path.hasPrefix("/") ? nil : path }
        let name = parts[(index + 1)...].joined(separator: "/")
        return name.isEmpty ? nil : name
    }
}
