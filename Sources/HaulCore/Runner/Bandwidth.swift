import HaulLoop

/// What the running downloads share: the speed limit over all of them and each category's (token buckets every
/// chunk passes), the cap on connections to one host, and the count of bytes written since the process started.
/// With several nodes each holds its share of the limits; the engine hands it the shares.
final class Bandwidth {
    private let clock: Clock
    private var global: TokenBucket?
    private var categories: [String: TokenBucket] = [:]
    private var connections: [String: Int] = [:]
    /// Connections to one host this node may hold.
    var connectionCap = 16
    /// Told on the turn after a connection came back, once however many did (downloads waiting for one retry).
    var connectionFreed: () -> Void = {}
    private var refill: ClockTimer?
    /// Body bytes written to part files since the process started (a counter for metrics; never decreases).
    private(set) var bytesReceived: Int64 = 0

    init(clock: Clock) { self.clock = clock }

    /// The speed limit over all downloads now (nil: none).
    var limit: Int64? { global.map { Int64($0.rate) } }

    /// Puts `limit` in force over all downloads; false when it was already.
    func setLimit(_ limit: Int64?) -> Bool {
        guard limit != self.limit else { return false }
        if let limit, global != nil {
            global?.rate = Double(limit)
        } else {
            global = limit.map { TokenBucket(rate: Double($0)) }
        }
        return true
    }

    /// Puts each category's limit in force (a category left out has none); a bucket that stays keeps what it
    /// holds.
    func setCategoryLimits(_ limits: [String: Int64]) {
        for (name, limit) in limits {
            let rate = Double(max(1, limit))
            if categories[name] != nil {
                categories[name]?.rate = rate
            } else {
                categories[name] = TokenBucket(rate: rate)
            }
        }
        for name in categories.keys where limits[name] == nil { categories.removeValue(forKey: name) }
    }

    /// Whether any limit holds a download whose own bucket is `own`, in `category`: the global one (or the
    /// schedule's), its category's, its own.
    func limits(own: TokenBucket?, category: String?) -> Bool {
        own != nil || global != nil || (category.map { categories[$0] != nil } ?? false)
    }

    /// Seconds until `count` bytes fit the global limit, `category`'s and the download's `own`, spending them
    /// in all of them if they fit now; nil without a limit.
    func delay(for count: Int, own: inout TokenBucket?, category: String?) -> Double? {
        let categoryLimited = category.map { categories[$0] != nil } ?? false
        guard own != nil || global != nil || categoryLimited else { return nil }
        let now = clock.now
        var wait = max(own?.delay(for: count, now: now) ?? 0, global?.delay(for: count, now: now) ?? 0)
        if let category { wait = max(wait, categories[category]?.delay(for: count, now: now) ?? 0) }
        if wait == 0 {
            own?.consume(count)
            global?.consume(count)
            if let category { categories[category]?.consume(count) }
        }
        return wait
    }

    /// Takes a connection to `host` if the cap allows.
    func acquireConnection(to host: String) -> Bool {
        guard connections[host, default: 0] < max(1, connectionCap) else { return false }
        connections[host, default: 0] += 1
        return true
    }

    /// Gives a connection back; downloads waiting for one get a chance soon (not from inside this call chain).
    func releaseConnection(to host: String) {
        connections[host, default: 1] -= 1
        if connections[host] == 0 { connections.removeValue(forKey: host) }
        guard refill == nil else { return }
        refill = clock.after(0) { [unowned self] in
            self.refill = nil
            self.connectionFreed()
        }
    }

    func received(_ bytes: Int64) { bytesReceived += bytes }

    func stop() {
        refill?.cancel()
        refill = nil
    }
}
