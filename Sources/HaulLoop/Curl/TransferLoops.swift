/// `Fetcher` over curl multi handles on loops of their own (`--threads`): each transfer runs on one of them, whose
/// thread reads its sockets, speaks its protocol and copies what arrives into a queue the home loop (the engine's)
/// takes in batches. The delegates hear everything on the home loop, in the order and with the answers a multi on
/// it would give: a response, then body chunks until one is paused (held here, offered again at `resume`) or
/// refused, then the end.
///
/// A transfer loop never waits for the home loop: it hands over at most `queuedLimit` bytes a transfer and
/// `loopQueuedLimit` in all, then holds the transfer in curl (whose reads stop, so TCP slows the sender) until the
/// home loop has taken half of them.
/// A download's transfers share its cookie jar, one curl share handle without locks, so they share a loop.
public final class TransferLoops: Fetcher {
    private let home: EventLoop
    private let lanes: [TransferLane]
    private var relays: [TransferID: Relay] = [:]
    /// The loop of each cookie jar in use, and how many transfers use it.
    private var jarLanes: [ObjectIdentifier: (lane: Int, transfers: Int)] = [:]
    /// The most bytes of one transfer queued for the home loop before its loop holds it.
    public static let queuedLimit = 1 << 20
    /// The most bytes of all its transfers one loop queues (a slow engine's turn must not cost a megabyte a
    /// transfer).
    public static let loopQueuedLimit = 16 << 20
    /// Bytes a transfer loop writes under grants are told to the home loop in counts of at least this many, or
    /// this long after the first not told (told a chunk at a time, they woke an idle engine's loop every 100 KiB).
    static let reportEvery = 1 << 20
    static let reportDelay = 0.005

    /// `count` loops, each on a thread of its own, handing their transfers' news to `home`.
    public init(home: EventLoop, count: Int) throws {
        self.home = home
        var lanes: [TransferLane] = []
        for index in 0..<max(1, count) {
            let lane = try TransferLane(name: "haul-transfer-\(index + 1)", home: home)
            try lane.thread.start()
            lanes.append(lane)
        }
        self.lanes = lanes
        for lane in lanes {
            let me = LoopBound(self)
            lane.onReports = { me.value.drain(lane) }
        }
    }

    public var loopCount: Int { lanes.count }

    /// The loop a running transfer is on (0 ..< `loopCount`); nil once it ended or was cancelled.
    public func loopIndex(of id: TransferID) -> Int? { relays[id]?.lane }

    public func start(_ id: TransferID, _ request: TransferRequest, delegate: FetchDelegate) throws {
        home.assertInLoop()
        // Built here, so what cannot start says so at once.
        let prepared = try CurlMulti.prepare(request)
        let index = lane(for: request.cookieJar)
        let lane = lanes[index]
        lane.active += 1
        relays[id] = Relay(delegate: delegate, lane: index, jar: request.cookieJar)
        lane.thread.loop.post { lane.begin(id, prepared) }
    }

    public func cancel(_ id: TransferID) {
        guard let relay = relays[id] else { return }
        let lane = lanes[relay.lane]
        forget(id, relay)
        lane.thread.loop.post { lane.cancel(id) }
    }

    public func resume(_ id: TransferID) {
        guard let relay = relays[id], relay.paused else { return }
        relay.paused = false
        flush(id, relay)
    }

    public var grantsWrites: Bool { true }

    /// The transfer's loop writes its body from now on (the chunks it handed over already come as chunks).
    public func grant(_ id: TransferID, _ grant: WriteGrant) -> Bool {
        guard let relay = relays[id], relay.grant == nil else { return false }
        relay.grant = grant
        grant.firstIndex = relay.bodyBytes
        let lane = lanes[relay.lane]
        lane.thread.loop.post { lane.grant(id, grant) }
        return true
    }

    /// Stops every loop (each transfer ends; no delegate hears of it) and waits for their threads.
    public func close() {
        for lane in lanes {
            lane.thread.loop.post { lane.close() }
            lane.thread.stop()
            // The lane's call into this object held it.
            lane.onReports = nil
        }
        relays.removeAll()
        jarLanes.removeAll()
    }

    // MARK: on the home loop

