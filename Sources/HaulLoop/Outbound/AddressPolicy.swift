import Glibc

/// Which addresses an origin may have when `--deny-private-networks` is on: only public unicast ones. Loopback,
/// private, carrier-grade NAT, link-local (cloud metadata at 169.254.169.254 included), unique-local, multicast,
/// reserved and unspecified addresses are refused, also when they hide inside an IPv6 form (v4-mapped, NAT64,
/// 6to4). Checked on each address curl is about to connect to, so a name that resolves there, or a redirect that
/// leads there, is caught as surely as a literal IP in the URL.
public struct AddressPolicy: Sendable {
    /// Networks allowed even though private (an administrator's exceptions), as (address bytes, prefix length).
    public var exceptions: [(bytes: [UInt8], prefix: Int)] = []

    public init(exceptions: [(bytes: [UInt8], prefix: Int)] = []) { self.exceptions = exceptions }

    /// Whether connecting to the address (4 or 16 bytes) is allowed.
    public func allows(_ address: [UInt8]) -> Bool {
        if exceptions.contains(where: { AddressPolicy.matches(address, $0.bytes, $0.prefix) }) { return true }
        return AddressPolicy.reason(address) == nil
    }

    /// Why the address is not public ("loopback", "private", ...), or nil if it is.
    public static func reason(_ address: [UInt8]) -> String? {
        if address.count == 4 { return reason4(address) }
        guard address.count == 16 else { return "unknown" }
        let a = address
        if a.allSatisfy({ $0 == 0 }) { return "unspecified" }
        if a[0..<15].allSatisfy({ $0 == 0 }) && a[15] == 1 { return "loopback" }
        // ::ffff:a.b.c.d (v4-mapped), 64:ff9b::a.b.c.d (NAT64): the IPv4 address decides.
        if a[0..<10].allSatisfy({ $0 == 0 }) && a[10] == 0xff && a[11] == 0xff { return reason4(Array(a[12..<16])) }
        if matches(a, [0x00, 0x64, 0xff, 0x9b] + [UInt8](repeating: 0, count: 12), 96) {
            return reason4(Array(a[12..<16]))
        }
        // 2002:a.b.c.d::/48 (6to4).
        if a[0] == 0x20 && a[1] == 0x02 { return reason4(Array(a[2..<6])) }
        if a[0] == 0xff { return "multicast" }
        if a[0] & 0xfe == 0xfc { return "unique-local" }
        if a[0] == 0xfe && a[1] & 0xc0 == 0x80 { return "link-local" }
        if a[0] == 0xfe && a[1] & 0xc0 == 0xc0 { return "site-local" }
        // IPv4-compatible (::a.b.c.d, deprecated) and the documentation prefix 2001:db8::/32.
        if a[0..<12].allSatisfy({ $0 == 0 }) { return "reserved" }
        if a[0] == 0x20 && a[1] == 0x01 && a[2] == 0x0d && a[3] == 0xb8 { return "reserved" }
        return nil
    }

    private static func reason4(_ a: [UInt8]) -> String? {
        switch (a[0], a[1]) {
        case (0, _): return "unspecified"
        case (10, _): return "private"
        case (100, 64...127): return "shared (carrier-grade NAT)"
        case (127, _): return "loopback"
        case (169, 254): return "link-local"
        case (172, 16...31): return "private"
        case (192, 0) where a[2] == 0 || a[2] == 2: return "reserved"
        case (192, 168): return "private"
        case (198, 18...19): return "reserved"
        case (198, 51) where a[2] == 100: return "reserved"
        case (203, 0) where a[2] == 113: return "reserved"
        case (224...239, _): return "multicast"
        case (240...255, _): return "reserved"
        default: return nil
        }
    }

    /// Whether the first `prefix` bits of `address` and `network` agree (same family only).
    static func matches(_ address: [UInt8], _ network: [UInt8], _ prefix: Int) -> Bool {
        guard address.count == network.count, prefix <= address.count * 8 else { return false }
        var bits = prefix
        for i in 0..<address.count where bits > 0 {
            let mask: UInt8 = bits >= 8 ? 0xff : ~(0xff >> UInt8(bits))
            if address[i] & mask != network[i] & mask { return false }
            bits -= 8
        }
        return true
    }

    /// Parses `a.b.c.d/n` or `x:y::z/n` (the prefix defaults to the whole address).
    public static func network(_ text: String) -> (bytes: [UInt8], prefix: Int)? {
        let parts = text.split(separator: "/", maxSplits: 1)
        guard let first = parts.first else { return nil }
        var bytes: [UInt8]
        if first.contains(":") {
            var v6 = in6_addr()
            guard inet_pton(AF_INET6, String(first), &v6) == 1 else { return nil }
            bytes = withUnsafeBytes(of: &v6) { Array($0) }
        } else {
            var v4 = in_addr()
            guard inet_pton(AF_INET, String(first), &v4) == 1 else { return nil }
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
        }
        let prefix = parts.count > 1 ? Int(parts[1]) : bytes.count * 8
        guard let prefix, (0...bytes.count * 8).contains(prefix) else { return nil }
        return (bytes, prefix)
    }
}
