extension String {
    /// Whether `needle` (lowercased) is in this string, without case. ASCII, the usual case, is compared byte by
    /// byte without a lowercased copy: a search of a million downloads' names and URLs made two of them each
    /// (3.2 s a page at a million, most of it allocating). Other text takes Unicode's lowercasing.
    public func containsIgnoringCase(_ needle: String) -> Bool {
        if needle.isEmpty { return true }
        var haystack = self
        var lowered = needle
        let ascii = haystack.withUTF8 { bytes in
            lowered.withUTF8 { needle in
                Self.asciiContains(bytes, needle)
            }
        }
        return ascii ?? lowercased().contains(needle)
    }

    /// Whether `needle` (lowercased) is in `haystack`, without case; nil when either side has a byte outside ASCII.
    static func asciiContains(
        _ haystack: UnsafeBufferPointer<UInt8>, _ needle: UnsafeBufferPointer<UInt8>
    )
        -> Bool?
    {
        if needle.contains(where: { $0 >= 0x80 }) { return nil }
        @inline(__always) func lower(_ byte: UInt8) -> UInt8 {
            byte &- UInt8(ascii: "A") < 26 ? byte | 0x20 : byte
        }
        // Past a byte outside ASCII, Unicode's lowercasing decides (the Kelvin sign lowercases to "k"); a match
        // found before it stands whatever follows.
        let last = haystack.count - needle.count
        var start = 0
        while start < haystack.count {
            let byte = haystack[start]
            if byte >= 0x80 { return nil }
            if start <= last, lower(byte) == needle[0] {
                var index = 1
                while index < needle.count, lower(haystack[start + index]) == needle[index] { index += 1 }
                if index == needle.count { return true }
            }
            start += 1
        }
        return false
    }
}
