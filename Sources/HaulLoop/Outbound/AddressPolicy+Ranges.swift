/// The policy as address ranges, for a filter that takes ranges (libtorrent's IP filter, which guards the peers
/// and trackers of torrents as curl's check guards origins).
extension AddressPolicy {
    /// The networks `reason` refuses, as (bytes, prefix).
    static let refusedNetworks: [(String, Int)] = [
        ("0.0.0.0", 8), ("10.0.0.0", 8), ("100.64.0.0", 10), ("127.0.0.0", 8), ("169.254.0.0", 16),
        ("172.16.0.0", 12), ("192.0.0.0", 24), ("192.0.2.0", 24), ("192.168.0.0", 16), ("198.18.0.0", 15),
        ("198.51.100.0", 24), ("203.0.113.0", 24), ("224.0.0.0", 3),
        ("::", 96), ("::ffff:0:0", 96), ("64:ff9b::", 96), ("2002::", 16), ("2001:db8::", 32), ("fc00::", 7),
        ("fe80::", 10), ("fec0::", 10), ("ff00::", 8),
    ]

    /// `first-last` lines: the refused networks, then the exceptions as `+first-last` (allowed again).
    public var blockedRanges: [String] {
        let refused = Self.refusedNetworks.compactMap { network in
            AddressPolicy.network("\(network.0)/\(network.1)").map { Self.range($0.bytes, $0.prefix) }
        }
        return refused + exceptions.map { "+" + Self.range($0.bytes, $0.prefix) }
    }

    /// The first and last address of a network, as text.
    static func range(_ bytes: [UInt8], _ prefix: Int) -> String {
        var first = bytes
        var last = bytes
        for index in bytes.indices {
            let kept = max(0, min(8, prefix - index * 8))
            let mask: UInt8 = kept == 8 ? 0xff : ~(0xff >> UInt8(kept))
            first[index] = bytes[index] & mask
            last[index] = bytes[index] | ~mask
        }
        return IPAddress.text(first) + "-" + IPAddress.text(last)
    }
}
