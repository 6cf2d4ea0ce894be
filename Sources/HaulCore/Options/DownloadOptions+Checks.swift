import FoundationEssentials
import HaulLoop

/// How the option table's rows check a value before they set it: each wrong value is a problem under the option's
/// name, and the request goes on being checked (every wrong field is said at once).
extension DownloadOptions {
    /// `read`'s value, or nil with `message` added to `problems` under the option's name.
    static func checked<T>(
        _ read: T?, _ option: DownloadOption.Key, _ message: @autoclosure () -> String,
        _ problems: inout [FieldProblem]
    ) -> T? {
        if read == nil { problems.append((option.name, message())) }
        return read
    }

    static func checkedString(
        _ value: JSONValue, _ option: DownloadOption.Key,
        _ problems: inout [FieldProblem]
    ) -> String? {
        checked(value.stringValue, option, "must be a string", &problems)
    }

    /// An integer in the option's range.
    static func checkedInteger(
        _ value: JSONValue, _ option: DownloadOption.Key,
        _ problems: inout [FieldProblem]
    ) -> Int64? {
        let range = option.range!
        return checked(
            value.integerValue.flatMap { range.contains($0) ? $0 : nil }, option,
            "must be an integer from \(range.lowerBound) to \(range.upperBound)", &problems)
    }

    /// Text of at most `limit` characters (code points, as JSON Schema counts them) without control characters
    /// (tabs and line breaks too where `lines`: a cookies.txt), which would otherwise end up in a request head.
    static func checkedText(
        _ value: JSONValue, _ option: DownloadOption.Key, limit: Int, lines: Bool,
        _ problems: inout [FieldProblem]
    ) -> String? {
        guard let text = checkedString(value, option, &problems) else { return nil }
        let allowed: (UInt8) -> Bool = { byte in
            byte >= 0x20 && byte != 0x7F || (lines && (byte == 0x09 || byte == 0x0A || byte == 0x0D))
        }
        guard text.unicodeScalars.count <= limit, text.utf8.allSatisfy(allowed) else {
            problems.append((option.name, "must be at most \(limit) characters without control characters"))
            return nil
        }
        return text
    }

    static func checkedBool(
        _ value: JSONValue, _ option: DownloadOption.Key,
        _ problems: inout [FieldProblem]
    ) -> Bool? {
        checked(value.boolValue, option, "must be true or false", &problems)
    }
}
