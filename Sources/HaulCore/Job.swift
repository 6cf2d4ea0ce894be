import Foundation
import HaulLoop

/// One running download: probe, fetch its segments over up to `connections` connections into the part file,
/// checkpoint, verify, publish. Created when the download gets a slot, dropped when it completes, fails, is
/// paused or removed.
final class Job {
    private unowned let engine: Engine
    let id: String
    /// The origin's host, for the per-host connection cap.
    let host: String
    private var probeTransfer: Transfer?
    private var probeRetry: LoopTimer?
    private var file: PartFile?
    /// Connections fetching a segment, or waiting to retry one.
    private var connections: [Connection] = []
    /// How many connections this download runs at most right now.
    private(set) var plannedConnections = 0
    private var stopped = false
    private var meter = RateMeter()
    /// Bumped whenever segments are thrown away, so a checkpoint started before cannot journal stale bytes.
    private var generation = 0
    private var checkpointInFlight = false
    private var bytesSinceCheckpoint: Int64 = 0
    static let checkpointBytes: Int64 = 16 << 20
    private var restarts = 0
    /// Work that must wait until no curl callback is on the stack (removing transfers).
    private var sweep: LoopTimer?
    private var afterSweep: (() -> Void)?
    /// The download's own speed limit (`max_speed`).
    private var bucket: TokenBucket?

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

    private var log: Logger { engine.log }
    private var meta: [String: String] { ["download.id": id] }
    private var download: Download? { engine.download(id) }

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

    private func dropConnections() {
        for connection in connections { drop(connection) }
        connections.removeAll()
    }

