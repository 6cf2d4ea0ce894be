import FoundationEssentials

/// Appends a packed download's values.
struct PackWriter {
    var bytes: [UInt8] = []

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    mutating func unsigned(_ value: UInt64) {
        var rest = value
        while rest >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(rest))
    }

    /// Zigzag: small negative numbers stay short.
    mutating func int(_ value: Int64) { unsigned(UInt64(bitPattern: (value << 1) ^ (value >> 63))) }

    mutating func optional(_ value: Int64?) {
        guard let value else { return byte(0) }
        byte(1)
        int(value)
    }

    /// Exact: the time's bits, not a rounding of them.
    mutating func date(_ value: Date) {
        let bits = value.timeIntervalSinceReferenceDate.bitPattern
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
    }

    mutating func optionalDate(_ value: Date?) {
        guard let value else { return byte(0) }
        byte(1)
        date(value)
    }

    /// Its length plus one, then its bytes; nil is a lone 0.
    mutating func string(_ value: String?) {
        guard var value else { return byte(0) }
        value.withUTF8 { utf8 in
            unsigned(UInt64(utf8.count) + 1)
            bytes.append(contentsOf: utf8)
        }
    }

    /// A file's stamp: 0 when there is none, else 1 and its device, inode and size.
    mutating func fileStamp(_ stamp: FileStamp?) {
        guard let stamp else { return byte(0) }
        byte(1)
        unsigned(stamp.device)
        unsigned(stamp.inode)
        int(stamp.size)
    }

    mutating func segments(_ segments: [Segment]) {
        int(Int64(segments.count))
        for segment in segments {
            int(segment.start)
            int(segment.received)
            optional(segment.end)
        }
    }
}
