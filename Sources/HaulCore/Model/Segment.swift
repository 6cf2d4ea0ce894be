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

/// The order a new download's bytes are fetched in (`sequential`, `first_last`).
public enum PieceOrder: Sendable, Equatable {
    /// Spread over the connections, each from the start of its part.
    case spread
    /// From the start, in pieces taken in order (a player reading from the start).
    case sequential
    /// The first and the last piece first, then the rest (MP4 and MKV keep their index at either end).
    case firstLast
}

/// Splitting a file into segments and handing out work: pure functions, tested as tables.
public enum SegmentPlanner {
    /// Segments covering `total` bytes, all of them received but the ranges of `doubt` (sorted, disjoint), which
    /// are to be fetched again.
    public static func excluding(_ doubt: [ByteRange], total: Int64) -> [Segment] {
        var segments: [Segment] = []
        var next: Int64 = 0
        for range in doubt where range.first <= range.last && range.first < total {
            let first = max(range.first, next)
            let last = min(range.last, total - 1)
            guard first <= last else { continue }
            if first > next { segments.append(Segment(start: next, end: first - 1, received: first - next)) }
            segments.append(Segment(start: first, end: last))
            next = last + 1
        }
        if next < total { segments.append(Segment(start: next, end: total - 1, received: total - next)) }
        return segments
    }

    /// The segments a new download of `total` bytes starts with, in `order`: spread over the connections; in
    /// pieces of `minSplit` (at most 256), which free connections take lowest first (`sequential`); or spread with
    /// the last piece a segment of its own, so the first and the last are fetched from the start (`firstLast`).
    public static func initial(total: Int64, connections: Int, minSplit: Int64, order: PieceOrder) -> [Segment] {
        switch order {
        case .spread:
            return initial(total: total, connections: connections, minSplit: minSplit)
        case .sequential:
            guard total > 0 else { return [Segment(start: 0, end: nil)] }
            let piece = max(minSplit, (total + 255) / 256)
            return stride(from: Int64(0), to: total, by: Int(piece)).map {
                Segment(start: $0, end: min($0 + piece, total) - 1)
            }
        case .firstLast:
            let piece = min(minSplit, total / 4)
            guard connections > 1, piece > 0 else {
                return initial(total: total, connections: connections, minSplit: minSplit)
            }
            return initial(total: total - piece, connections: connections - 1, minSplit: minSplit)
                + [Segment(start: total - piece, end: total - 1)]
        }
    }

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
    /// unfinished segment nobody is on (lowest offset first); else part of a range still being fetched, split off
    /// as a new segment (work stealing). Every connection here counts at the same rate, so the largest range gives
    /// up its second half when that half is at least `minSplit`.
    public static func nextWork(_ segments: inout [Segment], busy: Set<Int>, minSplit: Int64) -> Int? {
        nextWork(&segments, busy: busy.map { ($0, nil) }, minSplit: minSplit)
    }

    /// As above, knowing how fast each busy segment is being fetched (bytes/s; nil where not measured yet). The
    /// typical rate is the median of those measured and of `recent` (connections of this download that finished
    /// lately); an unmeasured segment counts at it, as does the free connection. The victim is the range that would
    /// take longest to finish at its rate; it keeps the share of its rest it can fetch in the time the free
    /// connection needs for the share split off, so both end together: half between equals, a ninth for a
    /// connection at 1 MiB/s against one at 8. The piece split off is at least `minSplit`, or, from a victim
    /// measured at under half the typical rate, at least 64 KiB when the split brings its end `worthwhile` seconds
    /// closer: a lagging connection's last megabytes are worth a request, an even split stays above the minimum.
    public static func nextWork(
        _ segments: inout [Segment], busy: [(segment: Int, rate: Double?)],
        recent: [Double] = [], minSplit: Int64, worthwhile: Double = 0.25
    ) -> Int? {
        let taken = Set(busy.map(\.segment))
        if let idle = segments.indices.filter({ !taken.contains($0) && !segments[$0].isDone })
            .min(by: { segments[$0].start < segments[$1].start })
        {
            return idle
        }
        let measured = (busy.compactMap(\.rate) + recent).filter { $0 > 0 }.sorted()
        let typical = measured.isEmpty ? 1 : measured[measured.count / 2]
        // A stalled connection still keeps a sliver: its transfer ends on its own when it reaches the new end.
        let candidates = busy.compactMap { entry -> (segment: Int, rate: Double, lagging: Bool, left: Double)? in
            guard let remaining = segments[entry.segment].remaining, remaining > 0 else { return nil }
            let rate = max(entry.rate ?? typical, typical / 64)
            return (entry.segment, rate, entry.rate.map { $0 < typical / 2 } ?? false, Double(remaining) / rate)
        }.sorted { $0.left != $1.left ? $0.left > $1.left : $0.segment < $1.segment }
        for victim in candidates {
            let remaining = segments[victim.segment].remaining!
            let stolen = Int64(Double(remaining) * typical / (victim.rate + typical))
            // Both then end together: the victim sooner by the time it would have spent on the stolen bytes.
            let saves = Double(stolen) / victim.rate
            let worth = stolen >= minSplit || (victim.lagging && stolen >= 64 << 10 && saves >= worthwhile)
            guard worth, stolen < remaining, let end = segments[victim.segment].end else { continue }
            let middle = end - stolen + 1
            segments[victim.segment].end = middle - 1
            segments.append(Segment(start: middle, end: end))
            return segments.count - 1
        }
        return nil
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
