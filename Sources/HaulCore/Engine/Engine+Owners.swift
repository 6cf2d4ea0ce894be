/// What the tokens that add downloads hold: their bytes against `quota_bytes`, their totals.
extension Engine {
    /// The bytes a download holds against its token's quota: a finished file's size, an unfinished one's size once
    /// known (or the size its client said), else what it received; a failed one what it left on disk.
    static func heldBytes(_ download: Download) -> Int64 {
        if download.state == .failed { return download.receivedBytes }
        return max(download.totalBytes ?? download.expectedBytes ?? 0, download.receivedBytes)
    }

    /// What the downloads of `owner` hold together, but for `excluded`.
    public func usage(of owner: String, excluding excluded: String? = nil) -> Int64 {
        var sum: Int64 = 0
        for id in registry.owned[owner] ?? [] where id != excluded {
            if let box = machines[id] { sum += Engine.heldBytes(box.machine.download) }
        }
        return sum
    }

    /// The ids of the downloads `owner` added.
    public func ids(ownedBy owner: String) -> Set<String> { registry.owned[owner] ?? [] }

    /// The most bytes download `id` may have under its token's quota: the quota less what the token's other
    /// downloads hold. nil without a quota.
    func quotaAllowance(for id: String) -> Int64? {
        guard let owner = machines[id]?.machine.download.owner,
              let quota = ownerToken(owner)?.quotaBytes else { return nil }
        return quota - usage(of: owner, excluding: id)
    }

    /// The totals of `owner`'s downloads alone (a token with a root sees no others').
    public func totals(ownedBy owner: String) -> EngineTotals {
        var totals = EngineTotals()
        for id in registry.owned[owner] ?? [] {
            guard let box = machines[id] else { continue }
            let download = box.machine.download
            totals.downloads += 1
            totals.byState[download.state, default: 0] += 1
            totals.receivedBytes += download.receivedBytes
            if runners[id] != nil {
                totals.speed += box.machine.speed
                totals.activeConnections += box.machine.activeConnections
            }
        }
        return totals
    }
}
