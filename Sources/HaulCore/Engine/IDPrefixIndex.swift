/// Every download's id by its first two characters (1,024 prefixes for Haul's ids): a page of `id_prefix`
/// (`haul rm 5sbz`) costs the few ids that share the prefix, not a walk of the list (0.34 s at a million). An id
/// whose first two characters are plain ASCII (Haul's always are) goes to a bucket found by those two bytes, with no
/// hash made: a set of strings hashed each id and was a sixth of indexing a million at start-up. Any other goes to a
/// bucket by its prefix's text.
struct IDPrefixIndex {
    static let length = 2

    /// 128 x 128 buckets, by the prefix's two bytes.
    private var ascii: [[String]] = Array(repeating: [], count: 128 * 128)
    private var other: [String: [String]] = [:]

    mutating func insert(_ id: String) {
        if let bucket = Self.bucket(id) { return ascii[bucket].append(id) }
        other[String(id.prefix(Self.length)), default: []].append(id)
    }

    /// Forgets `id` (a walk of its bucket: a thousand ids at a million).
    mutating func remove(_ id: String) {
        if let bucket = Self.bucket(id) {
            if let at = ascii[bucket].firstIndex(of: id) { ascii[bucket].remove(at: at) }
            return
        }
        let key = String(id.prefix(Self.length))
        if let at = other[key]?.firstIndex(of: id) { other[key]!.remove(at: at) }
        if other[key]?.isEmpty == true { other.removeValue(forKey: key) }
    }

    /// The ids that start with `prefix`; nil when `prefix` is shorter than the key (a walk it is, then).
    func ids(prefixed prefix: String) -> Set<String>? {
        guard prefix.count >= Self.length else { return nil }
        let bucket = Self.bucket(prefix).map { ascii[$0] } ?? other[String(prefix.prefix(Self.length))] ?? []
        return Set(bucket.lazy.filter { $0.hasPrefix(prefix) })
    }

    /// The bucket of a text whose first two characters are two bytes of letters, digits, `-` or `_`; nil for any
    /// other, whose prefix is a text.
    private static func bucket(_ text: String) -> Int? {
        var copy = text
        let key = copy.withUTF8 { bytes -> (Int, joined: Bool)? in
            guard bytes.count >= 2, plain(bytes[0]), plain(bytes[1]) else { return nil }
            // A byte beyond ASCII after them may be a mark that joins the second character.
            return (Int(bytes[0]) << 7 | Int(bytes[1]), bytes.count > 2 && bytes[2] >= 0x80)
        }
        guard let key else { return nil }
        if key.joined, text.prefix(length).utf8.count != 2 { return nil }
        return key.0
    }

    private static func plain(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            return true
        default: return false
        }
    }
}
