import Foundation
import HaulLoop

/// One running download: probe, fetch its segments over up to `connections` connections into the part file,
/// checkpoint, verify, publish. Created when the download gets a slot, dropped when it completes, fails, is
/// paused or removed.
final class Job {
    unowned let engine: Engine
    let id: String
    /// The origin's host, for the per-host connection cap.
    let host: String
    var probeTransfer: Transfer?
    /// The Content-Length of a HEAD that did not settle the probe: the size when the ranged GET tells none.
    var headLength: Int64?
    var probeRetry: LoopTimer?
    var file: PartFile?
    /// Connections fetching a segment, or waiting to retry one.
    var connections: [Connection] = []
    /// How many connections this download runs at most right now.
    var plannedConnections = 0
    var stopped = false
    var meter = RateMeter()
    /// Bumped whenever segments are thrown away, so a checkpoint started before cannot journal stale bytes.
    var generation = 0
    var checkpointInFlight = false
    var bytesSinceCheckpoint: Int64 = 0
    static let checkpointBytes: Int64 = 16 << 20
    var restarts = 0
    /// Work that must wait until no curl callback is on the stack (removing transfers).
    var sweep: LoopTimer?
    var afterSweep: (() -> Void)?
    /// The download's own speed limit (`max_speed`).
    var bucket: TokenBucket?
    /// When the running probe started, for the stall watchdog.
    var probeStartedAt: Double?
    /// The part file's blocks were reserved for its whole known size: writes take no new space.
    var reserved = false
    /// Bytes written without a reservation since free space was last looked at.
    var unreservedSinceCheck: Int64 = 0

    /// One connection fetching one segment.
    final class Connection {
        var segment: Int
        var transfer: Transfer?
        var retryTimer: LoopTimer?
        /// Wakes a transfer held back by a speed limit.
        var resumeTimer: LoopTimer?
        /// The range asked for: nil for a plain GET of the whole file.
        var requested: (start: Int64, end: Int64?)?
        /// Set by the response check or the writer when they stop the transfer, read when it ends.
        var verdict: DownloadError?
        /// The segment was cut short by a split and is complete: the abort is a success.
        var reachedEnd = false
        /// No longer allowed to write (another connection took over the file); removed at the next sweep.
        var defunct = false
        /// Stall and slowness watchdog.
        var lastTickBytes: Int64 = -1
        var slowSince: Double?

        init(segment: Int) { self.segment = segment }
    }

    init(engine: Engine, id: String) {
        self.engine = engine
        self.id = id
        let url = engine.download(id)?.url ?? ""
        host = URLComponents(string: url)?.host?.lowercased() ?? ""
    }

    var speed: Double { activeConnections == 0 ? 0 : meter.bytesPerSecond }
    var activeConnections: Int { connections.filter { $0.transfer != nil }.count }

    var log: Logger { engine.log }
    var meta: [String: String] { ["download.id": id] }
    var download: Download? { engine.download(id) }

    // MARK: lifecycle

    func start() {
        if finishedBeforeACrash() { return }
        engine.modify(id) {
            $0.state = .probing
            $0.startedAt = $0.startedAt ?? Date()
            $0.error = nil
            $0.attempts += 1
        }
        probe(head: true)
    }

    /// Stops at once: closes every connection, keeps the part file, and checkpoints what was received.
    func stop() {
        stopped = true
        if let probeTransfer { engine.multi.remove(probeTransfer) }
        probeTransfer = nil
        probeRetry?.cancel()
        sweep?.cancel()
        dropConnections()
        closeFile()
    }

    func dropConnections() {
        for connection in connections { drop(connection) }
        connections.removeAll()
    }

    /// Ends one connection: its transfer stops, its host slot is given back. Not from inside a curl callback.
    func drop(_ connection: Connection) {
        connection.retryTimer?.cancel()
        connection.retryTimer = nil
        connection.resumeTimer?.cancel()
        if let transfer = connection.transfer {
            engine.multi.remove(transfer)
            engine.releaseConnection(to: host)
        }
        connection.transfer = nil
        connections.removeAll { $0 === connection }
    }

    /// Syncs and journals every byte written, then closes the part file. Blocks for the fdatasync: it covers at
    /// most one checkpoint interval of data.
    func closeFile() {
        guard let file else { return }
        if (try? file.sync()) != nil, let download { engine.journal(id, synced: download.segments) }
        file.close()
        self.file = nil
    }

    /// Every second (and every 16 MiB): fdatasync the part file off the loop, then journal the segments as they
    /// were when the sync began. The journal therefore never claims a byte that is not on disk.
    func checkpoint() {
        guard !checkpointInFlight, let file, let download, download.receivedBytes > download.durableBytes else {
            return
        }
        let handle: SyncHandle
        do {
            handle = try file.syncHandle()
        } catch {
            return log.warning("cannot checkpoint: \(error)", meta)
        }
        let synced = download.segments
        let generation = self.generation
        checkpointInFlight = true
        bytesSinceCheckpoint = 0
        engine.loop.offload({ handle.syncAndClose() }, then: { [weak self] error in
            guard let self else { return }
            self.checkpointInFlight = false
            if let error { return self.log.warning("checkpoint failed: \(error)", self.meta) }
            guard generation == self.generation, !self.stopped else { return }
            self.engine.journal(self.id, synced: synced)
        })
    }

