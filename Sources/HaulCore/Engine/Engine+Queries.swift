import FoundationEssentials
import HaulLoop

/// What clients read: snapshots, totals and pages of downloads in an order.
extension Engine {
    /// Throws unless the store answers now (a round trip).
    func requireStore() throws(EngineError) { try persister.requireStore() }

    /// Why the store cannot be used now, or nil when it answers (`/readyz`), asked at most once a second.
    public func storeProblem() -> String? { persister.storeProblem() }

    public func snapshot(_ id: String) -> DownloadSnapshot? {
        guard let box = machines[id] else { return nil }
        var download = box.machine.download
        if let written = box.lastWriteAt {
            let wall = clock.wallTime.addingTimeInterval(written - clock.now)
            if wall > download.updatedAt { download.updatedAt = wall }
        }
        var snapshot = DownloadSnapshot(download: download, speed: box.machine.speed,
                                        activeConnections: box.machine.activeConnections)
        snapshot.lastError = box.machine.lastRetryError
        if !download.mirrors.isEmpty { snapshot.mirrorSpeeds = box.machine.mirrorSpeeds }
        snapshot.nextAttemptAt = box.machine.nextAttemptAt.map { clock.wallTime.addingTimeInterval($0 - clock.now) }
        return snapshot
    }

    /// How many downloads are stored.
    public var count: Int { machines.count }

    /// Counters over all downloads, in one pass that copies none of them (`/stats` with 10,000 downloads must not
    /// build 10,000 snapshots).
    public func totals() -> EngineTotals {
        var totals = EngineTotals()
        totals.downloads = machines.count
        totals.byState = registry.stateCounts.filter { $0.value != 0 }
        totals.receivedBytes = registry.receivedTotal
        assert(totals.byState == Dictionary(grouping: machines.values) { $0.machine.download.state }.mapValues(\.count)
               && registry.receivedTotal == machines.values.reduce(0) { $0 + $1.machine.download.receivedBytes },
               "the running totals drifted from the downloads")
        for id in pool.ids {
            guard let box = machines[id] else { continue }
            totals.speed += box.machine.speed
            totals.activeConnections += box.machine.activeConnections
        }
        return totals
    }

    public func list() -> [DownloadSnapshot] {
        registry.order.compactMap { snapshot($0.id) }
    }

    /// Up to `limit` downloads that pass `filter` from position `offset` of `order` (ties in creation order),
    /// and whether more follow. Sorts all that pass: a page of a sort other than creation order costs every match.
    public func page(by order: DownloadOrder, descending: Bool, offset: Int, limit: Int,
                     where filter: (Download) -> Bool) -> (items: [DownloadSnapshot], more: Bool) {
        if order == .queue { return queuePage(descending: descending, offset: offset, limit: limit, where: filter) }
        var rows: [(id: String, sequence: Int64, number: Double, text: String)] = []
        for (id, box) in machines where filter(box.machine.download) {
            let d = box.machine.download
            switch order {
            case .created: rows.append((id, d.sequence, 0, ""))
            case .name: rows.append((id, d.sequence, 0, d.displayName.lowercased()))
            case .size: rows.append((id, d.sequence, d.totalBytes.map(Double.init) ?? -1, ""))
            case .progress:
                let fraction = d.totalBytes.map { $0 == 0 ? (d.state == .completed ? 1 : 0)
                    : Double(d.receivedBytes) / Double($0) } ?? -1
                rows.append((id, d.sequence, fraction, ""))
            case .speed: rows.append((id, d.sequence, box.machine.speed, ""))
            case .queue: break
            }
        }
        rows.sort { a, b in
            if a.text != b.text { return descending ? a.text > b.text : a.text < b.text }
            if a.number != b.number { return descending ? a.number > b.number : a.number < b.number }
            return descending ? a.sequence > b.sequence : a.sequence < b.sequence
        }
        let start = min(offset, rows.count)
        let slice = rows[start...].prefix(limit)
        return (slice.compactMap { snapshot($0.id) }, rows.count > start + limit)
    }

    /// `page` in the order downloads start in: running ones (oldest first), then the waiting ones in the queue's
    /// order (priority, place, age), then the finished ones (oldest first).
    private func queuePage(descending: Bool, offset: Int, limit: Int, where filter: (Download) -> Bool)
        -> (items: [DownloadSnapshot], more: Bool) {
        var rows: [(group: Int, priority: Int, order: Int64, sequence: Int64, id: String)] = []
        for (id, box) in machines where filter(box.machine.download) {
            let d = box.machine.download
            if d.isWaiting {
                rows.append((1, -d.priority, d.queueOrder, d.sequence, id))
            } else {
                rows.append((d.state.isFinished ? 2 : 0, 0, 0, d.sequence, id))
            }
        }
        rows.sort { a, b in
            let (x, y) = descending ? (b, a) : (a, b)
            return (x.group, x.priority, x.order, x.sequence) < (y.group, y.priority, y.order, y.sequence)
        }
        let start = min(offset, rows.count)
        return (rows[start...].prefix(limit).compactMap { snapshot($0.id) }, rows.count > start + limit)
    }

    /// As `page`, over the downloads of `ids` only (a `changed_since` answer): costs those, not every download.
    public func page(of ids: Set<String>, after: Int64, limit: Int, where filter: (Download) -> Bool = { _ in true })
        -> (items: [DownloadSnapshot], more: Bool) {
        var chosen: [(sequence: Int64, id: String)] = []
        for id in ids {
            guard let box = machines[id], box.machine.download.sequence > after, filter(box.machine.download)
            else { continue }
            chosen.append((box.machine.download.sequence, id))
        }
        chosen.sort { $0.sequence < $1.sequence }
        return (chosen.prefix(limit).compactMap { snapshot($0.id) }, chosen.count > limit)
    }

    /// Up to `limit` downloads created after sequence number `after` that pass `filter`, in creation order, and
    /// whether more follow. Costs the downloads it looks at, not all of them.
    public func page(after: Int64, limit: Int, where filter: (Download) -> Bool = { _ in true })
        -> (items: [DownloadSnapshot], more: Bool) {
        var items: [DownloadSnapshot] = []
        let order = registry.order
        var position = registry.firstIndex(after: after)
        while position < order.count {
            if let box = machines[order[position].id], filter(box.machine.download) {
                if items.count == limit { return (items, true) }
                items.append(snapshot(order[position].id)!)
            }
            position += 1
        }
        return (items, false)
    }

    /// Ids of the downloads holding a slot (probing, downloading, verifying).
    public var runningIDs: [String] { Array(pool.ids) }

    /// Bytes received so far by `id` (the hot counter, without building a snapshot).
    public func receivedBytes(_ id: String) -> Int64? { machines[id]?.machine.download.receivedBytes }
}
