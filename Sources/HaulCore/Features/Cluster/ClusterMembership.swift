import FoundationEssentials
import HaulLoop

/// What a node of a shared store asks of the engine: the downloads as its machines hold them, a stored row put in
/// place of what the node knew (and announced), the runners it starts and stops, and the shared settings read
/// again when another node changed them.
protocol ClusterHost: HostServices {
    func download(_ id: String) -> Download?
    var allIDs: [String] { get }
    /// The downloads this node runs now.
    var runningIDs: [String] { get }
    func directory(_ relative: String, create: Bool) throws(FileError) -> ConfinedDirectory
    /// Puts the stored `row` of `id` in place of what this node knew of it (nil: removed), and announces it.
    func mirror(_ id: String, _ row: Download?)
    /// Stops the runner of `id` without a word to the store (another node holds it); true when one ran.
    func abandon(_ id: String) -> Bool
    /// A running download of a node that died, cut off or stopped: it goes on from the journal.
    func interrupted(_ id: String)
    /// Starts a claimed, queued download, unless its token runs as many as it may.
    func startClaimed(_ download: Download)
    func leaseRenewed(_ id: String)
    func schedule()
    /// Another node changed these (or they may have changed while nobody listened): read them again.
    func reloadShared(settings: Bool, webhooks: Bool, categories: Bool)
    /// The number of nodes alive changed: the limits are shared out again.
    func nodesChanged()
}

/// A node of a shared store: the downloads it holds claims on, its leases and their timer, the connection other
/// nodes' changes arrive on, and the nodes alive. Its rules for leases are `LeaseSchedule`'s.
public final class ClusterMembership {
    unowned let host: ClusterHost
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

    init(host: ClusterHost) {
        self.host = host
        node = host.config.node
        leases = LeaseSchedule(lease: host.config.lease, now: host.clock.now)
        var generator = SystemRandomNumberGenerator()
        mark = String(generator.next() as UInt64, radix: 16) + String(generator.next() as UInt64, radix: 16)
    }

    static let markDirectory = ".haul-nodes"

    var store: DownloadStore { host.store }
    var log: Logger { host.log }

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
extension ClusterMembership {
    /// What a write of `id` holds over its row.
    func writeClaim(_ id: String) -> WriteClaim {
        if owned.contains(id), let download = host.download(id) { return .fenced(download.fence) }
        return .overriding
    }

    func join() throws {
        // What this node ran before it stopped or died is claimable at once: no other process has its name.
        try store.releaseClaims(node: node)
        try host.directory(ClusterMembership.markDirectory, create: true).writeText(mark, to: node)
        heartbeat()
        connectListener(resync: false)
        timer = host.clock.every(host.config.claimInterval) { [unowned self] in self.tick() }
        log.info("sharing the store with other nodes", ["node": node, "lease_seconds": "\(host.config.lease)"])
    }

    /// A clean stop: the leases of this node's unfinished downloads end now, so another node takes them over at
    /// once instead of after the lease.
    func leave() {
        stopping = true
        timer?.cancel()
        watch?.cancel()
        watch = nil
        listener = nil
        do {
            try store.releaseClaims(node: node)
            try store.leave(node: node)
        } catch {
            log.warning("cannot end the leases; other nodes wait for them to run out", ["error": "\(error)"])
        }
    }

    /// Tells the store this node is alive, and learns which nodes are (the shares of the limits) and which of them
    /// share its download directory (whose downloads it may take over).
    private func heartbeat() {
        let nodes: [DownloadStore.NodeRecord]
        do {
            nodes = try store.heartbeat(node: node, mark: mark, lease: host.config.lease)
        } catch {
            return log.warning("cannot reach the store to say this node is alive", ["error": "\(error)"])
        }
        let marks = try? host.directory(ClusterMembership.markDirectory, create: false)
        // A name read from the store is opened as a file only if it could be a node's name.
        peers = nodes.filter {
            $0.name != node && ClusterMembership.isValidNodeName($0.name) && marks?.readText($0.name) == $0.mark
        }.map(\.name)
        let live = max(1, nodes.filter(\.alive).count)
        guard live != liveNodes else { return }
        liveNodes = live
        log.info("nodes alive now", ["nodes": "\(live)", "node": node])
        // The global speed limit and the per-host cap are shared out evenly among the nodes alive.
        host.nodesChanged()
    }

    /// Listens for other nodes' changes; after a lost connection, reads every download again for what changed
    /// while nobody listened.
    private func connectListener(resync: Bool) {
        watch?.cancel()
        watch = nil
        listener = nil
        do {
            guard let opened = try store.openListener() else { return }
            watch = try ReadWatch(loop: host.loop, fd: opened.socket) { [unowned self] in self.notified() }
            listener = opened
        } catch {
            return log.warning("cannot listen for other nodes' changes; trying again", ["error": "\(error)"])
        }
        guard resync else { return }
        // What other nodes changed while nobody listened.
        host.reloadShared(settings: true, webhooks: true, categories: true)
        do {
            var seen: Set<String> = []
            try store.forEach { row in
                seen.insert(row.id)
                if !owned.contains(row.id) { host.mirror(row.id, row) }
            }
            for id in host.allIDs where !seen.contains(id) && !owned.contains(id) { host.mirror(id, nil) }
        } catch {
            log.warning("cannot read the downloads again", ["error": "\(error)"])
        }
    }

