/// A byte range of the file fetched by one connection at a time: `start...end`, of which the first `received`
/// bytes are in the part file.
public struct Segment: Equatable, Sendable {
    public var start: Int64
    /// Last byte, inclusive; nil while the file's size is unknown (then there is one segment, to the end).
    public var end: Int64?
    public var received: Int64

    public init(start: Int64, end: Int64?, received: Int64 = 0) {
        self.start = start
        self.end = end
        self.received = received
    }

    /// The next byte to fetch.
    public var cursor: Int64 { start + received }
    /// Bytes still to fetch; nil when the end is unknown.
    public var remaining: Int64? { end.map { max(0, $0 - cursor + 1) } }
    public var isDone: Bool { remaining == 0 }
}

/// Splitting a file into segments and handing out work: pure functions, tested as tables.
public enum SegmentPlanner {
    /// At most `connections` equal segments covering `total` bytes, each at least `minSplit` long (one segment
    /// for a small file).
    public static func initial(total: Int64, connections: Int, minSplit: Int64) -> [Segment] {
        guard total > 0 else { return [Segment(start: 0, end: nil)] }
        let count = Int(max(1, min(Int64(connections), total / max(1, minSplit))))
        let size = total / Int64(count)
        return (0..<count).map { i in
            let start = Int64(i) * size
            let end = i == count - 1 ? total - 1 : start + size - 1
            return Segment(start: start, end: end)
        }
    }

    /// The segment a free connection should fetch next, or nil when there is nothing worth taking: first an
    /// unfinished segment nobody is on (lowest offset first); else the second half of the largest range still
    /// being fetched, split off as a new segment, when that half is at least `minSplit` (work stealing).
    public static func nextWork(_ segments: inout [Segment], busy: Set<Int>, minSplit: Int64) -> Int? {
        if let idle = segments.indices.filter({ !busy.contains($0) && !segments[$0].isDone })
            .min(by: { segments[$0].start < segments[$1].start }) {
            return idle
        }
        guard let victim = busy.filter({ segments[$0].remaining != nil })
            .max(by: { segments[$0].remaining! < segments[$1].remaining! }),
            let remaining = segments[victim].remaining, let end = segments[victim].end,
            remaining / 2 >= minSplit else { return nil }
        let middle = segments[victim].cursor + remaining - remaining / 2
        segments[victim].end = middle - 1
        segments.append(Segment(start: middle, end: end))
        return segments.count - 1
    }

    /// What the journal may claim after a checkpoint that synced `synced` (segments as they were when the sync
    /// began), now that the segments are `live`: per segment, no more than both; a segment split off since then
    /// claims nothing yet.
    public static func journal(synced: [Segment], live: [Segment]) -> [Segment] {
        live.enumerated().map { index, segment in
            var claimed = segment
            let before = index < synced.count && synced[index].start == segment.start ? synced[index].received : 0
            claimed.received = min(before, segment.received)
            return claimed
        }
    }
}
