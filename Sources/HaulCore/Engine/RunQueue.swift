/// The downloads waiting for a slot, highest priority first, then by place in the queue (`Download.queueOrder`:
/// creation order unless a client moved one), then oldest (lowest sequence): a binary heap, so adding
/// one and taking the next cost O(log n) whatever the queue's length, where sorting every queued download on each
/// scheduling step cost O(n log n) per step.
///
/// Entries are not removed when a download leaves the queue (paused, removed, its priority changed): `popFirst`
/// asks the caller whether the entry at the top still stands and drops it when not, and the heap is rebuilt from
/// the entries that stand once the stale ones outnumber them. A download may be pushed again when it comes back or
/// its priority or place changes; its older entries then no longer stand (another priority or place) or name the
/// same place in the order, which is harmless.
struct RunQueue {
    struct Entry: Equatable {
        let priority: Int
        let order: Int64
        let sequence: Int64
        let id: String

        init(priority: Int, order: Int64, sequence: Int64, id: String) {
            (self.priority, self.order, self.sequence, self.id) = (priority, order, sequence, id)
        }

        /// The entry of `download` as it is now.
        init(_ download: Download) {
            self.init(
                priority: download.priority, order: download.queueOrder, sequence: download.sequence,
                id: download.id)
        }

        /// Whether `self` goes before `other`.
        func precedes(_ other: Entry) -> Bool {
            if priority != other.priority { return priority > other.priority }
            return order != other.order ? order < other.order : sequence < other.sequence
        }
    }

    private(set) var heap: [Entry] = []
    /// Stale entries found and dropped so far: the work a step did beyond the entry it took.
    private(set) var dropped = 0
    /// Entries compared so far: the work of every push and pop, which tests read to see it stays logarithmic.
    private(set) var comparisons = 0

    var count: Int { heap.count }

    mutating func push(_ entry: Entry) {
        heap.append(entry)
        siftUp(heap.count - 1)
    }

    /// Takes the first entry that still stands (`stands`), dropping those above it that do not.
    mutating func popFirst(where stands: (Entry) -> Bool) -> Entry? {
        while let top = heap.first {
            removeTop()
            if stands(top) { return top }
            dropped += 1
        }
        return nil
    }

    /// Rebuilds the heap from the entries that stand when they are fewer than half of it (`live`: how many
    /// downloads are queued): a queue that was paused or emptied in bulk gives its memory back, in O(n) once per
    /// n changes.
    mutating func compact(live: Int, where stands: (Entry) -> Bool) {
        guard heap.count > 64, heap.count > live * 2 else { return }
        var seen = Set<String>()
        heap = heap.filter { stands($0) && seen.insert($0.id).inserted }
        for index in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
    }

    private mutating func removeTop() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        siftDown(0)
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        let entry = heap[child]
        while child > 0 {
            let parent = (child - 1) / 2
            comparisons += 1
            guard entry.precedes(heap[parent]) else { break }
            heap[child] = heap[parent]
            child = parent
        }
        heap[child] = entry
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        let entry = heap[parent]
        let count = heap.count
        while true {
            var child = 2 * parent + 1
            guard child < count else { break }
            if child + 1 < count {
                comparisons += 1
                if heap[child + 1].precedes(heap[child]) { child += 1 }
            }
            comparisons += 1
            guard heap[child].precedes(entry) else { break }
            heap[parent] = heap[child]
            parent = child
        }
        heap[parent] = entry
    }
}
