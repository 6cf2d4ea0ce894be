import HaulLoop

/// A request's `Host` (RFC 9110 section 7.2, RFC 3986's `host [":" port]`), read strictly: the allowlist against DNS
/// rebinding decides on the name it yields, so `127.0.0.1:80@evil.example`, `a, b` or two Host headers must not
/// yield one that passes.
public struct HostHeader: Equatable, Sendable {
    /// Lower case; an IPv6 literal keeps its brackets (`[::1]`).
    public let name: String
    public let port: Int?

    /// Parses one Host value; nil unless it is a name, an IPv4 address or a bracketed IPv6 literal, with at most a
    /// decimal port.
    public init?(_ value: String) {
        let bytes = Array(value.utf8)
        guard !bytes.isEmpty, bytes.count <= 300 else { return nil }
        var hostEnd: Int
        if bytes[0] == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")), close > 1 else { return nil }
            let inner = bytes[1..<close]
            let hex = { (b: UInt8) in (0x30...0x39).contains(b) || (0x61...0x66).contains(b | 0x20) }
            guard inner.allSatisfy({ hex($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }),
                inner.contains(UInt8(ascii: ":"))
            else { return nil }
            hostEnd = close + 1
        } else {
            hostEnd = bytes.firstIndex(of: UInt8(ascii: ":")) ?? bytes.count
            let host = bytes[0..<hostEnd]
            // reg-name, narrowed to what DNS names and IPv4 addresses use: no percent-escapes, no sub-delims.
            guard !host.isEmpty,
                host.allSatisfy({
                    (0x30...0x39).contains($0) || (0x61...0x7A).contains($0 | 0x20)
                        || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_")
                })
            else { return nil }
        }
        name = String(decoding: bytes[0..<hostEnd].map(ASCII.lower), as: UTF8.self)
        if hostEnd == bytes.count {
            port = nil
            return
        }
        guard bytes[hostEnd] == UInt8(ascii: ":") else { return nil }
        let digits = bytes[(hostEnd + 1)...]
        // An empty port ("host:") is allowed by RFC 3986 and means the default.
        guard digits.count <= 5, digits.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        let number = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        guard number <= 65535 else { return nil }
        port = digits.isEmpty ? nil : number
    }

    /// Why the Host headers of `request` are unusable, or nil when they are fine: more than one, a malformed one, or
    /// none at all on HTTP/1.1, which requires it.
    public static func problem(in request: HTTPRequest) -> String? {
        let values = request.headerValues("Host")
        if values.count > 1 { return "the request has \(values.count) Host headers; send one" }
        guard let value = values.first else {
            return request.version >= 11 ? "an HTTP/1.1 request must carry a Host header" : nil
        }
        return HostHeader(value) == nil ? "the Host header is not a host name or address with an optional port" : nil
    }
}
