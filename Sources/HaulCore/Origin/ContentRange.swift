import HaulLoop

/// A parsed `Content-Range: bytes first-last/complete` header (RFC 9110 14.4).
public struct ContentRange: Equatable, Sendable {
    /// nil for an unsatisfied-range reply (`bytes */complete`).
    public var first: Int64?
    public var last: Int64?
    /// nil when the server wrote `*`.
    public var complete: Int64?

    public init(first: Int64?, last: Int64?, complete: Int64?) {
        self.first = first
        self.last = last
        self.complete = complete
    }

    public init?(_ header: String) {
        let trimmed = header.trimmingSpaces()
        guard trimmed.lowercased().hasPrefix("bytes ") else { return nil }
        let spec = trimmed.dropFirst(6).trimmingSpaces()
        let halves = spec.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard halves.count == 2 else { return nil }
        if halves[1] == "*" {
            complete = nil
        } else {
            guard let total = Int64(halves[1]), total >= 0 else { return nil }
            complete = total
        }
        if halves[0] == "*" {
            guard complete != nil else { return nil }
            first = nil
            last = nil
            return
        }
        let bounds = halves[0].split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = Int64(bounds[0]), let last = Int64(bounds[1]),
            first >= 0, last >= first
        else { return nil }
        if let complete, last >= complete { return nil }
        self.first = first
        self.last = last
    }
}
