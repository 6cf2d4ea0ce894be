import FoundationEssentials
import HaulLoop

/// What clients read: snapshots, totals and pages of downloads in an order.
extension Engine {
    /// Throws unless the store answers now (a round trip).
    func requireStore() throws(EngineError) { try persister.requireStore() }

    /// Why the store cannot be used now, or nil when it answers (`/readyz`), asked at most once a second.
    public func storeProblem() -> String? { persister.storeProblem() }

    public func snapshot(_ id: String) -> DownloadSnapshot? { registry.reading(id)?.snapshot(clock: clock) }

    /// Status answers of downloads at rest, for a loop other than the engine's to answer reads with.
    public var statusBoard: StatusBoard { settings.machine.statusBoard! }

    /// Puts up `response`, the status answer just worked out for `id` in this turn, if the download is at rest.
    public func publishStatus(_ response: HTTPResponse, for id: String) { machines[id]?.publish(response) }

    /// Puts up `value`, another front's answer about `id` worked out in this turn, under `key`, if the download is
    /// at rest.
    public func publishFront(_ value: any Sendable, key: String, for id: String) {
        machines[id]?.publishFront(value, key: key)
    }

    /// Puts up `response`, a page of the list worked out in this turn for `target`, if every download it shows
    /// (`ids`) is at rest.
    public func publishPage(_ response: HTTPResponse, for target: String, showing ids: [String]) {
        guard ids.allSatisfy({ machines[$0]?.rests == true }) else { return }
        _ = statusBoard.putPage(response, for: target)
    }

    /// How many downloads are stored.
    public var count: Int { machines.count }

    /// Counters over all downloads, without a snapshot of any.
    public func totals() -> EngineTotals { registry.totals(running: pool.ids) }

    /// Snapshots of a page of ids, and whether more follow.
    func snapshots(_ page: (ids: [String], more: Bool)) -> (items: [DownloadSnapshot], more: Bool) {
        (page.ids.compactMap(snapshot), page.more)
    }

    /// Ids of the downloads holding a slot (probing, downloading, verifying).
    public var runningIDs: [String] { Array(pool.ids) }

    /// Bytes received so far by `id` (the hot counter, without building a snapshot).
    public func receivedBytes(_ id: String) -> Int64? { machines[id]?.machine.download.receivedBytes }
}
