import FoundationEssentials
import HaulLoop

/// What a node of a shared store keeps: the downloads it holds claims on, its timer, and the connection other
/// nodes' changes arrive on.
public final class ClusterState {
    let node: String
    /// Downloads this node claimed; their fences are in the machines' downloads. A finished one stays: its last
    /// writes still carry the fence.
    var owned: Set<String> = []
    var listener: (any SQLListener)?
    var watch: ReadWatch?
    var timer: ClockTimer?
    /// When the leases were renewed and are next due, and how long they hold by this node's clock.
    var leases: LeaseSchedule
    var stopping = false
    /// A random token this node leaves in its download directory (`.haul-nodes/NAME`) and in the store: a node
    /// that finds another's token in its own directory shares that node's files.
    let mark: String
    /// The nodes whose directory this one shares (their marks are in it): the ones whose downloads it may take.
    var peers: [String] = []
    /// Nodes heard of within a lease, this one included: the shares of the limits over the cluster.
    var liveNodes = 1
    /// A runner found the lease lapsed by this node's clock: a renewal is asked for on the next turn.
    var renewalAsked = false

    init(node: String, now: Double, lease: Double) {
        self.node = node
        leases = LeaseSchedule(lease: lease, now: now)
        var generator = SystemRandomNumberGenerator()
        mark = String(generator.next() as UInt64, radix: 16) + String(generator.next() as UInt64, radix: 16)
    }

    static let markDirectory = ".haul-nodes"

    /// Whether `name` may name a node: it names a file of the marks' directory, so letters, digits, '-', '_' and
    /// '.', starting with a letter or digit, at most 64 (no '/', no '..').
    public static func isValidNodeName(_ name: String) -> Bool {
        guard let first = name.first, first.isASCII, first.isLetter || first.isNumber, name.utf8.count <= 64
        else { return false }
        return name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }
    }
}

/// Several nodes on one PostgreSQL store. Every node mirrors every download (the API of any node answers for all of
/// them); a node runs only the downloads it claimed. A claim holds for a lease the node renews; every write it makes
/// carries the claim's fence and is refused once another node took the download over (or a client's change on
/// another node ended the claim), and the node then stops that download at once. Changes reach the other nodes as
/// PostgreSQL notifications (a trigger on the table), and each node reads the changed row again.
extension Engine {
    /// What a write of `id` holds over its row.
    func writeClaim(_ id: String) -> WriteClaim {
        guard let cluster else { return .sole }
        if cluster.owned.contains(id), let download = machines[id]?.machine.download { return .fenced(download.fence) }
        return .overriding
    }

    /// The node's name in the shared store, nil when the store is its own.
    public var node: String? { cluster?.node }

    func joinCluster() throws {
        let state = ClusterState(node: config.node, now: clock.now, lease: config.lease)
        cluster = state
        // What this node ran before it stopped or died is claimable at once: no other process has its name.
        try store.releaseClaims(node: config.node)
        try directory(ClusterState.markDirectory, create: true).writeText(state.mark, to: config.node)
        heartbeat()
        connectListener(resync: false)
        state.timer = clock.every(config.claimInterval) { [unowned self] in self.clusterTick() }
        log.info("sharing the store with other nodes", ["node": config.node, "lease_seconds": "\(config.lease)"])
    }

    /// A clean stop: the leases of this node's unfinished downloads end now, so another node takes them over at
    /// once instead of after the lease.
    func leaveCluster() {
        guard let cluster else { return }
        cluster.stopping = true
        cluster.timer?.cancel()
        cluster.watch?.cancel()
        cluster.watch = nil
        cluster.listener = nil
        do {
            try store.releaseClaims(node: cluster.node)
            try store.leave(node: cluster.node)
        } catch {
            log.warning("cannot end the leases; other nodes wait for them to run out", ["error": "\(error)"])
        }
    }

    /// Tells the store this node is alive, and learns which nodes are (the shares of the limits) and which of them
    /// share its download directory (whose downloads it may take over).
    private func heartbeat() {
        guard let cluster else { return }
        let nodes: [DownloadStore.NodeRecord]
        do {
            nodes = try store.heartbeat(node: cluster.node, mark: cluster.mark, lease: config.lease)
        } catch {
            return log.warning("cannot reach the store to say this node is alive", ["error": "\(error)"])
        }
        let marks = try? directory(ClusterState.markDirectory, create: false)
        // A name read from the store is opened as a file only if it could be a node's name.
        cluster.peers = nodes.filter {
            $0.name != cluster.node && ClusterState.isValidNodeName($0.name) && marks?.readText($0.name) == $0.mark
        }.map(\.name)
        let live = max(1, nodes.filter(\.alive).count)
        guard live != cluster.liveNodes else { return }
        cluster.liveNodes = live
        log.info("nodes alive now", ["nodes": "\(live)", "node": cluster.node])
        // The global speed limit and the per-host cap are shared out evenly among the nodes alive.
        updateSpeedLimit()
    }

