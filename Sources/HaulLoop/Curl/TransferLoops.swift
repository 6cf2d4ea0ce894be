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

/// What a transfer loop hands the home loop of one transfer.
struct TransferReport: Sendable {
    enum News: Sendable {
        case responded(TransferResponse)
        case data([UInt8])
        /// Body bytes written into the file under the transfer's grant.
        case wrote(Int)
        case ended(TransferResult)
    }
    let id: TransferID
    let news: News
}

/// One transfer loop: its thread, its multi (touched on its thread only), and the queue of what it hands the home
/// loop (under the lock).
final class TransferLane: @unchecked Sendable {
    let thread: LoopThread
    private let multi: CurlMulti
    private let home: EventLoop
    private var listener: Listener?
    /// The home loop's count of transfers running here (touched there only).
    var active = 0
    /// Called on the home loop when reports wait (set once, before any transfer starts).
    var onReports: (() -> Void)?

    private let lock = Lock()
    private var reports: [TransferReport] = []
    /// Bytes queued or held by the home loop, by transfer and in all.
    private var queued: [TransferID: Int] = [:]
    private var queuedTotal = 0
    /// Transfers held in curl until the home loop takes their bytes.
    private var parked: Set<TransferID> = []
    /// On the transfer loop only: the grants its transfers write under, and the body bytes each has handed over.
    private var grants: [TransferID: WriteGrant] = [:]
    private var bodyBytes: [TransferID: Int64] = [:]
    /// On the transfer loop only: bytes written under grants whose count the home loop has not been told, and the
    /// timer that tells it.
    private var unreported: [TransferID: Int] = [:]
    private var reportTimer: LoopTimer?

    init(name: String, home: EventLoop) throws {
        thread = try LoopThread(name: name)
        multi = try CurlMulti(loop: thread.loop)
        self.home = home
        listener = Listener(lane: self)
    }

    // MARK: on the transfer loop

    func begin(_ id: TransferID, _ prepared: PreparedTransfer) {
        guard let listener else { return }
        do {
            try multi.start(id, prepared, delegate: listener)
        } catch {
            report(
                TransferReport(
                    id: id, news: .ended(TransferResult(failure: .other, message: "\(error)", response: nil))))
        }
    }

    func cancel(_ id: TransferID) {
        multi.cancel(id)
        release(id)
    }

    func unpark(_ ids: [TransferID]) {
        for id in ids { multi.resume(id) }
    }

    /// `id` is gone: what it had queued no longer counts, and what that held back may go on.
    private func release(_ id: TransferID) {
        forget(id)
        let free = lock.withLock {
            queuedTotal -= queued.removeValue(forKey: id) ?? 0
            parked.remove(id)
            return unparked()
        }
        // Not from inside a callback of the multi (an end is one): on the loop's next turn.
        if !free.isEmpty { thread.loop.post { self.unpark(free) } }
    }

    /// Under the lock: the held transfers that may go on (each under half its limit, the loop under half its own),
    /// taken out of `parked`.
    private func unparked() -> [TransferID] {
        guard !parked.isEmpty, queuedTotal <= TransferLoops.loopQueuedLimit / 2 else { return [] }
        let free = parked.filter { queued[$0, default: 0] <= TransferLoops.queuedLimit / 2 }
        parked.subtract(free)
        return Array(free)
    }

    func grant(_ id: TransferID, _ grant: WriteGrant) {
        guard bodyBytes[id] != nil || multi.isRunning(id) else { return }
        grants[id] = grant
    }

    private func forget(_ id: TransferID) {
        grants.removeValue(forKey: id)
        bodyBytes.removeValue(forKey: id)
        unreported.removeValue(forKey: id)
    }

    func close() {
        multi.close()
        listener = nil
        // Its event is freed while the loop's base still is.
        reportTimer = nil
    }

    private func report(_ report: TransferReport) {
        let wake = lock.withLock {
            reports.append(report)
            return reports.count == 1
        }
        if wake { post() }
    }

    private func post() {
        let me = self
        home.post { me.onReports?() }
    }

