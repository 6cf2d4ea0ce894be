import HaulLoop

/// Entity tags for conditional GETs (RFC 9110 8.8.3 and 13.1.2).
enum ETag {
    /// A strong tag from the body's 64-bit FNV-1a hash: equal bodies, equal tags.
    static func of(_ body: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in body {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return "\"" + String(repeating: "0", count: 16 - hex.count) + hex + "\""
    }

    /// If-None-Match uses the weak comparison: `W/"x"` matches `"x"`; `*` matches anything.
    static func matches(_ header: String, _ tag: String) -> Bool {
        for candidate in header.split(separator: ",") {
            var value = candidate.trimmingSpaces()
            if value == "*" { return true }
            if value.hasPrefix("W/") { value.removeFirst(2) }
            if value == tag { return true }
        }
        return false
    }
}