    /// How many nodes share the limits (1 without a shared store).
    public var nodeShare: Int { max(1, cluster?.liveNodes ?? 1) }

    /// Listens for other nodes' changes; after a lost connection, reads every download again for what changed
    /// while nobody listened.
    private func connectListener(resync: Bool) {
        guard let cluster else { return }
        cluster.watch?.cancel()
        cluster.watch = nil
        cluster.listener = nil
        do {
            guard let listener = try store.openListener() else { return }
            cluster.watch = try ReadWatch(loop: loop, fd: listener.socket) { [unowned self] in self.notified() }
            cluster.listener = listener
        } catch {
            return log.warning("cannot listen for other nodes' changes; trying again", ["error": "\(error)"])
        }
        guard resync else { return }
        // What other nodes changed while nobody listened.
        loadSettings()
        webhooks.reload()
        reloadCategories()
        do {
            var seen: Set<String> = []
            try store.forEach { row in
                seen.insert(row.id)
                if !cluster.owned.contains(row.id) { mirror(row.id, row) }
            }
            for id in Array(machines.keys) where !seen.contains(id) && !cluster.owned.contains(id) { mirror(id, nil) }
        } catch {
            log.warning("cannot read the downloads again", ["error": "\(error)"])
        }
    }

    private func notified() {
        guard let cluster, let listener = cluster.listener else { return }
        let notes: [(channel: String, payload: String, sender: Int32)]
        do {
            notes = try listener.notifications()
        } catch {
            log.warning("lost the connection other nodes' changes arrive on; reconnecting", ["error": "\(error)"])
            cluster.watch?.cancel()
            cluster.watch = nil
            cluster.listener = nil
            return
        }
        var ids: [String] = []
        var seen: Set<String> = []
        var settingsChanged = false, webhooksChanged = false, categoriesChanged = false
        // What the store's own session caused is not news (asked each time: a reconnect makes a new session).
        let session = store.session
        for note in notes where note.sender != session {
            switch note.channel {
            case "haul_settings": settingsChanged = true
            case "haul_webhooks": webhooksChanged = true
            case "haul_categories": categoriesChanged = true
            default: if seen.insert(note.payload).inserted { ids.append(note.payload) }
            }
        }
        // A client changed the settings, a webhook or a category through another node: they hold cluster-wide, and
        // from this notification on (a webhook added there hears of downloads finishing here at once).
        if settingsChanged { loadSettings() }
        if webhooksChanged { webhooks.reload() }
        if categoriesChanged { reloadCategories() }
        for id in ids { changedElsewhere(id) }
    }

    /// Another session wrote `id`: a download another node runs, a client's change made on another node, or a
    /// takeover of one of this node's.
    private func changedElsewhere(_ id: String) {
        guard let cluster else { return }
        let row: Download?
        do {
            row = try store.load(id: id)
        } catch {
            return log.warning("cannot read a changed download", ["download.id": id, "error": "\(error)"])
        }
        if cluster.owned.contains(id) {
            // Held only while the fence is still this node's.
            if row == nil || row?.fence != machines[id]?.machine.download.fence { lost(id) }
            return
        }
        mirror(id, row)
        if row?.state == .queued { schedule() }
    }

    /// The download `id` is another node's now: its transfers stop at once and nothing of it is written here again.
    func lost(_ id: String) {
        guard let cluster, cluster.owned.remove(id) != nil else { return }
        persister.forget(id)
        if let runner = runners.removeValue(forKey: id) {
            runner.abandon()
            log.warning("the download was taken over, changed or removed through another node; stopped here",
                        ["download.id": id, "node": cluster.node])
        }
        later { [unowned self] in
            self.refresh(id)
            self.schedule()
        }
    }

    /// Reads `id` again from the store, unless this node holds it (then its own copy is the truth).
    func refresh(_ id: String) {
        guard let cluster, !cluster.owned.contains(id) else { return }
        do {
            mirror(id, try store.load(id: id))
        } catch {
            log.warning("cannot read a changed download", ["download.id": id, "error": "\(error)"])
        }
    }

