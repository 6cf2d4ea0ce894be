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
        return body.count == 43 && Base64.decode(String(decoding: body, as: UTF8.self))?.count == 32
    }

    /// The same fingerprint however it was written: without its padding.
    public static func normalized(_ text: String) -> String {
        text.hasSuffix("=") ? String(text.dropLast()) : text
    }
}
