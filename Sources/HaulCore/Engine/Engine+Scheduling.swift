import FoundationEssentials
import HaulLoop

/// Scheduling over the run queue, and the limits running downloads share.
extension Engine {
    /// Starts queued downloads, highest priority first, then by place in the queue, while slots are free: each
    /// start takes the run queue's first entry, whatever the queue's length.
    func schedule() {
        registry.runQueue.compact(live: registry.stateCounts[.queued] ?? 0, where: waiting)
        if let cluster { return cluster.claimWork() }
        tenancy.releaseSetAside(into: &registry.runQueue, where: waiting)
        // Checked for each: starting one may finish it at once (found complete) and start others meanwhile.
        while pool.busy < config.maxActive, let next = registry.runQueue.popFirst(where: waiting) {
            // A token running as many as it may: set aside, and the next in the queue goes instead.
            guard let download = machines[next.id]?.machine.download, tenancy.mayStart(download, next) else { continue }
            pool.start(DownloadRunner(host: self, id: download.id, url: download.url, maxSpeed: download.maxSpeed))
        }
    }

    /// Whether a run queue entry still stands: its download is queued, at that priority and place, and not running.
    private func waiting(_ entry: RunQueue.Entry) -> Bool {
        guard let download = machines[entry.id]?.machine.download else { return false }
        return download.state == .queued && download.priority == entry.priority
            && download.queueOrder == entry.order && pool[entry.id] == nil
    }

    /// Puts the limits of this moment in force, each node taking an even share of the cluster's: the speed limit
    /// (the schedule's window that holds it, else the base one), each category's, and the connections to one host.
    func updateLimits() {
        let share = nodeShare
        bandwidth.connectionCap = max(1, config.maxConnectionsPerHost / share)
        bandwidth.setCategoryLimits(categories.limits.mapValues { max(1, $0 / Int64(share)) })
        let limit = settings.speedLimitNow().map { max(1, $0 / Int64(share)) }
        let changed = bandwidth.setLimit(limit)
        // A transfer loop writing a body itself would run ahead of a limit that now holds it.
        for runner in pool.runners.values { runner.revokeGrantsIfLimited() }
        guard changed else { return }
        log.info("speed limit now", ["speed.limit": limit.map(String.init) ?? "none"])
    }
}

/// What the components ask of the engine.
extension Engine: PersisterHost, WebhookHost, FinishingHost, RunnerHost, TenancyHost, CategoriesHost, SettingsHost {
    func current(_ id: String) -> Download? { machines[id]?.machine.download }

    func storeWaitingChanges(_ id: String) throws { try webhooks.storeWaitingChanges(id) }

    func storedWaitingChanges<S: Sequence<String>>(_ ids: S) { webhooks.storedWaitingChanges(ids) }

    func refusedWrite(_ id: String) {
        // Another node holds it now: what this node saw of it is not the story, the holder tells its own.
        _ = webhooks.takeWaiting(id)
        lost(id)
    }

    /// The download as the API shows it, with this moment's speed; its id alone without an API.
    func resource(of download: Download) -> [UInt8] {
        let shown =
            snapshot(download.id).map { snapshot in
                var snapshot = snapshot
                snapshot.download = download
                return snapshot
            } ?? DownloadSnapshot(download: download, speed: 0, activeConnections: 0)
        return listener?.resource(of: shown) ?? JSONValue.object([("id", .string(download.id))]).serializedBytes()
    }

    func isLocal(_ download: Download) -> Bool { cluster.map { download.node == $0.node } ?? true }

    func change(_ id: String, _ body: (inout DownloadMachine) -> Void) {
        guard let box = machines[id] else { return }
        let before = box.machine.download
        body(&box.machine)
        registry.changed(id, from: before)
        changed(id, from: before)
    }

    func note(_ id: String, _ body: (inout DownloadMachine) -> Void) {
        guard let box = machines[id] else { return }
        body(&box.machine)
    }

    func storeNow(_ download: Download) { persister.save(download) }

    var fetcher: Fetcher { pool.fetcher }

    var turns: TurnQueue { pool.turns }

    var playlists: HLSTransfers { pool.playlists }

    var torrents: TorrentTransfers? { pool.torrents }

    var remuxCommands: CommandPool? { pool.remuxCommands(timeout: config.hooks.timeout) }

    func category(_ name: String) -> Category? { categories[name] }

    func quotaAllowance(for id: String) -> Int64? { tenancy.quotaAllowance(for: id) }

    func isRunning(_ id: String) -> Bool { pool[id] != nil }

    func categoryLimitsChanged() {
        // What a front shows may be worked out with a category's (qBittorrent's seeding limits).
        statusBoard.clearAll()
        updateLimits()
    }

    func settingsApplied() {
        statusBoard.clearAll()
        updateLimits()
        schedule()
    }

    func speedWindowMayHaveChanged() { updateLimits() }
}