    /// Puts the stored `row` of `id` in place of what this node knew of it (nil: removed), and tells the hub.
    private func mirror(_ id: String, _ row: Download?) {
        let before = machines[id]?.machine.download
        guard let row else {
            guard let before else { return }
            registry.remove(id)
            persister.forget(id)
            return (onChange?(.removed(id, last: before.state))) ?? ()
        }
        if let before, before == row { return }
        registry.replace(with: MachineBox(DownloadMachine(download: row, settings: settings)))
        // Not logged: the node that made the change logged it.
        if let before {
            onChange?(.updated(id, stateChanged: before.state != row.state))
        } else {
            onChange?(.created(id))
        }
    }

    /// Whether this node may still act on `id`: its lease holds by this node's own monotonic clock, with a margin
    /// (renewals go out every third of a lease). A node stopped (SIGSTOP) or cut off past it first renews.
    func leaseHolds(_ id: String) -> Bool {
        guard let cluster, cluster.owned.contains(id) else { return true }
        return cluster.leases.holds(at: clock.now)
    }

    /// Renews the leases on the next turn (once however many runners ask).
    func renewLeaseSoon() {
        guard let cluster, !cluster.renewalAsked else { return }
        cluster.renewalAsked = true
        later { [unowned self] in
            cluster.renewalAsked = false
            self.renewLeases(now: self.clock.now)
        }
    }

    /// Renews the leases of the running downloads: those still held go on (a suspended runner resumes), the ones
    /// another node took meanwhile stop at once.
    private func renewLeases(now: Double) {
        guard let cluster else { return }
        cluster.leases.sent(at: now)
        let running = runners.keys.filter { cluster.owned.contains($0) }
        let claims = running.compactMap { id in machines[id].map { Claim(id: id, fence: $0.machine.download.fence) } }
        do {
            let held = try store.renew(node: cluster.node, claims, lease: config.lease)
            cluster.leases.renewed(sentAt: now)
            for claim in claims where !held.contains(claim.id) { lost(claim.id) }
            for id in held { runners[id]?.leaseRenewed() }
        } catch {
            log.warning("cannot renew the leases", ["error": "\(error)"])
        }
    }

    /// Claims as many downloads as there are free slots and starts them.
    func claimWork() {
        guard let cluster, !cluster.stopping else { return }
        let free = config.maxActive - runners.count
        guard free > 0 else { return }
        let claims: [Claim]
        do {
            claims = try store.claim(node: cluster.node, limit: free, lease: config.lease, peers: cluster.peers)
        } catch {
            return log.warning("cannot claim downloads", ["error": "\(error)"])
        }
        for claim in claims { take(claim) }
    }

    private func take(_ claim: Claim) {
        guard let cluster else { return }
        let row: Download?
        do {
            row = try store.load(id: claim.id)
        } catch {
            // The lease runs out and the download is claimed again.
            return log.warning("cannot read a claimed download", ["download.id": claim.id, "error": "\(error)"])
        }
        guard let row, row.fence == claim.fence else { return }
        let previous = machines[claim.id]?.machine.download.node
        cluster.owned.insert(claim.id)
        mirror(claim.id, row)
        if row.state.isActive {
            // Its node died, was cut off or stopped: it goes on from the journal, as after a restart.
            log.info("took the download over", ["download.id": claim.id, "node": cluster.node,
                                                "node.previous": previous ?? row.node ?? "none"])
            deliver(claim.id, .interrupted)
        }
        guard let download = machines[claim.id]?.machine.download, download.state == .queued,
              runners[claim.id] == nil else { return }
        // One claim may take several of a token's downloads at once: those past its `max_active` wait for their
        // leases to end and are claimed again.
        if let owner = download.owner, freeSlots(of: owner) <= 0 { return }
        let runner = DownloadRunner(engine: self, id: download.id, url: download.url, maxSpeed: download.maxSpeed)
        runners[download.id] = runner
        runner.begin()
    }

    /// Every `claimInterval`: the notification connection, the leases (every third of one), and new claims.
    private func clusterTick() {
        guard let cluster, !cluster.stopping else { return }
        let now = clock.now
        if cluster.listener == nil { connectListener(resync: true) }
        let running = runners.keys.filter { cluster.owned.contains($0) }
        if cluster.leases.renewalDue(at: now) {
            renewLeases(now: now)
            heartbeat()
        }
        // Cut off from the store for most of a lease: another node may hold these downloads by now.
        if cluster.leases.lapsed(at: now) {
            for id in running where cluster.owned.contains(id) { lost(id) }
        }
        claimWork()
    }
}