    /// Ends one connection: its transfer stops, its host slot is given back. Not from inside a curl callback.
    private func drop(_ connection: Connection) {
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
    private func closeFile() {
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

    /// A crash between giving the file its name and recording `completed` leaves the journal complete, no part
    /// file, and the finished file in place: record the completion instead of fetching it again.
    private func finishedBeforeACrash() -> Bool {
        guard let download, let name = download.filename, let total = download.totalBytes,
              download.durableBytes == total else { return false }
        let directory = engine.path(ofDirectory: download.directory)
        guard !Files.exists(directory + "/" + name + ".part"), Files.size(directory + "/" + name) == total else {
            return false
        }
        engine.modify(id) {
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
        for connection in connections where connection.transfer != nil {
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
    private var probeStartedAt: Double?

    // MARK: probe

    private func probe(head: Bool) {
        guard let download = engine.download(id) else { return }
        probeStartedAt = nil
        var request = baseRequest(download)
        if head {
            request.method = .head
        } else {
            request.range = (0, 0)
        }
        do {
            let transfer = try Transfer(request)
            // A 200 to the ranged probe would stream the whole file: the headers are all we need.
            transfer.onResponse = { response in head || response.status == 206 }
            transfer.onComplete = { [weak self] result in self?.probeEnded(result, head: head) }
            probeTransfer = transfer
            engine.multi.add(transfer)
        } catch {
            failed(DownloadError(.internalError, "cannot start a transfer: \(error)"))
        }
    }

    private func probeEnded(_ result: TransferResult, head: Bool) {
        probeTransfer = nil
        guard !stopped else { return }
        guard let response = result.response, result.failure == nil || result.failure == .aborted else {
            if head, result.failure == .cutOff || result.failure == .other {
                return probe(head: false)
            }
            return failed(Job.error(for: result), retry: { [weak self] in self?.probe(head: true) })
        }
        let outcome = head ? Probe.interpretHead(response) : Probe.interpretRangedGet(response)
        switch outcome {
        case .tryRangedGet:
            probe(head: false)
        case .httpError(let status):
            failed(Job.httpError(status, response: response), retry: { [weak self] in self?.probe(head: true) })
        case .result(let result):
            probed(result)
        }
    }

    private func probed(_ probe: ProbeResult) {
        guard let before = engine.download(id) else { return }
        let changed = before.receivedBytes > 0
            && (before.totalBytes != probe.totalBytes || before.etag != probe.etag
                || before.lastModified != probe.lastModified)
        if changed { log.info("remote file changed since the last attempt; starting over", meta) }
        engine.modify(id) {
            $0.finalURL = probe.finalURL
            $0.totalBytes = probe.totalBytes
            $0.acceptsRanges = probe.acceptsRanges
            $0.etag = probe.etag
            $0.lastModified = probe.lastModified
            $0.contentType = probe.contentType
            if changed { $0.segments = [] }
        }
        do {
            try openPartFile(contentDisposition: probe.contentDisposition)
        } catch {
            return failed(Job.fileError(error))
        }
        engine.modify(id) { $0.state = .downloading }
        plan()
    }

    /// Opens the part file, choosing and reserving a free name on the first attempt.
    private func openPartFile(contentDisposition: String?) throws(FileError) {
        guard let download = engine.download(id) else { return }
        let directory = engine.path(ofDirectory: download.directory)
        try Files.makeDirectories(directory)
        if let name = download.filename {
            file = try PartFile(path: directory + "/" + name + ".part")
            return
        }
        let base = download.requestedFilename
            ?? FileName.derive(contentDisposition: contentDisposition, finalURL: download.finalURL ?? download.url)
        for n in 0..<10_000 {
            let name = FileName.candidate(base, n)
            if Files.exists(directory + "/" + name) { continue }
            let partPath = directory + "/" + name + ".part"
            if let size = Files.size(partPath), !engine.isClaimed(directory: download.directory, name: name) {
                // A part file nobody journals (another tool's, or ours with the database lost): the resume plan
                // continues it if smaller than the remote file, completes it if equal, restarts it if larger.
                file = try PartFile(path: partPath)
                engine.modify(id) {
                    $0.filename = name
                    $0.segments = [Segment(start: 0, end: $0.totalBytes.map { $0 - 1 }, received: size)]
                    $0.journal = $0.segments
                }
                log.info("adopting an existing part file", meta.merging(["file.size": "\(size)"]) { a, _ in a })
                return
            }
            do {
                // O_EXCL: two downloads of the same name never share a part file.
                file = try PartFile(path: directory + "/" + name + ".part", exclusive: true)
            } catch where error.code == EEXIST {
                continue
            }
            engine.modify(id) { $0.filename = name }
            return
        }
        throw FileError(call: "open", path: directory + "/" + base, code: EEXIST)
    }

    // MARK: segments

    /// Decides the segments: continue the journaled ones when the file can be resumed, else one plan from zero.
    private func plan() {
        guard let download, let file else { return }
        let partSize = Files.size(file.path) ?? 0
        // Several ranges need a validator too: without one, nothing proves they come from one version.
        let ranged = download.resumable
        var segments = download.segments
        if download.resumable, covers(segments, download.totalBytes) {
            // Never trust a byte beyond the end of the part file.
            for i in segments.indices {
                segments[i].received = max(0, min(segments[i].received, partSize - segments[i].start))
            }
        } else {
            let total = download.totalBytes
            segments = ranged
                ? SegmentPlanner.initial(total: total!, connections: download.connections,
                                         minSplit: engine.config.minSplitSize)
                : [Segment(start: 0, end: total.map { $0 - 1 })]
            if total == 0 { segments = [Segment(start: 0, end: -1)] }
        }
        if segments != download.segments {
            generation += 1
            engine.modify(id) { $0.segments = segments }
        }
        do {
            if segments.allSatisfy({ $0.received == 0 }), partSize > 0 { try file.truncate(to: 0) }
            // Blocks for the whole file now: a full disk fails here, not hours into the transfer.
            if let total = download.totalBytes { try file.reserve(total) }
        } catch {
            return failed(Job.fileError(error))
        }
        let resumedBytes = segments.reduce(0) { $0 + $1.received }
        if resumedBytes > 0 {
            log.info("resuming", meta.merging(["bytes": "\(resumedBytes)", "segments": "\(segments.count)"]) { a, _ in a })
        }
        plannedConnections = ranged ? download.connections : 1
        bucket = download.maxSpeed.map { TokenBucket(rate: Double($0)) }
        fillConnections()
    }

    /// Whether `segments` cover `0..<total` exactly, in order.
    private func covers(_ segments: [Segment], _ total: Int64?) -> Bool {
        guard let total, !segments.isEmpty else { return false }
        let sorted = segments.sorted { $0.start < $1.start }
        guard sorted.first?.start == 0, sorted.last?.end == total - 1 else { return false }
        for (a, b) in zip(sorted, sorted.dropFirst()) where a.end.map({ $0 + 1 }) != b.start { return false }
        return sorted.allSatisfy { $0.end != nil && $0.received <= $0.end! - $0.start + 1 }
    }

    /// Opens connections while there is work, the download's limit and the host's cap allow: idle segments
    /// first, then halves of the largest ranges still being fetched.
    func fillConnections() {
        guard !stopped, file != nil, afterSweep == nil, var download, download.state == .downloading else { return }
        while connections.count < plannedConnections {
            var segments = download.segments
            let busy = Set(connections.map(\.segment))
            guard let index = SegmentPlanner.nextWork(&segments, busy: busy, minSplit: engine.config.minSplitSize)
            else { break }
            guard engine.acquireConnection(to: host) else { break }
            if segments != download.segments {
                engine.modify(id) { $0.segments = segments }
                download = self.download!
            }
            let connection = Connection(segment: index)
            connections.append(connection)
            launch(connection)
        }
        if connections.isEmpty, download.segments.allSatisfy(\.isDone) { transferred() }
    }

    /// Starts (or restarts) the connection's request from its segment's cursor. Holds a host slot.
    private func launch(_ connection: Connection) {
        guard let download, let file else { return }
        if !download.resumable, download.segments[connection.segment].received > 0 {
            // Nothing can prove the bytes so far belong to the version a new request gets: start over.
            generation += 1
            engine.modify(id) { $0.segments[connection.segment].received = 0 }
            try? file.truncate(to: 0)
        }
        let segment = download.segments[connection.segment]
        var request = baseRequest(download)
        if download.resumable, let total = download.totalBytes, segment.cursor > 0 || segment.end != total - 1 {
            // The last segment asks for "the rest"; the others for their exact range.
            let end = segment.end == total - 1 ? nil : segment.end
            request.range = (segment.cursor, end)
            request.ifRange = download.etag ?? download.lastModified
            connection.requested = (segment.cursor, end)
        } else {
            connection.requested = nil
        }
        connection.verdict = nil
        connection.reachedEnd = false
        connection.lastTickBytes = -1
        connection.slowSince = nil
        do {
            let transfer = try Transfer(request)
            transfer.onResponse = { [unowned self, unowned connection] response in self.check(connection, response) }
            transfer.onData = { [unowned self, unowned connection] chunk in self.write(connection, chunk) }
            connection.resumeTimer?.cancel()
            transfer.onComplete = { [weak self, weak connection] result in
                guard let self, let connection else { return }
                self.ended(connection, result)
            }
            connection.transfer = transfer
            engine.multi.add(transfer)
        } catch {
            engine.releaseConnection(to: host)
            connectionFailed(connection, DownloadError(.internalError, "cannot start a transfer: \(error)"))
        }
    }

    /// Runs before the first body byte of a connection is written: is this the data asked for?
    private func check(_ connection: Connection, _ response: TransferResponse) -> Bool {
        guard !connection.defunct, let download else { return false }
        guard let requested = connection.requested else {
            switch response.status {
            case 200..<300 where response.status != 206:
                return takeWholeBody(connection, response)
            case 200..<400:
                connection.verdict = DownloadError(.rangeMismatch, "unexpected status \(response.status) to a plain GET",
                                                   retryable: true)
            default:
                connection.verdict = Job.httpError(response.status, response: response)
            }
            return false
        }
        switch RangeReply.check(response, start: requested.start, end: requested.end, total: download.totalBytes,
                                etag: download.etag) {
        case .accept:
            return true
        case .restartWithBody:
            // Range ignored, or If-Range found a new version: this body is the whole file, from byte 0.
            return takeWholeBody(connection, response)
        case .changed:
            restartAll(because: "the remote file changed")
        case .mismatch:
            connection.verdict = DownloadError(.rangeMismatch, "the server answered a different byte range "
                + "(Content-Range: \(response.header("content-range") ?? "none"))", retryable: true)
        case .httpError(416):
            restartAll(because: "the server cannot serve the range any more (416)")
        case .httpError(let status):
            connection.verdict = Job.httpError(status, response: response)
        }
        return false
    }

    /// This connection's 200 carries the whole file: it alone writes from now on, from byte 0. When the file is
    /// unchanged the server ignores Range, and the download stays on one connection.
    private func takeWholeBody(_ connection: Connection, _ response: TransferResponse) -> Bool {
        guard let download, let file else { return false }
        let length = response.header("content-length").flatMap { Int64($0) }
            ?? (connection.requested == nil ? download.totalBytes : nil)
        let etag = Probe.strongETag(response.header("etag"))
        let lastModified = response.header("last-modified")
        let ignoresRange = connection.requested != nil && etag == download.etag && lastModified == download.lastModified
        if connection.requested != nil {
            log.info(ignoresRange ? "the server ignores Range: one connection from byte 0"
                                  : "the remote file changed: starting over from byte 0", meta)
        }
        for other in connections where other !== connection { other.defunct = true }
        generation += 1
        connection.segment = 0
        connection.requested = nil
        engine.modify(id) {
            $0.segments = [Segment(start: 0, end: length.map { $0 - 1 })]
            $0.totalBytes = length
            $0.etag = etag
            $0.lastModified = lastModified
            if ignoresRange { $0.acceptsRanges = false }
        }
        plannedConnections = 1
        do {
            try file.truncate(to: 0)
        } catch {
            connection.verdict = Job.fileError(error)
            return false
        }
        if connections.count > 1 { scheduleSweep(then: nil) }
        return true
    }

    private func write(_ connection: Connection, _ chunk: TransferChunk) -> ChunkDecision {
        guard !connection.defunct, let file, let segment = download?.segments[connection.segment] else { return .abort }
        let room = segment.remaining ?? Int64.max
        let take = Int(min(Int64(chunk.count), room))
        if take > 0 {
            if let wait = limitDelay(take), wait > 0 {
                hold(connection, for: wait)
                return .pause
            }
            do {
                try file.write(take == chunk.count ? chunk : chunk.prefix(take), at: segment.cursor)
            } catch {
                connection.verdict = Job.fileError(error)
                return .abort
            }
            engine.advance(id, segment: connection.segment, by: Int64(take))
            bytesSinceCheckpoint += Int64(take)
            if bytesSinceCheckpoint >= Job.checkpointBytes { checkpoint() }
        }
        if take < chunk.count {
            // The range was split while this connection fetched it: its part is done.
            connection.reachedEnd = true
            return .abort
        }
        return .consumed
    }

    /// Seconds until `count` bytes fit this download's and the global speed limits, spending them if they fit
    /// now; nil without limits.
    private func limitDelay(_ count: Int) -> Double? {
        guard bucket != nil || engine.globalBucket != nil else { return nil }
        let now = ProcessInfo.processInfo.systemUptime
        let wait = max(bucket?.delay(for: count, now: now) ?? 0, engine.globalBucket?.delay(for: count, now: now) ?? 0)
        if wait == 0 {
            bucket?.consume(count)
            engine.globalBucket?.consume(count)
        }
        return wait
    }

    /// Holds a connection's transfer for `seconds` (curl stops reading, so TCP slows the sender down).
    private func hold(_ connection: Connection, for seconds: Double) {
        let timer = LoopTimer(loop: engine.loop, delay: seconds, priority: .transfer) { [weak connection] in
            connection?.resumeTimer = nil
            connection?.transfer?.resume()
        }
        connection.resumeTimer = timer
        timer.start()
    }

    private func ended(_ connection: Connection, _ result: TransferResult) {
        guard connection.transfer != nil else { return }
        connection.transfer = nil
        engine.releaseConnection(to: host)
        if stopped || connection.defunct || afterSweep != nil {
            connections.removeAll { $0 === connection }
            return
        }
        if let verdict = connection.verdict { return connectionFailed(connection, verdict) }
        if result.failure != nil, !(result.failure == .aborted && connection.reachedEnd) {
            return connectionFailed(connection, Job.error(for: result))
        }
        guard let segment = download?.segments[connection.segment] else { return }
        if segment.end == nil {
            // The size was unknown: the end of the body is the end of the file.
            engine.modify(id) {
                $0.segments[connection.segment].end = segment.cursor - 1
                $0.totalBytes = segment.cursor
            }
        } else if !segment.isDone {
            return connectionFailed(connection, DownloadError(.sizeMismatch, "the server ended a range "
                + "\(segment.remaining ?? 0) bytes early", retryable: true))
        }
        connections.removeAll { $0 === connection }
        fillConnections()
    }

    /// A connection failed: retry its segment after a backoff while attempts remain, else fail the download.
    private func connectionFailed(_ connection: Connection, _ error: DownloadError) {
        guard let download else { return }
        guard error.retryable, download.attempts < engine.config.maxAttempts else { return failed(error) }
        engine.modify(id) { $0.attempts += 1 }
        let delay = backoff(attempt: download.attempts, error: error)
        log.warning("connection failed, retrying in \(String(format: "%.2f", delay)) s: \(error.message)",
                    meta.merging(["error.code": error.code.rawValue, "segment.index": "\(connection.segment)"]) { a, _ in a })
        let timer = LoopTimer(loop: engine.loop, delay: delay) { [weak self, weak connection] in
            guard let self, let connection, !self.stopped else { return }
            connection.retryTimer = nil
            guard self.engine.acquireConnection(to: self.host) else {
                // The host is busy: give the segment back; a free connection will take it.
                self.connections.removeAll { $0 === connection }
                return
            }
            self.launch(connection)
        }
        connection.retryTimer = timer
        timer.start()
    }

    /// The remote file is not the one the segments hold: drop every connection and start over.
    private func restartAll(because reason: String) {
        for connection in connections { connection.defunct = true }
        scheduleSweep { [weak self] in
            guard let self else { return }
            self.restarts += 1
            guard self.restarts <= 3 else {
                return self.failed(DownloadError(.remoteChanged, "\(reason), again after 3 restarts"))
            }
            self.log.info("starting over: \(reason)", self.meta)
            self.generation += 1
            self.engine.modify(self.id) { $0.segments = [] }
            // Probe again: size and validators may have changed.
            self.engine.modify(self.id) { $0.state = .probing }
            self.file?.close()
            self.file = nil
            self.probe(head: true)
        }
    }

    /// Removes defunct connections once no curl callback is running, then runs `then`.
    private func scheduleSweep(then: (() -> Void)?) {
        if let then { afterSweep = then }
        if sweep == nil {
            sweep = LoopTimer(loop: engine.loop, delay: 0) { [unowned self] in
                for connection in self.connections where connection.defunct { self.drop(connection) }
                let next = self.afterSweep
                self.afterSweep = nil
                next?()
            }
        }
        if sweep?.isPending == false { sweep?.start() }
    }

    /// A new speed limit applies to the next chunk; fewer connections close the extra ones (their segments
    /// wait for a free connection), more are opened at once.
    func limitsChanged() {
        guard !stopped, let download, download.state == .downloading, afterSweep == nil else { return }
        if let speed = download.maxSpeed {
            if bucket == nil { bucket = TokenBucket(rate: Double(speed)) } else { bucket?.rate = Double(speed) }
        } else {
            bucket = nil
        }
        plannedConnections = download.resumable ? download.connections : 1
        for connection in connections.reversed() where connections.count > plannedConnections {
            drop(connection)
        }
        fillConnections()
    }

    // MARK: completion

    /// Every byte is in the part file: make it durable, check it, then give it its final name.
    private func transferred() {
        guard let download, let file else { return }
        engine.modify(id) { $0.state = .verifying }
        let handle: SyncHandle
        do {
            handle = try file.syncHandle()
        } catch {
            return failed(Job.fileError(error))
        }
        let path = file.path
        let expected = download.checksum.flatMap(Checksum.init)
        engine.loop.offload({ () -> Result<String?, FileError> in
            if let error = handle.syncAndClose() { return .failure(error) }
            guard let expected else { return .success(nil) }
            return Result { () throws(FileError) in try Digest.hex(ofFile: path, algorithm: expected.algorithm) }
        }, then: { [weak self] result in
            guard let self, !self.stopped else { return }
            switch result {
            case .failure(let error):
                self.failed(Job.fileError(error))
            case .success(let actual):
                if let expected, let actual, actual != expected.hex {
                    return self.checksumMismatch(expected: expected, actual: actual)
                }
                self.publish()
            }
        })
    }

    /// The bytes are wrong: nothing gets the final name, and the part file is discarded so a retry starts over.
    private func checksumMismatch(expected: Checksum, actual: String) {
        file?.close()
        file = nil
        if let download, let name = download.filename {
            try? Files.remove(engine.path(ofDirectory: download.directory) + "/" + name + ".part")
        }
        generation += 1
        engine.modify(id) {
            $0.segments = []
            $0.state = .failed
            $0.error = DownloadError(.checksumMismatch, "\(expected.algorithm.rawValue) of the file is \(actual), "
                + "expected \(expected.hex)")
        }
        log.warning("checksum mismatch", meta)
        engine.jobEnded(id)
    }

    private func publish() {
        guard let download, let base = download.filename, let file else { return }
        let directory = engine.path(ofDirectory: download.directory)
        let size = Files.size(file.path) ?? -1
        guard size == download.totalBytes ?? size else {
            return failed(DownloadError(.sizeMismatch, "the part file holds \(size) bytes, expected "
                + "\(download.totalBytes ?? 0)"))
        }
        file.close()
        self.file = nil
        do {
            for n in 0..<10_000 {
                let name = FileName.candidate(base, n)
                let target = directory + "/" + name
                if Files.sameFile(file.path, target) {
                    // A crash between link and unlink left both names on this file: finish the unlink.
                    try Files.remove(file.path)
                } else if !(try Files.linkWithoutReplacing(file.path, to: target)) {
                    continue
                }
                try Files.syncDirectory(directory)
                engine.modify(id) {
                    $0.filename = name
                    $0.journal = $0.segments
                    $0.state = .completed
                    $0.completedAt = Date()
                    $0.error = nil
                }
                log.info("download completed", meta.merging(["file.name": name, "file.size": "\(size)"]) { a, _ in a })
                engine.jobEnded(id)
                return
            }
            failed(DownloadError(.writeFailed, "no free file name for \(base)"))
        } catch {
            failed(Job.fileError(error))
        }
    }

    // MARK: failures

    /// Retries after a backoff (with `retry`) when the error allows it and attempts remain; otherwise the
    /// download fails and keeps what it received.
    private func failed(_ error: DownloadError, retry: (() -> Void)? = nil) {
        guard let download, !stopped else { return }
        if let retry, error.retryable, download.attempts < engine.config.maxAttempts {
            engine.modify(id) { $0.attempts += 1 }
            let delay = backoff(attempt: download.attempts, error: error)
            log.warning("attempt failed, retrying in \(String(format: "%.2f", delay)) s: \(error.message)",
                        meta.merging(["error.code": error.code.rawValue]) { a, _ in a })
            let timer = LoopTimer(loop: engine.loop, delay: delay) { [weak self] in
                self?.probeRetry = nil
                retry()
            }
            probeRetry = timer
            timer.start()
            return
        }
        log.warning("download failed: \(error.message)", meta.merging(["error.code": error.code.rawValue]) { a, _ in a })
        stopped = true
        dropConnections()
        // Keep what was received: a retry after the cause is fixed continues from there.
        closeFile()
        engine.modify(id) {
            $0.state = .failed
            $0.error = error
        }
        engine.jobEnded(id)
    }

    /// Exponential backoff with ±25% jitter, never sooner than the server's Retry-After.
    private func backoff(attempt: Int, error: DownloadError) -> Double {
        let base = min(engine.config.retryMaxDelay,
                       engine.config.retryBaseDelay * pow(2, Double(max(0, attempt - 1))))
        let jittered = base * Double.random(in: 0.75...1.25)
        return max(jittered, min(error.retryAfter ?? 0, 600))
    }

    // MARK: helpers

    private func baseRequest(_ download: Download) -> TransferRequest {
        var request = TransferRequest(url: download.url)
        request.headers = download.headers.map { ($0.name, $0.value) }
        request.connectTimeout = engine.config.connectTimeout
        return request
    }

    static func httpError(_ status: Int, response: TransferResponse? = nil) -> DownloadError {
        let retryable = status == 408 || status == 429 || (500..<600).contains(status)
        var error = DownloadError(.http(status), "the server answered HTTP \(status)", retryable: retryable)
        error.retryAfter = response?.header("retry-after").flatMap(RetryAfter.seconds)
        return error
    }

    static func fileError(_ error: FileError) -> DownloadError {
        if error.isNoSpace { return DownloadError(.diskFull, "no space left on device writing \(error.path)") }
        return DownloadError(.writeFailed, error.description)
    }

    static func error(for result: TransferResult) -> DownloadError {
        let detail = result.message.isEmpty ? "" : ": \(result.message)"
        switch result.failure {
        case .dns?: return DownloadError(.dnsFailed, "cannot resolve the host\(detail)", retryable: true)
        case .connect?: return DownloadError(.connectFailed, "cannot connect\(detail)", retryable: true)
        case .timeout?: return DownloadError(.timeout, "the server stopped responding\(detail)", retryable: true)
        case .tls?: return DownloadError(.tlsFailed, "TLS failed\(detail)")
        case .tooManyRedirects?: return DownloadError(.tooManyRedirects, "more than 10 redirects\(detail)")
        case .cutOff?:
            return DownloadError(.connectionCut, "the server closed the connection early\(detail)", retryable: true)
        case .network?, .other?: return DownloadError(.networkError, "transfer failed\(detail)", retryable: true)
        case .aborted?, nil: return DownloadError(.internalError, "transfer stopped\(detail)")
        }
    }
}
