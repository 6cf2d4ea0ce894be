/// An SSH host key as OpenSSH names it to people: `SHA256:` and the unpadded base64 of the SHA-256 of the key's wire
/// form (what `ssh-keygen -lf` prints and `host_key` pins).
public enum SSHHostKey {
    /// The fingerprint of a key's wire form.
    public static func fingerprint(_ key: [UInt8]) -> String {
        "SHA256:" + Base64.encode(Digest.sha256(key), padded: false)
    }

    /// Whether `text` is such a fingerprint (43 base64 characters, one `=` allowed at the end).
    public static func isFingerprint(_ text: String) -> Bool {
        guard text.hasPrefix("SHA256:") else { return false }
        var body = Array(text.utf8.dropFirst(7))
        if body.last == UInt8(ascii: "=") { body.removeLast() }
        return body.count == 43 && body.allSatisfy { Base64.value(of: $0) != nil }
    }

    /// The same fingerprint however it was written: without its padding.
    public static func normalized(_ text: String) -> String {
        text.hasSuffix("=") ? String(text.dropLast()) : text
    }
}

/// Base64 (RFC 4648, the standard alphabet).
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    public static func encode(_ bytes: [UInt8], padded: Bool = true) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            let value = chunk.enumerated().reduce(0) { $0 | Int($1.element) << (16 - 8 * $1.offset) }
            for position in 0..<(chunk.count + 1) { out.append(alphabet[(value >> (18 - 6 * position)) & 63]) }
            if padded { out += Array(repeating: UInt8(ascii: "="), count: 3 - chunk.count) }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of `text`, nil when it is not base64.
    public static func decode(_ text: String) -> [UInt8]? {
        var bits = 0, count = 0
        var out: [UInt8] = []
        for byte in text.utf8 where byte != UInt8(ascii: "=") {
            guard let value = value(of: byte) else { return nil }
            bits = bits << 6 | value
            count += 6
            if count >= 8 {
                count -= 8
                out.append(UInt8((bits >> count) & 0xFF))
            }
        }
        return out
    }

    static func value(of byte: UInt8) -> Int? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return Int(byte - UInt8(ascii: "A"))
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return Int(byte - UInt8(ascii: "a")) + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return Int(byte - UInt8(ascii: "0")) + 52
        case UInt8(ascii: "+"): return 62
        case UInt8(ascii: "/"): return 63
        default: return nil
        }
    }
}
