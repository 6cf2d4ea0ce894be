import FoundationEssentials
import HaulLoop

/// Scheduling over the run queue, and ids.
extension Engine {
    /// Starts queued downloads, highest priority first, then by place in the queue, while slots are free: each
    /// start takes the run queue's first entry, whatever the queue's length.
    func schedule() {
        registry.runQueue.compact(live: registry.stateCounts[.queued] ?? 0, where: waiting)
        if let cluster { return cluster.claimWork() }
        releaseHeld()
        // Checked for each: starting one may finish it at once (found complete) and start others meanwhile.
        while runners.count < config.maxActive, let next = registry.runQueue.popFirst(where: waiting) {
            guard let download = machines[next.id]?.machine.download else { continue }
            if let owner = download.owner, freeSlots(of: owner) <= 0 {
                // Its token runs as many as it may: set aside, and the next in the queue goes instead.
                heldByOwner[owner, default: RunQueue()].push(next)
                continue
            }
            let runner = DownloadRunner(engine: self, id: download.id, url: download.url, maxSpeed: download.maxSpeed)
            runners[download.id] = runner
            runner.begin()
        }
    }

    /// How many more downloads of `owner` may run now (`max_active`; .max for none).
    func freeSlots(of owner: String) -> Int {
        guard let limit = ownerToken(owner)?.maxActive else { return .max }
        return limit - runners.keys.count(where: { machines[$0]?.machine.download.owner == owner })
    }

    /// Puts back into the run queue as many set-aside downloads of each token as it has free slots now.
    private func releaseHeld() {
        for owner in Array(heldByOwner.keys) {
            var free = freeSlots(of: owner)
            while free > 0, let entry = heldByOwner[owner]?.popFirst(where: waiting) {
                registry.runQueue.push(entry)
                free -= 1
            }
            if heldByOwner[owner]?.count == 0 { heldByOwner.removeValue(forKey: owner) }
        }
    }

    /// Whether a run queue entry still stands: its download is queued, at that priority and place, and not running.
    private func waiting(_ entry: RunQueue.Entry) -> Bool {
        guard let download = machines[entry.id]?.machine.download else { return false }
        return download.state == .queued && download.priority == entry.priority
            && download.queueOrder == entry.order && runners[entry.id] == nil
    }

    /// 15 characters of Crockford-style base 32: 75 random bits from two calls to the system generator. Fifteen
    /// bytes is the most a Swift string holds inline: an id costs no allocation wherever it is kept or hashed.
    static func newID() -> String {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz".utf8)
        var bits = (generator.next() as UInt64, generator.next() as UInt64)
        var id = [UInt8]()
        id.reserveCapacity(15)
        for index in 0..<15 {
            if index == 8 { bits.0 = bits.1 }
            id.append(alphabet[Int(bits.0 & 31)])
            bits.0 >>= 5
        }
        return String(decoding: id, as: UTF8.self)
    }

    /// 15 characters of the same base 32 that sort by time: 9 of milliseconds since 1970 (good for a million
    /// years), then 6 random. Rows keyed by these (the webhook outbox's) go in at the end of their index, where a
    /// random key would land on a page of its own each time, one read and one write per row once the table
    /// outgrows the cache.
    static func newOrderedID() -> String {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz".utf8)
        let milliseconds = UInt64(max(0, Date().timeIntervalSince1970 * 1000))
        var random = generator.next() as UInt64
        var id = [UInt8](repeating: 0, count: 15)
        for index in 0..<9 { id[index] = alphabet[Int((milliseconds >> UInt64(5 * (8 - index))) & 31)] }
        for index in 9..<15 {
            id[index] = alphabet[Int(random & 31)]
            random >>= 5
        }
        return String(decoding: id, as: UTF8.self)
    }
}

/// The persister writes what the machines hold.
extension Engine: PersisterHost {
    func current(_ id: String) -> Download? { machines[id]?.machine.download }

    func storeWaitingChanges(_ id: String) throws { try webhooks.storeWaitingChanges(id) }

    func storedWaitingChanges<S: Sequence<String>>(_ ids: S) { webhooks.storedWaitingChanges(ids) }

    func refusedWrite(_ id: String) {
        // Another node holds it now: what this node saw of it is not the story, the holder tells its own.
        _ = webhooks.takeWaiting(id)
        lost(id)
    }
}

/// What the webhooks ask of the engine.
extension Engine: WebhookHost {
    /// The download as the API shows it (`webhookResource`), with this moment's speed; its id alone without one.
    func resource(of download: Download) -> JSONValue {
        let shown = snapshot(download.id).map { snapshot in
            var snapshot = snapshot
            snapshot.download = download
            return snapshot
        } ?? DownloadSnapshot(download: download, speed: 0, activeConnections: 0)
        return webhookResource?(shown) ?? .object([("id", .string(download.id))])
    }
}

/// What the finishing of files asks of the engine.
extension Engine: FinishingHost {
    var allDownloads: [Download] { machines.values.map(\.machine.download) }

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
}