    /// A crash after the file got its name and before `completed` was recorded leaves the journal complete and the
    /// finished file in place, with the part file gone, or (a crash between link and unlink) as a second name of it:
    /// record the completion instead of fetching it again. Only for a file that is Haul's own (this user's, no
    /// other link): a file planted under that name is not this download's.
    func finishedBeforeACrash() -> Bool {
        guard let download, let base = download.filename, let total = download.totalBytes,
              download.durableBytes == total,
              let directory = try? engine.directory(download.directory, create: false) else { return false }
        let part = base + ".part"
        let finalName: String
        if let partFile = directory.status(part) {
            guard partFile.st_nlink == 2, partFile.st_uid == geteuid(), Int64(partFile.st_size) == total,
                  let name = directory.otherName(of: part, among: { FileName.candidate(base, $0) }) else {
                return false
            }
            try? directory.remove(part)
            finalName = name
        } else {
            guard directory.size(base) == total, directory.foreignReason(base) == nil else { return false }
            finalName = base
        }
        engine.modify(id) {
            $0.filename = finalName
            $0.state = .completed
            $0.completedAt = $0.completedAt ?? Date()
        }
        log.info("found the download completed before a restart", meta)
        engine.jobEnded(id)
        return true
    }

    /// Called every tick: samples the speed and closes connections that stalled, or stayed below
    /// `lowestSpeed`, for `stallTimeout` seconds; their segments are retried.
    func tick(bytes: Int64, at time: Double) {
        guard activeConnections > 0 || probeTransfer != nil, let download else {
            meter.reset()
            return
        }
        meter.sample(bytes: bytes, at: time)
        let limit = Double(engine.config.stallTimeout)
        if let probeTransfer {
            // A probe gets the same patience as a silent connection.
            if probeStartedAt == nil { probeStartedAt = time }
            if let started = probeStartedAt, time - started >= limit {
                engine.multi.remove(probeTransfer)
                self.probeTransfer = nil
                probeStartedAt = nil
                failed(DownloadError(.timeout, "no answer to the probe for \(engine.config.stallTimeout) s",
                                     retryable: true), retry: { [weak self] in self?.probe(head: true) })
            }
            return
        }
        for connection in connections where connection.transfer != nil && !connection.defunct
            && download.segments.indices.contains(connection.segment) {
            let received = download.segments[connection.segment].received
            defer { connection.lastTickBytes = received }
            guard connection.lastTickBytes >= 0 else { continue }
            let rate = Double(received - connection.lastTickBytes) / max(engine.config.progressInterval, 0.001)
            let slow = received == connection.lastTickBytes || rate < Double(engine.config.lowestSpeed)
            guard slow else {
                connection.slowSince = nil
                continue
            }
            let since = connection.slowSince ?? time
            connection.slowSince = since
            if time - since >= limit {
                let what = received == connection.lastTickBytes
                    ? "nothing received for \(engine.config.stallTimeout) s"
                    : "slower than \(engine.config.lowestSpeed) bytes/s for \(engine.config.stallTimeout) s"
                if let transfer = connection.transfer {
                    engine.multi.remove(transfer)
                    engine.releaseConnection(to: host)
                }
                connection.transfer = nil
                connectionFailed(connection, DownloadError(.timeout, what, retryable: true))
            }
        }
    }

    // MARK: helpers

    func baseRequest(_ download: Download) -> TransferRequest {
        var request = TransferRequest(url: download.url)
        request.headers = download.headers.map { ($0.name, $0.value) }
        request.connectTimeout = engine.config.connectTimeout
        request.addressPolicy = engine.config.addressPolicy
        request.verifyTLS = !download.insecure
        return request
    }

    static func httpError(_ status: Int, response: TransferResponse? = nil) -> DownloadError {
        let retryable = status == 408 || status == 429 || (500..<600).contains(status)
        var error = DownloadError(.http(status), "the server answered HTTP \(status)", retryable: retryable)
        error.retryAfter = response?.header("retry-after").flatMap(RetryAfter.seconds)
        return error
    }

    static func fileError(_ error: FileError) -> DownloadError {
        if error.isNoSpace { return DownloadError(.diskFull, "no space left on device writing \(error.shownPath)") }
        return DownloadError(.writeFailed, error.description)
    }

    /// Gives back the blocks reserved for bytes never written: a download that has failed keeps what it received
    /// (a retry continues from there), not disk space it no longer uses.
    func releaseUnwritten() {
        guard let file, let download else { return }
        file.release(download.segments.compactMap { segment in segment.end.map { (segment.cursor, $0) } })
        if let total = download.totalBytes, download.segments.isEmpty { file.release([(0, total - 1)]) }
    }

    static func error(for result: TransferResult) -> DownloadError {
        let detail = result.message.isEmpty ? "" : ": \(result.message)"
        switch result.failure {
        case .dns?: return DownloadError(.dnsFailed, "cannot resolve the host\(detail)", retryable: true)
        case .connect?: return DownloadError(.connectFailed, "cannot connect\(detail)", retryable: true)
        case .timeout?: return DownloadError(.timeout, "the server stopped responding\(detail)", retryable: true)
        case .tls?: return DownloadError(.tlsFailed, "TLS failed\(detail)")
        case .tooManyRedirects?: return DownloadError(.tooManyRedirects, "more than 10 redirects\(detail)")
        case .blockedAddress?:
            return DownloadError(.blockedAddress, "\(result.message); this server denies private networks")
        case .badResponse?: return DownloadError(.badResponse, "the server's response is not usable HTTP\(detail)")
        case .unsupportedScheme?:
            return DownloadError(.unsupportedScheme, "only http and https are fetched, also after redirects\(detail)")
        case .cutOff?:
            return DownloadError(.connectionCut, "the server closed the connection early\(detail)", retryable: true)
        case .network?, .other?: return DownloadError(.networkError, "transfer failed\(detail)", retryable: true)
        case .aborted?, nil: return DownloadError(.internalError, "transfer stopped\(detail)")
        }
    }
}
