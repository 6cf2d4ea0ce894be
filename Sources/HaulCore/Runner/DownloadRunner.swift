import FoundationEssentials
import Glibc
import HaulLoop

/// Carries out a running download's machine actions: owns its part file, transfers (through the `Fetcher`), timers
/// (through the `Clock`) and speed limit, and turns what they report into machine events. It decides nothing.
///
/// Events are handled one at a time: those that actions produce (a write's result, a file opened) wait until the
/// actions of the current event are all done. Nothing touches the fetcher from inside a transfer's own callback:
/// starts and cancels made there run on the loop's next turn, in order.
final class DownloadRunner: FetchDelegate {
    unowned let host: RunnerHost
    let id: String
    /// The origin's host, for the per-host connection cap.
    let origin: String
    /// The download's category, whose speed limit each chunk also passes.
    var category: String?
    var file: PartFile?
    /// Transfers running, and those of them holding one of the host's connections.
    private(set) var transfers: Set<TransferID> = []
    /// (Each holds a connection of its own source's host: a mirror's is another.)
    private var hostConnections: [TransferID: String] = [:]
    /// The download's cookies, shared by all its transfers while it runs (made at its first fetch).
    private var cookieJar: CookieJar?
    /// Cancelled from inside a callback, to be removed from the fetcher on the next turn.
    private var cancelled: Set<TransferID> = []
    private var timers: [TimerID: ClockTimer] = [:]
    /// Transfers held back by a speed limit, and the timers that let them go on.
    private var holds: [TransferID: ClockTimer] = [:]
    /// The download's own speed limit (`max_speed`).
    private(set) var bucket: TokenBucket?
    var queue: [MachineEvent] = []
    private var dispatching = false
    /// The transfer whose callback is running, the chunk it delivered, and whether the machine stopped it.
    var inCallback: TransferID?
    /// (nil in a callback of bytes already written under the transfer's grant)
    private var chunk: TransferChunk?
    var stopRequested = false
    private(set) var done = false
    /// Another node took the download over: no action of its machine is carried out any more.
    private var abandoned = false
    /// The node's lease on the download ran out by its own clock (the process was stopped, or cut off from the
    /// store): nothing is done, written or fetched until a renewal says it still holds it. Events wait in the
    /// queue, body chunks are held back in their transfers.
    private var suspended = false
    private var heldForLease: Set<TransferID> = []
    /// An HLS download's index of where each piece of its output begins (beside the part file).
    lazy var playlistIndex = HLSIndex()
    /// First requests of a download of kind `auto` whose answer was a playlist: held until the playlist's stream
    /// takes their place.
    var becomingPlaylists: Set<TransferID> = []
    /// The first requests out (only those can turn out to be a playlist).
    var probes: Set<TransferID> = []
    /// First answers whose type says nothing, told to the machine with their first bytes (which may be a playlist's).
    var sniffing: [TransferID: TransferResponse] = [:]
    /// A torrent download's own (see DownloadRunner+Torrents).
    var torrent = TorrentRun()
    /// `compare` transfers: where the next byte goes in the part file, where they began, and the first that
    /// differed.
    var comparing: [TransferID: (next: Int64, start: Int64, differsAt: Int64?)] = [:]
    /// Transfers whose fetcher writes their body itself, and the offset the machine's next write of each must be.
    var grants: [TransferID: (grant: WriteGrant, next: Int64)] = [:]

    init(host: RunnerHost, id: String, url: String, maxSpeed: Int64?) {
        self.host = host
        self.id = id
        origin = URLComponents(string: url)?.host?.lowercased() ?? ""
        category = host.download(id)?.category
        limitsChanged(maxSpeed: maxSpeed)
    }

    private var meta: [String: String] { ["download.id": id] }

    /// Starts the download: found finished (a crash after its file got its name), seeding again, else probe.
    func begin() {
        if host.download(id)?.state != .seeding, let name = finishedBeforeACrash() {
            let file = try? host.directory(host.download(id)?.directory ?? "", create: false)
            let stamp = file.flatMap { directory in
                directory.identity(name).map { FileStamp($0, size: directory.size(name) ?? 0) }
            }
            deliver(.foundFinished(name: name, file: stamp))
        } else {
            deliver(.start(now: host.clock.now))
        }
    }

