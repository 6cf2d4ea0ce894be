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
