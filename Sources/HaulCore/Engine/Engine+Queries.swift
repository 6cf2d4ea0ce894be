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

    /// Snapshots of a page of ids, and whether more follow.
    func snapshots(_ page: (ids: [String], more: Bool)) -> (items: [DownloadSnapshot], more: Bool) {
        (page.ids.compactMap(snapshot), page.more)
    }

    /// Ids of the downloads holding a slot (probing, downloading, verifying).
    public var runningIDs: [String] { Array(pool.ids) }

    /// Bytes received so far by `id` (the hot counter, without building a snapshot).
    public func receivedBytes(_ id: String) -> Int64? { machines[id]?.machine.download.receivedBytes }
}
