/// Byte-level helpers for protocol text (header names, media types, schemes), which is ASCII by definition.
/// Foundation's case-insensitive comparisons go through Unicode tables and showed up at several percent of the
/// server's time per API request.
public enum ASCII {
    /// Whether `a` and `b` are equal when ASCII letters are compared without case.
    public static func equalsIgnoringCase(_ a: String, _ b: String) -> Bool {
        var a = a, b = b
        return a.withUTF8 { x in
            b.withUTF8 { y in
                guard x.count == y.count else { return false }
                for i in 0..<x.count where lower(x[i]) != lower(y[i]) { return false }
                return true
            }
        }
    }

    /// Whether `text` begins with `prefix`, ASCII letters compared without case.
    public static func hasPrefixIgnoringCase(_ text: String, _ prefix: String) -> Bool {
        let t = text.utf8, p = prefix.utf8
        guard t.count >= p.count else { return false }
        return zip(t, p).allSatisfy { lower($0) == lower($1) }
    }

    @inline(__always)
    public static func isLetterOrDigit(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
    }

    @inlinable public static func lower(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs: HTTP's optional whitespace (RFC 9110 5.6.3).
    public func trimmingSpaces() -> String {
        trimming { $0 == " " || $0 == "\t" }
    }

    /// Without the leading and trailing characters for which `predicate` holds.
    public func trimming(while predicate: (Character) -> Bool) -> String {
        guard let first = firstIndex(where: { !predicate($0) }), let last = lastIndex(where: { !predicate($0) }) else {
            return ""
        }
        return String(self[first...last])
    }
}
