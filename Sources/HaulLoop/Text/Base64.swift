import FoundationEssentials

/// Base64 (RFC 4648, the standard alphabet) as the places that speak it need it, over FoundationEssentials' own.
public enum Base64 {
    /// `padded: false` leaves out the trailing `=` (OpenSSH's fingerprints).
    public static func encode(_ bytes: [UInt8], padded: Bool = true) -> String {
        let text = Data(bytes).base64EncodedString()
        return padded ? text : String(text.prefix { $0 != "=" })
    }

    /// The bytes of `text`, padded or not; nil when it is not base64.
    public static func decode(_ text: String) -> [UInt8]? {
        var padded = text
        if !padded.hasSuffix("=") {
            padded += String(repeating: "=", count: (4 - padded.utf8.count % 4) % 4)
        }
        return Data(base64Encoded: padded).map { Array($0) }
    }
}
