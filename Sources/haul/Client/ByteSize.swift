/// Byte counts as people write them on a command line or in a config file: `4194304`, `4m`, `1.5M`, `10MB`,
/// `512KiB`. Every unit is a power of 1024 (k, m, g, t), as curl, aria2 and `haul serve` have always read them;
/// a trailing `B` or `iB` changes nothing.
enum ByteSize {
    static func parse(_ text: String) -> Int64? {
        var rest = Substring(text.trimmingSpaces().lowercased())
        for suffix in ["ib", "b"] where rest.hasSuffix(suffix) && rest.count > suffix.count {
            rest = rest.dropLast(suffix.count)
            break
        }
        var multiplier: Double = 1
        if let last = rest.last, let power = ["k": 1, "m": 2, "g": 3, "t": 4][last] {
            for _ in 0..<power { multiplier *= 1024 }
            rest = rest.dropLast()
        }
        // Digits with at most one decimal point: no signs, exponents, "inf" or "nan".
        guard !rest.isEmpty, rest.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
            rest.filter({ $0 == "." }).count <= 1, rest != ".", let number = Double(rest)
        else { return nil }
        let bytes = number * multiplier
        // A fraction of a byte is a typo, not a size.
        guard bytes < 9.0e18, bytes == bytes.rounded() || multiplier > 1 else { return nil }
        return Int64(bytes.rounded(.down))
    }
}