    /// Hands `event` to the machine and carries out its actions; events raised meanwhile wait their turn.
    func deliver(_ event: MachineEvent) {
        // After `finished`, only what its own last actions raised (a final sync's journal) is still handled.
        guard !abandoned, !done || dispatching else { return }
        queue.append(event)
        checkLease()
        guard !dispatching, !suspended else { return }
        dispatching = true
        defer { dispatching = false }
        while !queue.isEmpty, !suspended {
            let next = queue.removeFirst()
            for action in host.step(id, next) { perform(action) }
        }
        if !grants.isEmpty { narrowGrants() }
    }

    /// Suspends the runner once the lease may have run out, and asks the engine to renew it at once.
    private func checkLease() {
        guard !suspended, !host.leaseHolds(id) else { return }
        suspended = true
        host.log.warning(
            "the lease may have run out (this node was stopped or cut off); nothing is written "
                + "until it is renewed", meta)
        host.renewLeaseSoon()
    }

    /// The lease was renewed: what waited goes on.
    func leaseRenewed() {
        guard suspended, !abandoned else { return }
        suspended = false
        for transfer in heldForLease where transfers.contains(transfer) { resumeTransfer(transfer) }
        heldForLease.removeAll()
        guard !queue.isEmpty, !dispatching else { return }
        // The queue is run by delivering what waits first.
        let next = queue.removeFirst()
        deliver(next)
    }

    var isSuspended: Bool { suspended }

    /// The download's limits changed: a new speed limit applies to the next chunk.
    func limitsChanged(maxSpeed: Int64?) {
        if let maxSpeed {
            if bucket == nil { bucket = TokenBucket(rate: Double(maxSpeed)) } else { bucket?.rate = Double(maxSpeed) }
        } else {
            bucket = nil
        }
        revokeGrantsIfLimited()
    }

    // MARK: actions

    private func perform(_ action: MachineAction) {
        guard !abandoned else { return }
        switch action {
        case .fetch(let transfer, let kind): outsideCallbacks { self.fetch(transfer, kind) }
        case .fetchFrom(let transfer, let kind, let url): outsideCallbacks { self.fetch(transfer, kind, from: url) }
        case .cancel(let transfer): cancel(transfer)
        case .abort(let transfer):
            if transfer == inCallback {
                stopRequested = true
                // Curl ends a transfer whose write callback refused bytes, except (libcurl 7.88) when they were the
                // held ones curl_easy_pause gave back after a speed limit's wait: that transfer then sat until an
                // unrelated timer, up to 30 s, with its download complete. What curl has not ended by the next
                // turn is ended here.
                host.turns.later { [weak self] in self?.endIfStillRunning(transfer) }
            } else {
                cancel(transfer)
            }
        case .write(let transfer, let offset, let count): write(transfer, offset: offset, count: count)
        case .openPartFile(let request): openPartFile(request)
        case .truncate(let size):
            do { try file?.truncate(to: size) } catch { queue.append(.fileFailed(error)) }
        case .reserve(let size):
            guard let file else { return queue.append(.reserved(false)) }
            do { queue.append(.reserved(try file.reserve(size))) } catch { queue.append(.fileFailed(error)) }
        case .release(let ranges): file?.release(ranges.map { ($0.first, $0.last) })
        case .measureFreeSpace:
            if let free = try? file?.directory.freeBytes() { queue.append(.freeSpace(free)) }
        case .checkpoint(let segments, let generation): checkpoint(segments, generation: generation)
        case .closeFile(let segments, let generation): closeFile(syncing: segments, generation: generation)
        case .verify(let algorithm): verify(algorithm)
        case .publish(let base): publish(base)
        case .deletePartFile:
            if host.download(id)?.kind.isPlaylist == true { playlistIndex.remove() }
            if let file {
                file.close()
                try? file.directory.remove(file.name)
                self.file = nil
            }
        case .schedule(let timer, let delay):
            // The runner owns its timers (a released runner's never fire): no weak reference needed.
            timers[timer] = host.clock.after(delay) { [unowned self] in
                self.timers.removeValue(forKey: timer)
                self.deliver(.timer(timer))
            }
        case .cancelTimer(let timer): timers.removeValue(forKey: timer)?.cancel()
        case .saveJournal(let journal): host.saveJournal(id, journal)
        case .log(let level, let message, let extra): host.log.log(level, message, meta.merging(extra) { a, _ in a })
        case .torrent(let step): torrentStep(step)
        case .finished: finish()
        }
    }

