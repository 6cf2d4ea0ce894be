/// RFC 9110's grammar for header fields (section 5): what may be sent to an origin as a name and a value. One
/// definition, used where a client hands Haul a header and again where any header reaches curl, so a value with a
/// line break can never end the request early and smuggle a second one.
public enum HTTPField {
    /// `token = 1*tchar`; `tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" /
    /// "|" / "~" / DIGIT / ALPHA`.
    public static func isToken(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in !bytes.isEmpty && bytes.allSatisfy(isTokenByte) }
    }

    /// `field-value = *field-content`: visible ASCII, obs-text (bytes 0x80-0xFF, here UTF-8 sequences), spaces and
    /// tabs, but no CR, LF, NUL or any other control, and no whitespace at either end.
    public static func isValue(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            guard bytes.allSatisfy({ $0 >= 0x20 && $0 != 0x7F || $0 == 0x09 }) else { return false }
            guard let first = bytes.first, let last = bytes.last else { return true }
            return !isWhitespace(first) && !isWhitespace(last)
        }
    }

    /// The value without leading and trailing spaces and tabs (optional whitespace, not part of the value).
    public static func trimmed(_ text: String) -> String {
        var text = text
        return text.withUTF8 { bytes in
            var start = 0, end = bytes.count
            while start < end, isWhitespace(bytes[start]) { start += 1 }
            while end > start, isWhitespace(bytes[end - 1]) { end -= 1 }
            return String(decoding: bytes[start..<end], as: UTF8.self)
        }
    }

    /// `name: value` as one request line for curl, or nil when either part breaks the grammar. curl drops a header
    /// given as `name:` with nothing after it; `name;` is how it sends one with an empty value.
    public static func line(name: String, value: String) -> String? {
        guard isToken(name), isValue(value) else { return nil }
        return value.isEmpty ? name + ";" : name + ": " + value
    }

    /// A token compared without case: header names are case-insensitive.
    public static func normalized(_ name: String) -> String {
        var name = name
        return name.withUTF8 { String(decoding: $0.map(ASCII.lower), as: UTF8.self) }
    }

    @inline(__always)
    static func isWhitespace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }

    @inline(__always)
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }
}
