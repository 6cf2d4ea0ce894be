import FoundationEssentials

/// The ids Haul makes for what it stores (downloads, tokens, webhooks and their deliveries).
public enum HaulID {
    /// 15 characters of Crockford-style base 32: 75 random bits from two calls to the system generator. Fifteen
    /// bytes is the most a Swift string holds inline: an id costs no allocation wherever it is kept or hashed.
    static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz".utf8)
        var bits = (generator.next() as UInt64, generator.next() as UInt64)
        var id = [UInt8]()
        id.reserveCapacity(15)
        for index in 0..<15 {
            if index == 8 { bits.0 = bits.1 }
            id.append(alphabet[Int(bits.0 & 31)])
            bits.0 >>= 5
        }
        return String(decoding: id, as: UTF8.self)
    }

    /// 15 characters of the same base 32 that sort by time: 9 of milliseconds since 1970 (good for a million
    /// years), then 6 random. Rows keyed by these (the webhook outbox's) go in at the end of their index, where a
    /// random key would land on a page of its own each time, one read and one write per row once the table
    /// outgrows the cache.
    static func ordered() -> String {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz".utf8)
        let milliseconds = UInt64(max(0, Date().timeIntervalSince1970 * 1000))
        var random = generator.next() as UInt64
        var id = [UInt8](repeating: 0, count: 15)
        for index in 0..<9 { id[index] = alphabet[Int((milliseconds >> UInt64(5 * (8 - index))) & 31)] }
        for index in 9..<15 {
            id[index] = alphabet[Int(random & 31)]
            random >>= 5
        }
        return String(decoding: id, as: UTF8.self)
    }
}