    /// Runs `work` now, or after the current callback when inside one (the fetcher may not be called from there);
    /// while earlier work waits, it waits behind it, so starts and cancels keep their order.
    private func outsideCallbacks(_ work: @escaping () -> Void) {
        guard inCallback != nil || !host.turns.isEmpty else { return work() }
        host.turns.later(work)
    }

    private func fetch(_ transfer: TransferID, _ kind: FetchKind, from mirror: String? = nil) {
        guard !done, let download = host.download(id) else { return }
        let origin = mirror.map { URLComponents(string: $0)?.host?.lowercased() ?? "" } ?? self.origin
        let request = self.request(kind, url: mirror ?? download.url, of: download)
        if download.kind.isPlaylist {
            // Each request of the playlist's stream holds a connection of its own host.
            transfers.insert(transfer)
            return startPlaylist(transfer, request, of: download)
        }
        guard host.bandwidth.acquireConnection(to: origin) else { return deliver(.noHostConnection(transfer)) }
        hostConnections[transfer] = origin
        if case .compare(let start, _, _) = kind { comparing[transfer] = (start, start, nil) }
        if kind == .probe, download.kind == .auto { probes.insert(transfer) }
        do {
            try host.fetcher.start(transfer, request, delegate: self)
            transfers.insert(transfer)
        } catch {
            releaseHostConnection(transfer)
            comparing.removeValue(forKey: transfer)
            probes.remove(transfer)
            deliver(.couldNotStart(transfer, "\(error)"))
        }
    }

    func request(_ kind: FetchKind, url: String, of download: Download) -> TransferRequest {
        let category = download.category.flatMap { host.category($0) }
        let policy = Outbound.policy(host.config, for: download, category: category, url: url)
        // Always a jar: a cookie a redirect sets reaches the request after it, and the segments after that.
        if cookieJar == nil { cookieJar = CookieJar(cookies: download.cookies ?? "", host: origin) }
        return Outbound.fetch(kind, url: url, of: download, cookieJar: cookieJar, policy: policy)
    }

    private func cancel(_ transfer: TransferID) {
        grants.removeValue(forKey: transfer)?.grant.revoke()
        holds.removeValue(forKey: transfer)?.cancel()
        releaseHostConnection(transfer)
        guard transfers.remove(transfer) != nil else { return }
        if transfer == inCallback {
            stopRequested = true
            cancelled.insert(transfer)
        }
        outsideCallbacks {
            self.cancelled.remove(transfer)
            self.cancelTransfer(transfer)
        }
    }

    /// Ends a transfer the machine stopped from inside its callback if curl has not (see `.abort`).
    private func endIfStillRunning(_ transfer: TransferID) {
        guard transfers.contains(transfer), !cancelled.contains(transfer) else { return }
        grants.removeValue(forKey: transfer)?.grant.revoke()
        holds.removeValue(forKey: transfer)?.cancel()
        releaseHostConnection(transfer)
        transfers.remove(transfer)
        cancelTransfer(transfer)
        deliver(.ended(transfer, TransferResult(failure: .aborted, message: "stopped", response: nil)))
    }

    func releaseHostConnection(_ transfer: TransferID) {
        if let origin = hostConnections.removeValue(forKey: transfer) { host.bandwidth.releaseConnection(to: origin) }
    }

    private func write(_ transfer: TransferID, offset: Int64, count: Int) {
        guard transfer == inCallback, let file else {
            let error = FileError(call: "pwrite", path: "", code: EBADF)
            return queue.append(.writeFailed(transfer, error))
        }
        do {
            try placed(transfer, offset: offset, count: count, written: chunk == nil, in: file)
            if let chunk { try file.write(count == chunk.count ? chunk : chunk.prefix(count), at: offset) }
            host.bandwidth.received(Int64(count))
            queue.append(.wrote(transfer, count: count))
        } catch {
            queue.append(.writeFailed(transfer, error))
        }
    }

    // MARK: the end

    private func finish() {
        stopEverything()
        host.runnerFinished(id)
    }