    private func notified() {
        guard let listener else { return }
        let notes: [(channel: String, payload: String, sender: Int32)]
        do {
            notes = try listener.notifications()
        } catch {
            log.warning("lost the connection other nodes' changes arrive on; reconnecting", ["error": "\(error)"])
            watch?.cancel()
            watch = nil
            self.listener = nil
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
        host.reloadShared(settings: settingsChanged, webhooks: webhooksChanged, categories: categoriesChanged)
        for id in ids { changedElsewhere(id) }
    }

    /// Another session wrote `id`: a download another node runs, a client's change made on another node, or a
    /// takeover of one of this node's.
    private func changedElsewhere(_ id: String) {
        let row: Download?
        do {
            row = try store.load(id: id)
        } catch {
            return log.warning("cannot read a changed download", ["download.id": id, "error": "\(error)"])
        }
        if owned.contains(id) {
            // Held only while the fence is still this node's.
            if row == nil || row?.fence != host.download(id)?.fence { lost(id) }
            return
        }
        host.mirror(id, row)
        if row?.state == .queued { host.schedule() }
    }

    /// The download `id` is another node's now: its transfers stop at once and nothing of it is written here again.
    func lost(_ id: String) {
        guard owned.remove(id) != nil else { return }
        if host.abandon(id) {
            log.warning(
                "the download was taken over, changed or removed through another node; stopped here",
                ["download.id": id, "node": node])
        }
        host.turns.later { [unowned self] in
            self.refresh(id)
            self.host.schedule()
        }
    }

    /// Reads `id` again from the store, unless this node holds it (then its own copy is the truth).
    func refresh(_ id: String) {
        guard !owned.contains(id) else { return }
        do {
            host.mirror(id, try store.load(id: id))
        } catch {
            log.warning("cannot read a changed download", ["download.id": id, "error": "\(error)"])
        }
    }

    /// Whether this node may still act on `id`: its lease holds by this node's own monotonic clock, with a margin
    /// (renewals go out every third of a lease). A node stopped (SIGSTOP) or cut off past it first renews.
    func leaseHolds(_ id: String) -> Bool {
        guard owned.contains(id) else { return true }
        return leases.holds(at: host.clock.now)
    }

    /// Renews the leases on the next turn (once however many runners ask).
    func renewLeaseSoon() {
        guard !renewalAsked else { return }
        renewalAsked = true
        host.turns.later { [unowned self] in
            self.renewalAsked = false
            self.renewLeases(now: self.host.clock.now)
        }
    }

    /// Renews the leases of the running downloads: those still held go on (a suspended runner resumes), the ones
    /// another node took meanwhile stop at once.
    private func renewLeases(now: Double) {
        leases.sent(at: now)
        let running = host.runningIDs.filter { owned.contains($0) }
        let claims = running.compactMap { id in host.download(id).map { Claim(id: id, fence: $0.fence) } }
        do {
            let held = try store.renew(node: node, claims, lease: host.config.lease)
            leases.renewed(sentAt: now)
            for claim in claims where !held.contains(claim.id) { lost(claim.id) }
            for id in held { host.leaseRenewed(id) }
        } catch {
            log.warning("cannot renew the leases", ["error": "\(error)"])
        }
    }

    /// Claims as many downloads as there are free slots and starts them.
    func claimWork() {
        guard !stopping else { return }
        let free = host.config.maxActive - host.runningIDs.count
        guard free > 0 else { return }
        let claims: [Claim]
        do {
            claims = try store.claim(node: node, limit: free, lease: host.config.lease, peers: peers)
        } catch {
            return log.warning("cannot claim downloads", ["error": "\(error)"])
        }
        for claim in claims { take(claim) }
    }

    private func take(_ claim: Claim) {
        let row: Download?
        do {
            row = try store.load(id: claim.id)
        } catch {
            // The lease runs out and the download is claimed again.
            return log.warning("cannot read a claimed download", ["download.id": claim.id, "error": "\(error)"])
        }
        guard let row, row.fence == claim.fence else { return }
        let previous = host.download(claim.id)?.node
        owned.insert(claim.id)
        host.mirror(claim.id, row)
        if row.state.isActive {
            // Its node died, was cut off or stopped: it goes on from the journal, as after a restart.
            log.info(
                "took the download over",
                [
                    "download.id": claim.id, "node": node,
                    "node.previous": previous ?? row.node ?? "none",
                ])
            host.interrupted(claim.id)
        }
        guard let download = host.download(claim.id), download.state == .queued else { return }
        // One claim may take several of a token's downloads at once: those past its `max_active` wait for their
        // leases to end and are claimed again.
        host.startClaimed(download)
    }

    /// Every `claimInterval`: the notification connection, the leases (every third of one), and new claims.
    private func tick() {
        guard !stopping else { return }
        let now = host.clock.now
        if listener == nil { connectListener(resync: true) }
        let running = host.runningIDs.filter { owned.contains($0) }
        if leases.renewalDue(at: now) {
            renewLeases(now: now)
            heartbeat()
        }
        // Cut off from the store for most of a lease: another node may hold these downloads by now.
        if leases.lapsed(at: now) {
            for id in running where owned.contains(id) { lost(id) }
        }
        claimWork()
    }
}
