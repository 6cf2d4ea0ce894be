/// What of a download's file is on disk now, as its segments say (each segment's first `received` bytes were
/// written): the map a reader of an unfinished download reads by, never the part file's length.
extension Download {
    /// The byte ranges on disk, merged and in order; a completed download's whole file.
    public var available: [ByteRange] {
        if self.state == .completed {
            let size = self.totalBytes ?? receivedBytes
            return size > 0 ? [ByteRange(0, size - 1)] : []
        }
        // A torrent's verified pieces lie anywhere in its files: those of its one file fetched, if it fetches one.
        if self.kind == .torrent { return self.torrent?.readable ?? [] }
        var merged: [ByteRange] = []
        for segment in self.segments.filter({ $0.received > 0 }).sorted(by: { $0.start < $1.start }) {
            let range = ByteRange(segment.start, segment.start + segment.received - 1)
            if let last = merged.last, range.first <= last.last + 1 {
                merged[merged.count - 1].last = max(last.last, range.last)
            } else {
                merged.append(range)
            }
        }
        return merged
    }

    /// Bytes on disk contiguous from byte 0: what a reader from the start can have now.
    public var contiguousBytes: Int64 {
        guard let first = available.first, first.first == 0 else { return 0 }
        return first.last + 1
    }
}

extension [ByteRange] {
    /// The last byte readable from `offset` on without a gap, or nil when `offset` is not on disk.
    public func readable(from offset: Int64) -> Int64? {
        first { $0.first <= offset && offset <= $0.last }?.last
    }
}