    /// No timer, hold or transfer of this download goes on.
    private func stopEverything() {
        done = true
        for timer in timers.values { timer.cancel() }
        timers.removeAll()
        for hold in holds.values { hold.cancel() }
        holds.removeAll()
        for transfer in transfers { cancel(transfer) }
    }

    /// Another node holds the download now: everything stops at once, and nothing more is written, to the store
    /// (the writes would be refused) or to the file beyond what is in flight.
    func abandon() {
        queue.removeAll()
        abandoned = true
        stopEverything()
        file?.close()
        file = nil
    }

    // MARK: FetchDelegate

    func transfer(_ transfer: TransferID, responded response: TransferResponse) -> Bool {
        guard transfers.contains(transfer), !cancelled.contains(transfer) else { return false }
        return answered(transfer, response)
    }

    func transfer(_ transfer: TransferID, received chunk: TransferChunk) -> ChunkDecision {
        guard transfers.contains(transfer), !cancelled.contains(transfer), !done else { return .abort }
        // Held until the cancel that follows: these bytes are the playlist's text, not the file's.
        // (Both are empty but for a first answer of kind auto: no lookup on the way of every other chunk.)
        if !becomingPlaylists.isEmpty, becomingPlaylists.contains(transfer) { return .pause }
        if !sniffing.isEmpty, let response = sniffing.removeValue(forKey: transfer) {
            var head: [UInt8] = []
            chunk.prefix(min(chunk.count, 64)).append(to: &head)
            if HLSParser.looksLikePlaylist(head) {
                becomePlaylist(transfer)
                return .pause
            }
            guard tell(transfer, response) else { return .abort }
        }
        if comparing[transfer] != nil { return compare(transfer, chunk) }
        return take(transfer, chunk.count, chunk)
    }

    func transfer(_ transfer: TransferID, wrote count: Int) -> ChunkDecision {
        guard transfers.contains(transfer), !cancelled.contains(transfer), !done else { return .abort }
        return take(transfer, count, nil)
    }

    /// Body bytes of `transfer` to the machine (`chunk` nil: in the file already, under its grant).
    private func take(_ transfer: TransferID, _ count: Int, _ chunk: TransferChunk?) -> ChunkDecision {
        // Not a byte into the file past the lease's deadline: the bytes wait in the transfer (curl offers them
        // again when it is resumed) until a renewal says this node still holds the download.
        checkLease()
        if suspended {
            heldForLease.insert(transfer)
            return .pause
        }
        if let wait = limitDelay(count), wait > 0 {
            // curl stops reading, so TCP slows the sender down; the same bytes come again after the wait.
            holds[transfer] = host.clock.after(wait) { [unowned self] in
                guard self.holds.removeValue(forKey: transfer) != nil else { return }
                self.resumeTransfer(transfer)
            }
            return .pause
        }
        // A part file reserved since the answer (a first request's, whose answer told the size): the fetcher may
        // write the rest itself.
        if chunk != nil, grants[transfer] == nil { offerGrant(transfer) }
        inCallback = transfer
        self.chunk = chunk
        stopRequested = false
        deliver(.received(transfer, count: count))
        inCallback = nil
        self.chunk = nil
        return stopRequested || done ? .abort : .consumed
    }

    func transfer(_ transfer: TransferID, ended result: TransferResult) {
        grants.removeValue(forKey: transfer)?.grant.revoke()
        holds.removeValue(forKey: transfer)?.cancel()
        releaseHostConnection(transfer)
        cancelled.remove(transfer)
        probes.remove(transfer)
        // An empty body: the answer as it was.
        if let response = sniffing.removeValue(forKey: transfer), transfers.contains(transfer) {
            _ = tell(transfer, response)
        }
        guard transfers.remove(transfer) != nil else { return }
        if let compared = comparing.removeValue(forKey: transfer) {
            return deliver(
                .compared(
                    transfer, checked: compared.next - compared.start, differsAt: compared.differsAt,
                    result))
        }
        deliver(.ended(transfer, result))
    }

    /// Seconds until `count` bytes fit this download's, its category's and the global speed limits, spending them if
    /// they fit now; nil without limits.
    private func limitDelay(_ count: Int) -> Double? {
        host.bandwidth.delay(for: count, own: &bucket, category: category)
    }
}
