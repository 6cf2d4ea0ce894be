import HaulLoop

/// Entity tags for conditional GETs (RFC 9110 8.8.3 and 13.1.2).
enum ETag {
    /// A strong tag from a 64-bit hash of the body, eight bytes a step (FNV-1a went a byte a step: 3% of a status
    /// read's CPU): equal bodies, equal tags.
    static func of(_ body: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325 ^ UInt64(body.count)
        body.withUnsafeBytes { raw in
            var offset = 0
            while offset + 8 <= raw.count {
                hash = (hash ^ raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) &* 0x9e37_79b9_7f4a_7c15
                hash ^= hash >> 29
                offset += 8
            }
            while offset < raw.count {
                hash = (hash ^ UInt64(raw[offset])) &* 0x0000_0100_0000_01b3
                offset += 1
            }
        }
        hash ^= hash >> 32
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
