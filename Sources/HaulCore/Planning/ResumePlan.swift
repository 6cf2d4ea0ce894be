/// How a download continues when it (re)starts: the resume decision as a pure function of the journal, the part
/// file and what the probe found.
public enum ResumePlan {
    /// The segments to fetch: the journaled ones, each trusted no further than the part file reaches, when the
    /// download can be resumed and the journal covers the file exactly; otherwise a fresh plan from byte 0
    /// (several segments when ranges and a validator allow, else one).
    public static func segments(
        journal: [Segment], partFileSize: Int64, total: Int64?, resumable: Bool,
        connections: Int, minSplit: Int64, order: PieceOrder = .spread, streamResumable: Bool = false
    ) -> [Segment] {
        if resumable && covers(journal, total) || streamResumable && coversStream(journal) {
            return journal.map { segment in
                var clamped = segment
                clamped.received = max(0, min(segment.received, partFileSize - segment.start))
                return clamped
            }
        }
        guard let total else { return [Segment(start: 0, end: nil)] }
        if total == 0 { return [Segment(start: 0, end: -1)] }
        return resumable
            ? SegmentPlanner.initial(total: total, connections: connections, minSplit: minSplit, order: order)
            : [Segment(start: 0, end: total - 1)]
    }

    /// Whether `segments` are one stream of unknown size from byte 0.
    static func coversStream(_ segments: [Segment]) -> Bool {
        segments.count == 1 && segments[0].start == 0 && segments[0].end == nil
    }

    /// Whether `segments` cover `0..<total` exactly, none claiming more than its length.
    static func covers(_ segments: [Segment], _ total: Int64?) -> Bool {
        guard let total, !segments.isEmpty else { return false }
        let sorted = segments.sorted { $0.start < $1.start }
        guard sorted.first?.start == 0, sorted.last?.end == total - 1 else { return false }
        for (a, b) in zip(sorted, sorted.dropFirst()) where a.end.map({ $0 + 1 }) != b.start { return false }
        return sorted.allSatisfy { $0.end != nil && $0.received <= $0.end! - $0.start + 1 }
    }
}
