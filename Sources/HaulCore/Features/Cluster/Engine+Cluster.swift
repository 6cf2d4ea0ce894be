import FoundationEssentials
import HaulLoop

/// The engine as a node of a shared store: what `ClusterMembership` asks of it, and what the rest of the engine
/// asks of the membership (none without a shared store).
extension Engine {
    /// This node's name when it shares the store with others.
    public var node: String? { cluster?.node }

    /// The nodes alive, this one included: the limits are shared out evenly among them.
    public var nodeShare: Int { max(1, cluster?.liveNodes ?? 1) }

    /// What a write of `id` holds over its row: nothing alone, the claim's fence when shared.
    func writeClaim(_ id: String) -> WriteClaim { cluster?.writeClaim(id) ?? .sole }

    /// Whether this node may still act on `id` (always, alone).
    func leaseHolds(_ id: String) -> Bool { cluster?.leaseHolds(id) ?? true }

    func renewLeaseSoon() { cluster?.renewLeaseSoon() }

    /// Another node holds `id` now: it stops here.
    func lost(_ id: String) { cluster?.lost(id) }

    /// Reads `id` again from the store when another node may have changed it.
    func refresh(_ id: String) { cluster?.refresh(id) }
}

extension Engine: ClusterHost {
    var allIDs: [String] { Array(machines.keys) }

    func mirror(_ id: String, _ row: Download?) {
        let before = machines[id]?.machine.download
        guard let row else {
            guard let before else { return }
            registry.remove(id)
            persister.forget(id)
            listener?.engineChanged(.removed(id, last: before.state))
            return
        }
        if let before, before == row { return }
        registry.replace(with: MachineBox(DownloadMachine(download: row, settings: settings.machine)))
        // Not logged: the node that made the change logged it.
        if let before {
            listener?.engineChanged(.updated(id, stateChanged: before.state != row.state))
        } else {
            listener?.engineChanged(.created(id))
        }
    }

    func abandon(_ id: String) -> Bool {
        persister.forget(id)
        guard let runner = pool.remove(id) else { return false }
        runner.abandon()
        return true
    }

    func interrupted(_ id: String) { deliver(id, .interrupted) }

    func startClaimed(_ download: Download) {
        guard pool[download.id] == nil else { return }
        if let owner = download.owner, tenancy.freeSlots(of: owner) <= 0 { return }
        pool.start(DownloadRunner(host: self, id: download.id, url: download.url, maxSpeed: download.maxSpeed))
    }

    func leaseRenewed(_ id: String) { pool[id]?.leaseRenewed() }

    func reloadShared(settings reloadSettings: Bool, webhooks reloadWebhooks: Bool, categories reloadCategories: Bool) {
        if reloadSettings { settings.load() }
        if reloadWebhooks { webhooks.reload() }
        if reloadCategories { categories.reload() }
    }

    func nodesChanged() { updateLimits() }
}