    /// What the home loop knows of a transfer running on a transfer loop.
    private final class Relay {
        let delegate: FetchDelegate
        let lane: Int
        /// Held so that its identity stays its own while its loop is chosen by it.
        let jar: CookieJar?
        /// Revoked as the transfer ends, here, before the delegate or the canceller goes on.
        var grant: WriteGrant?
        /// The reports not yet heard by the delegate: those after a chunk it paused.
        var queue: [TransferReport] = []
        var next = 0
        var paused = false
        var response: TransferResponse?
        var bodyBytes: Int64 = 0

        init(delegate: FetchDelegate, lane: Int, jar: CookieJar?) {
            self.delegate = delegate
            self.lane = lane
            self.jar = jar
        }
    }

    /// The jar's loop, or the least busy one.
    private func lane(for jar: CookieJar?) -> Int {
        let key = jar.map(ObjectIdentifier.init)
        if let key, let held = jarLanes[key] {
            jarLanes[key] = (held.lane, held.transfers + 1)
            return held.lane
        }
        var best = 0
        for index in lanes.indices where lanes[index].active < lanes[best].active { best = index }
        if let key { jarLanes[key] = (best, 1) }
        return best
    }

    /// Lets go of `relay`: the transfer no longer counts on its loop, nor for its jar's, and writes nothing more.
    private func forget(_ id: TransferID, _ relay: Relay) {
        relay.grant?.revoke()
        relays.removeValue(forKey: id)
        lanes[relay.lane].active -= 1
        if let jar = relay.jar {
            let key = ObjectIdentifier(jar)
            if let held = jarLanes[key] {
                jarLanes[key] = held.transfers > 1 ? (held.lane, held.transfers - 1) : nil
            }
        }
    }

    /// Hands the delegates what `lane` queued.
    private func drain(_ lane: TransferLane) {
        for report in lane.takeReports() {
            guard let relay = relays[report.id] else { continue }
            relay.queue.append(report)
            if !relay.paused { flush(report.id, relay) }
        }
    }

    /// Tells `relay`'s delegate what it has not heard, until it pauses a chunk, stops the transfer or hears the end.
    private func flush(_ id: TransferID, _ relay: Relay) {
        let lane = lanes[relay.lane]
        var taken = 0
        defer {
            if taken > 0 { lane.took(taken, of: id) }
        }
        while relay.next < relay.queue.count, !relay.paused, relays[id] === relay {
            let report = relay.queue[relay.next]
            switch report.news {
            case .responded(let response):
                relay.next += 1
                relay.response = response
                guard relay.delegate.transfer(id, responded: response) else { return stop(id, relay) }
            case .data(let bytes):
                let decision = bytes.withUnsafeBytes { view in
                    relay.delegate.transfer(id, received: TransferChunk(bytes: view))
                }
                switch decision {
                case .consumed:
                    relay.next += 1
                    relay.bodyBytes += Int64(bytes.count)
                    taken += bytes.count
                case .pause:
                    relay.paused = true
                case .abort:
                    taken += bytes.count
                    return stop(id, relay)
                }
            case .wrote(let count):
                // Bytes in the file already: none of them was queued.
                switch relay.delegate.transfer(id, wrote: count) {
                case .consumed:
                    relay.next += 1
                    relay.bodyBytes += Int64(count)
                case .pause:
                    relay.paused = true
                case .abort:
                    return stop(id, relay)
                }
            case .ended(let result):
                relay.next += 1
                forget(id, relay)
                relay.delegate.transfer(id, ended: result)
            }
        }
        if relay.next == relay.queue.count {
            relay.queue.removeAll(keepingCapacity: true)
            relay.next = 0
        } else if relay.next > 64 {
            relay.queue.removeFirst(relay.next)
            relay.next = 0
        }
    }

    /// The delegate stopped the transfer: it ends as one a multi stopped does.
    private func stop(_ id: TransferID, _ relay: Relay) {
        let lane = lanes[relay.lane]
        forget(id, relay)
        lane.thread.loop.post { lane.cancel(id) }
        relay.delegate.transfer(
            id,
            ended: TransferResult(
                failure: .aborted, message: "the transfer was stopped by its receiver", response: relay.response,
                bodyBytes: relay.bodyBytes))
    }
}
