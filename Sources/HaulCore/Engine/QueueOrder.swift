/// How a client moves a waiting download in the queue.
public enum QueueMove: Sendable, Equatable {
    case top, up, down, bottom
    /// To this place among the waiting downloads, 0 first (past the end: last).
    case position(Int)
}

/// The waiting downloads (queued and paused) in the order they start, and what moving one changes. The queue is
/// ordered by priority, then place (`Download.queueOrder`), then age; a move keeps that order true instead of
/// breaking it: a download moved past one of another priority takes that priority (moved to the top of a queue
/// whose first download has priority 5, it gets 5), and a place between its new neighbours'. Places are spaced
/// `step` apart, so a move changes only the moved download; when two neighbours have no number left between
/// them, the downloads of that priority are numbered again (and each of them is changed).
struct QueueOrder {
    /// The distance between the places of downloads added one after another: twenty moves into the same gap
    /// before a renumbering.
    static let step: Int64 = 1 << 20

    struct Entry: Equatable {
        let id: String
        var priority: Int
        var order: Int64
        let sequence: Int64

        init(_ download: Download) {
            (id, priority, order, sequence) = (download.id, download.priority, download.queueOrder, download.sequence)
        }

        init(id: String, priority: Int, order: Int64, sequence: Int64) {
            (self.id, self.priority, self.order, self.sequence) = (id, priority, order, sequence)
        }

        func precedes(_ other: Entry) -> Bool {
            if priority != other.priority { return priority > other.priority }
            return order != other.order ? order < other.order : sequence < other.sequence
        }
    }

    /// In the order they start.
    private(set) var entries: [Entry]

    init(_ entries: [Entry]) {
        self.entries = entries.sorted { $0.precedes($1) }
    }

    func position(of id: String) -> Int? { entries.firstIndex { $0.id == id } }

    /// Moves `id`; returns its new position and the entries whose priority or place changed (none when it stays
    /// where it was), or nil when it is not waiting.
    mutating func move(_ id: String, _ move: QueueMove) -> (position: Int, changed: [Entry])? {
        guard let from = position(of: id) else { return nil }
        let last = entries.count - 1
        let target =
            switch move {
            case .top: 0
            case .bottom: last
            case .up: max(0, from - 1)
            case .down: min(last, from + 1)
            case .position(let n): min(max(0, n), last)
            }
        guard target != from else { return (from, []) }
        var moved = entries.remove(at: from)
        let before = target > 0 ? entries[target - 1] : nil
        let after = target < entries.count ? entries[target] : nil
        if let after, after.priority > moved.priority { moved.priority = after.priority }
        if let before, before.priority < moved.priority { moved.priority = before.priority }
        let lower = before?.priority == moved.priority ? before?.order : nil
        let upper = after?.priority == moved.priority ? after?.order : nil
        entries.insert(moved, at: target)
        switch (lower, upper) {
        case (nil, nil):
            break
        case (let lower?, nil):
            entries[target].order = lower &+ QueueOrder.step
        case (nil, let upper?):
            entries[target].order = upper &- QueueOrder.step
        case (let lower?, let upper?):
            // Halves the gap; none left (or a tie), and the priority's downloads are numbered again.
            if upper > lower, upper - lower >= 2 {
                entries[target].order = lower + (upper - lower) / 2
            } else {
                var changed = renumber(moved.priority)
                // Its priority may have changed where its place did not.
                if !changed.contains(where: { $0.id == id }) { changed.append(entries[target]) }
                return (target, changed)
            }
        }
        return (target, [entries[target]])
    }

    /// Gives the entries of `priority` places `step` apart in their order, from the first one's; returns those
    /// whose place changed.
    private mutating func renumber(_ priority: Int) -> [Entry] {
        guard let first = entries.firstIndex(where: { $0.priority == priority }) else { return [] }
        var changed: [Entry] = []
        var order = entries[first].order
        for index in first..<entries.count where entries[index].priority == priority {
            if index != first { order &+= QueueOrder.step }
            if entries[index].order != order {
                entries[index].order = order
                changed.append(entries[index])
            }
        }
        return changed
    }
}
