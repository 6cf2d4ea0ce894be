/// What the tokens that add downloads hold: their bytes against `quota_bytes`, their totals.
extension Engine {
    /// What the downloads of `owner` hold together, but for `excluded` (kept by the registry as they change).
    public func usage(of owner: String, excluding excluded: String? = nil) -> Int64 {
        let all = registry.held[owner] ?? 0
        assert(all == (registry.owned[owner] ?? []).reduce(0) {
            $0 + (machines[$1].map { DownloadRegistry.heldBytes($0.machine.download) } ?? 0)
        }, "the bytes held by \(owner) drifted from its downloads'")
        guard let excluded, let box = machines[excluded], box.machine.download.owner == owner else { return all }
        return all - DownloadRegistry.heldBytes(box.machine.download)
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