    /// A chunk of `id`: written under its grant (its count told in batches), else queued; held in curl while the
    /// home loop has enough of it queued.
    fileprivate func received(_ id: TransferID, _ chunk: TransferChunk) -> ChunkDecision {
        let index = bodyBytes[id, default: 0]
        var written = 0
        if let grant = grants[id] {
            written = grant.write(chunk.bytes, index: index)
            if written == chunk.count {
                // In the file already: no memory held for it, so nothing counts against the queue; its count goes
                // to the home loop once enough has gathered, or a moment after the first (`reportDelay`).
                bodyBytes[id] = index + Int64(written)
                let waiting = unreported[id, default: 0] + written
                unreported[id] = waiting
                if waiting >= TransferLoops.reportEvery { flushWritten() } else { armReport() }
                return .consumed
            }
            // Full, revoked or failed: the rest goes to the home loop as chunks, whose writes say what failed.
            grants.removeValue(forKey: id)
        }
        // Copied before the lock, which the home loop takes too (wasted only when the transfer is held).
        var bytes: [UInt8] = []
        bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk.bytes[written...]))
        let pending = (unreported.removeValue(forKey: id) ?? 0) + written
        // Whether it is held and its place among the held are settled under one hold of the lock: were the home
        // loop to take its queue between the two, it would find nothing to free and the transfer would stay held.
        let wake: Bool? = lock.withLock {
            let full =
                queued[id, default: 0] >= TransferLoops.queuedLimit || queuedTotal >= TransferLoops.loopQueuedLimit
            // An HTTP/2 stream is never held (see `isMultiplexed`): its bytes queue here instead of in curl.
            // A chunk partly written is never held either: curl would offer the written part again.
            if full, written == 0, !multi.isMultiplexed(id) {
                parked.insert(id)
                return nil
            }
            let waiting = reports.count
            // What was written of it before is told first: the home loop hears the body in order.
            if pending > 0 { reports.append(TransferReport(id: id, news: .wrote(pending))) }
            queued[id, default: 0] += bytes.count
            queuedTotal += bytes.count
            reports.append(TransferReport(id: id, news: .data(bytes)))
            return waiting == 0
        }
        guard let wake else {
            if pending > 0 { unreported[id] = pending }
            return .pause
        }
        bodyBytes[id] = index + Int64(chunk.count)
        if wake { post() }
        return .consumed
    }

    /// Tells the home loop every count written and not yet told, in one post.
    private func flushWritten() {
        guard !unreported.isEmpty else { return }
        let counts = unreported
        unreported.removeAll(keepingCapacity: true)
        let wake = lock.withLock {
            let waiting = reports.count
            for (id, count) in counts { reports.append(TransferReport(id: id, news: .wrote(count))) }
            return waiting == 0
        }
        if wake { post() }
    }

    /// Starts the timer that tells the counts written, unless it runs.
    private func armReport() {
        if reportTimer == nil {
            reportTimer = LoopTimer(loop: thread.loop, delay: TransferLoops.reportDelay) { [unowned self] in
                flushWritten()
            }
        }
        if reportTimer?.isPending != true { reportTimer?.start() }
    }

    fileprivate func ended(_ id: TransferID, _ result: TransferResult) {
        // What it wrote and has not told goes first: the home loop hears every byte before the end.
        let pending = unreported.removeValue(forKey: id) ?? 0
        release(id)
        let wake = lock.withLock {
            let waiting = reports.count
            if pending > 0 { reports.append(TransferReport(id: id, news: .wrote(pending))) }
            reports.append(TransferReport(id: id, news: .ended(result)))
            return waiting == 0
        }
        if wake { post() }
    }

    fileprivate func responded(_ id: TransferID, _ response: TransferResponse) {
        report(TransferReport(id: id, news: .responded(response)))
    }

    // MARK: on the home loop

    func takeReports() -> [TransferReport] {
        lock.withLock {
            var taken: [TransferReport] = []
            swap(&taken, &reports)
            return taken
        }
    }

    /// The home loop took `count` bytes of `id`: the transfers held back that may go on do.
    func took(_ count: Int, of id: TransferID) {
        let free = lock.withLock {
            guard let waiting = queued[id] else { return [TransferID]() }
            let taken = min(waiting, count)
            queued[id] = waiting - taken
            queuedTotal -= taken
            return unparked()
        }
        if !free.isEmpty { thread.loop.post { self.unpark(free) } }
    }

    /// Hears the multi on the transfer loop.
    private final class Listener: FetchDelegate {
        unowned let lane: TransferLane
        init(lane: TransferLane) { self.lane = lane }

        func transfer(_ id: TransferID, responded response: TransferResponse) -> Bool {
            lane.responded(id, response)
            return true
        }

        func transfer(_ id: TransferID, received chunk: TransferChunk) -> ChunkDecision {
            lane.received(id, chunk)
        }

        func transfer(_ id: TransferID, ended result: TransferResult) {
            lane.ended(id, result)
        }
    }
}
