import FoundationEssentials
import HaulLoop

/// What tenancy asks of the engine: the store the tokens are in, and the downloads with what each token's hold.
protocol TenancyHost: HostServices {
    var registry: DownloadRegistry { get }
    /// Whether `id` holds a slot now.
    func isRunning(_ id: String) -> Bool
    var runningIDs: [String] { get }
}

/// The tokens clients hold instead of the server's own: made, listed and removed; a presented secret looked up;
/// and the limits of the tokens that own downloads (`quota_bytes` against what their downloads hold, `max_active`
/// against how many of them run, those past it set aside until one ends).
public final class Tenancy {
    unowned let host: TenancyHost
    /// The tokens that own downloads, by id: read from the store once and kept (a token's limits never change
    /// once it is made).
    private var owners: [String: AccessToken] = [:]
    /// Queued downloads of tokens running as many as their `max_active`, by owner, in run queue order: set aside
    /// until one of the owner's runners ends, so they neither start nor hold up the downloads behind them.
    private var setAside: [String: RunQueue] = [:]

    init(host: TenancyHost) { self.host = host }

    private var registry: DownloadRegistry { host.registry }

    // MARK: tokens

    /// Makes a token; the secret is in the answer only.
    public func addToken(_ token: AccessToken) throws(EngineError) -> (token: AccessToken, secret: String) {
        var token = token
        token.id = HaulID.random()
        token.createdAt = host.clock.wallTime
        let secret = AccessToken.newSecret()
        try EngineError.storing { try host.store.insertToken(token, hash: AccessToken.hash(secret)) }
        host.log.info("token added", ["token.id": token.id, "token.name": token.name, "token.scope": token.scope.name])
        return (token, secret)
    }

    public func tokens() throws(EngineError) -> [AccessToken] {
        try EngineError.storing { try host.store.tokens() }
    }

    public func removeToken(_ id: String) throws(EngineError) {
        guard try EngineError.storing({ try host.store.deleteToken(id: id) }) else {
            throw .missing("no token with id '\(id)'")
        }
        host.log.info("token removed", ["token.id": id])
    }

    /// The token a presented secret is, if it is one and has not expired; read from the store each time, so a
    /// removal on any node counts at once. A store that cannot be read admits nobody.
    public func token(forSecret secret: String) -> AccessToken? {
        guard secret.hasPrefix("haul_"), let token = try? host.store.token(hash: AccessToken.hash(secret)),
            !token.isExpired(at: host.clock.wallTime)
        else { return nil }
        return token
    }

    /// The token with this id as a ticket names it: nil when it was removed or expired since.
    public func token(id: String) -> AccessToken? {
        guard let token = try? host.store.token(id: id), !token.isExpired(at: host.clock.wallTime) else { return nil }
        return token
    }

    // MARK: owners' limits

    /// The limits of the token that owns downloads. A token removed before this node read it has none.
    func owner(_ id: String) -> AccessToken? {
        if let known = owners[id] { return known }
        guard let token = try? host.store.token(id: id) else { return nil }
        owners[id] = token
        return token
    }

    /// A token adding downloads: its limits are known from now on without reading the store.
    func adding(as token: AccessToken) { owners[token.id] = token }

    /// What the downloads of `owner` hold together, but for `excluded` (kept by the registry as they change).
    public func usage(of owner: String, excluding excluded: String? = nil) -> Int64 {
        let all = registry.held[owner] ?? 0
        assert(
            all
                == (registry.owned[owner] ?? []).reduce(0) {
                    $0 + (registry.machines[$1].map { DownloadRegistry.heldBytes($0.machine.download) } ?? 0)
                }, "the bytes held by \(owner) drifted from its downloads'")
        guard let excluded, let box = registry.machines[excluded], box.machine.download.owner == owner
        else { return all }
        return all - DownloadRegistry.heldBytes(box.machine.download)
    }

    /// The most bytes download `id` may have under its token's quota: the quota less what the token's other
    /// downloads hold. nil without a quota.
    func quotaAllowance(for id: String) -> Int64? {
        guard let owner = registry.machines[id]?.machine.download.owner,
            let quota = self.owner(owner)?.quotaBytes
        else { return nil }
        return quota - usage(of: owner, excluding: id)
    }

    /// The ids of the downloads `owner` added.
    func ids(ownedBy owner: String) -> Set<String> { registry.owned[owner] ?? [] }

    /// The totals of `owner`'s downloads alone (a token with a root sees no others').
    func totals(ownedBy owner: String) -> EngineTotals {
        var totals = EngineTotals()
        for id in registry.owned[owner] ?? [] {
            guard let box = registry.machines[id] else { continue }
            let download = box.machine.download
            totals.downloads += 1
            totals.byState[download.state, default: 0] += 1
            totals.receivedBytes += download.receivedBytes
            if host.isRunning(id) {
                totals.speed += box.machine.speed
                totals.activeConnections += box.machine.activeConnections
            }
        }
        return totals
    }

    /// How many more downloads of `owner` may run now (`max_active`; .max for none).
    func freeSlots(of owner: String) -> Int {
        guard let limit = self.owner(owner)?.maxActive else { return .max }
        // A seeding torrent runs but holds no slot.
        return limit
            - host.runningIDs.count(where: {
                guard let download = registry.machines[$0]?.machine.download else { return false }
                return download.owner == owner && download.state != .seeding
            })
    }

    /// Whether `download` may start now; one whose token runs as many as it may is set aside (`entry` is its place
    /// in the run queue) until one of them ends.
    func mayStart(_ download: Download, _ entry: RunQueue.Entry) -> Bool {
        guard let owner = download.owner, freeSlots(of: owner) <= 0 else { return true }
        setAside[owner, default: RunQueue()].push(entry)
        return false
    }

    /// Puts back into `queue` as many set-aside downloads of each token as it has free slots now (those `waiting`
    /// still stands for).
    func releaseSetAside(into queue: inout RunQueue, where waiting: (RunQueue.Entry) -> Bool) {
        for owner in Array(setAside.keys) {
            var free = freeSlots(of: owner)
            while free > 0, let entry = setAside[owner]?.popFirst(where: waiting) {
                queue.push(entry)
                free -= 1
            }
            if setAside[owner]?.count == 0 { setAside.removeValue(forKey: owner) }
        }
    }
}
