import Foundation
import HaulLoop

/// One running download: probe, transfer into the part file, verify, publish. Created when the download gets a
/// slot, dropped when it completes, fails, is paused or removed.
final class Job {
    private unowned let engine: Engine
    let id: String
    private var transfer: Transfer?
    private var file: PartFile?
    private var retryTimer: LoopTimer?
    /// Where the next body byte goes.
    private var writeOffset: Int64 = 0
    /// First byte of the current ranged request, nil for a request of the whole file.
    private var rangeStart: Int64?
    /// Set by the response check when it aborts a transfer, read when the transfer ends.
    private var verdict: Verdict?
    private var restarts = 0
    private var stopped = false
    private var meter = RateMeter()
    /// Bumped whenever the part file is cut back, so a checkpoint started before cannot journal stale bytes.
    private var generation = 0
    private var checkpointInFlight = false
    /// The offset the latest checkpoint covers (or is covering).
    private var checkpointOffset: Int64 = 0
    static let checkpointBytes: Int64 = 16 << 20
    /// The stall watchdog: bytes seen at the last tick, and when that count last moved.
    private var watchedBytes: Int64 = -1
    private var lastMovedAt: Double = 0

    private enum Verdict {
        /// The remote file is not the one the part file holds: discard and start over.
        case restart(String)
        case fail(DownloadError)
    }

    init(engine: Engine, id: String) {
        self.engine = engine
        self.id = id
    }

    var speed: Double { transfer == nil ? 0 : meter.bytesPerSecond }
    var activeConnections: Int { transfer == nil ? 0 : 1 }

    /// Called every tick: samples the speed, and cuts a transfer that received nothing for `stallTimeout`
    /// seconds (curl's own low-speed check averages over seconds and reacts far later).
    func tick(bytes: Int64, at time: Double) {
        guard let transfer else {
            meter.reset()
            watchedBytes = -1
            return
        }
        meter.sample(bytes: bytes, at: time)
        if bytes != watchedBytes {
            watchedBytes = bytes
            lastMovedAt = time
        } else if time - lastMovedAt >= Double(engine.config.stallTimeout) {
            engine.multi.remove(transfer)
            self.transfer = nil
            watchedBytes = -1
            failed(DownloadError(.timeout, "nothing received for \(engine.config.stallTimeout) s", retryable: true))
        }
    }

    private var log: Logger { engine.log }
    private var meta: [String: String] { ["download.id": id] }

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

    /// Stops at once: closes the connection, keeps the part file, and checkpoints what was received.
    func stop() {
        stopped = true
        if let transfer { engine.multi.remove(transfer) }
        transfer = nil
        retryTimer?.cancel()
        retryTimer = nil
        closeFile()
    }

    /// Syncs and journals the bytes written so far, then closes the part file. Blocks for the fdatasync: it
    /// covers at most one checkpoint interval of data.
    private func closeFile() {
        guard let file else { return }
        if (try? file.sync()) != nil { engine.journal(id, writeOffset) }
        file.close()
        self.file = nil
    }

    /// Every second (and every 16 MiB): fdatasync the part file off the loop, then journal the offset it covers.
    /// The journal therefore never claims a byte that is not on disk.
    func checkpoint() {
        guard !checkpointInFlight, let file, writeOffset > checkpointOffset,
              let download = engine.download(id), writeOffset > download.durableBytes else { return }
        let handle: SyncHandle
        do {
            handle = try file.syncHandle()
        } catch {
            return log.warning("cannot checkpoint: \(error)", meta)
        }
        let offset = writeOffset
        let generation = self.generation
        checkpointInFlight = true
        checkpointOffset = offset
        engine.loop.offload({ handle.syncAndClose() }, then: { [weak self] error in
            guard let self else { return }
            self.checkpointInFlight = false
            if let error { return self.log.warning("checkpoint failed: \(error)", self.meta) }
            guard generation == self.generation, !self.stopped else { return }
            self.engine.journal(self.id, offset)
        })
    }

    /// A crash between giving the file its name and recording `completed` leaves the journal complete, no part
    /// file, and the finished file in place: record the completion instead of fetching it again.
    private func finishedBeforeACrash() -> Bool {
        guard let download = engine.download(id), let name = download.filename, let total = download.totalBytes,
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

    // MARK: probe

    private func probe(head: Bool) {
        guard let download = engine.download(id) else { return }
        var request = baseRequest(download)
        if head {
            request.method = .head
        } else {
            request.range = (0, 0)
        }
        launch(request) { transfer in
            transfer.onResponse = { response in
                // A 200 to the ranged probe would stream the whole file: the headers are all we need.
                head || response.status == 206
            }
            transfer.onComplete = { [weak self] result in self?.probeEnded(result, head: head) }
        }
    }

    private func probeEnded(_ result: TransferResult, head: Bool) {
        transfer = nil
        guard !stopped else { return }
        guard let response = result.response, result.failure == nil || result.failure == .aborted else {
            if head, result.failure == .cutOff || result.failure == .other {
                return probe(head: false)
            }
            return failed(Job.error(for: result))
        }
        let outcome = head ? Probe.interpretHead(response) : Probe.interpretRangedGet(response)
        switch outcome {
        case .tryRangedGet:
            probe(head: false)
        case .httpError(let status):
            failed(Job.httpError(status))
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
            if changed { $0.receivedBytes = 0 }
        }
        do {
            try openPartFile(contentDisposition: probe.contentDisposition)
        } catch {
            return failed(Job.fileError(error))
        }
        engine.modify(id) { $0.state = .downloading }
        beginTransfer()
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
                    $0.receivedBytes = size
                    $0.durableBytes = size
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

    // MARK: transfer

    private func beginTransfer() {
        guard let download = engine.download(id), let file else { return }
        let partSize = Files.size(file.path)
        let plan = ResumePlan.decide(journaled: download.receivedBytes, partFileSize: partSize,
                                     total: download.totalBytes, acceptsRanges: download.acceptsRanges,
                                     validator: download.etag ?? download.lastModified)
        engine.setReceived(id, plan.offset)
        do {
            if partSize != plan.offset {
                generation += 1
                try file.truncate(to: plan.offset)
            }
            // Blocks for the whole file now: a full disk fails here, not hours into the transfer.
            if let total = download.totalBytes { try file.reserve(total) }
        } catch {
            return failed(Job.fileError(error))
        }
        writeOffset = plan.offset
        checkpointOffset = min(checkpointOffset, plan.offset)
        if let total = download.totalBytes, plan.offset == total, plan.offset > 0 {
            return transferred()
        }
        var request = baseRequest(download)
        rangeStart = plan.offset > 0 ? plan.offset : nil
        if let start = rangeStart {
            request.range = (start, nil)
            request.ifRange = plan.ifRange
            log.info("resuming", meta.merging(["range.start": "\(start)"]) { a, _ in a })
        }
        verdict = nil
        launch(request) { transfer in
            transfer.onResponse = { [unowned self] response in self.check(response) }
            transfer.onData = { [unowned self] chunk in self.write(chunk) }
            transfer.onComplete = { [weak self] result in self?.transferEnded(result) }
        }
    }

    /// Runs before the first body byte is written: is this the data we asked for?
    private func check(_ response: TransferResponse) -> Bool {
        guard let download = engine.download(id) else { return false }
        if let start = rangeStart {
            switch RangeReply.check(response, start: start, end: nil, total: download.totalBytes,
                                    etag: download.etag) {
            case .accept:
                return true
            case .restartWithBody:
                // Range ignored, or If-Range found a new version: this body is the whole new file.
                log.info("server sent the whole file to a ranged request; starting over from byte 0", meta)
                return takeWholeBody(response)
            case .changed:
                verdict = .restart("the remote file changed")
                return false
            case .mismatch:
                verdict = .fail(DownloadError(.rangeMismatch, "the server answered a different byte range "
                    + "(Content-Range: \(response.header("content-range") ?? "none"))", retryable: true))
                return false
            case .httpError(416):
                verdict = .restart("the server cannot serve the range any more (416)")
                return false
            case .httpError(let status):
                verdict = .fail(Job.httpError(status))
                return false
            }
        }
        switch response.status {
        case 200..<300 where response.status != 206:
            return takeWholeBody(response)
        case 200..<400:
            verdict = .fail(DownloadError(.rangeMismatch, "unexpected status \(response.status) to a plain GET",
                                          retryable: true))
            return false
        default:
            verdict = .fail(Job.httpError(response.status))
            return false
        }
    }

    /// Accepts a 200 body: everything from byte 0, possibly of a new version of the file.
    private func takeWholeBody(_ response: TransferResponse) -> Bool {
        engine.setReceived(id, 0)
        generation += 1
        checkpointOffset = 0
        do {
            try file?.truncate(to: 0)
        } catch {
            verdict = .fail(Job.fileError(error))
            return false
        }
        // Without a length, the probed size still holds for a plain GET of the probed version; a 200 to a
        // ranged request may be a new version, of unknown size.
        let length = response.header("content-length").flatMap { Int64($0) }
            ?? (rangeStart == nil ? engine.download(id)?.totalBytes : nil)
        writeOffset = 0
        rangeStart = nil
        engine.modify(id) {
            $0.receivedBytes = 0
            $0.totalBytes = length
            $0.etag = Probe.strongETag(response.header("etag"))
            $0.lastModified = response.header("last-modified")
        }
        return true
    }

    private func write(_ chunk: TransferChunk) -> Bool {
        guard let file else { return false }
        do {
            try file.write(chunk, at: writeOffset)
        } catch {
            verdict = .fail(Job.fileError(error))
            return false
        }
        writeOffset += Int64(chunk.count)
        engine.setReceived(id, writeOffset)
        if writeOffset - checkpointOffset >= Job.checkpointBytes { checkpoint() }
        return true
    }

    private func transferEnded(_ result: TransferResult) {
        transfer = nil
        guard !stopped else { return }
        switch verdict {
        case .restart(let reason)?:
            restarts += 1
            guard restarts <= 3 else {
                return failed(DownloadError(.remoteChanged, "\(reason), again after 3 restarts"))
            }
            log.info("starting over: \(reason)", meta)
            engine.modify(id) { $0.receivedBytes = 0 }
            return beginTransfer()
        case .fail(let error)?:
            return failed(error)
        case nil:
            break
        }
        if result.failure != nil { return failed(Job.error(for: result)) }
        guard let download = engine.download(id) else { return }
        if let total = download.totalBytes, writeOffset != total {
            return failed(DownloadError(.sizeMismatch, "received \(writeOffset) of \(total) bytes",
                                        retryable: true))
        }
        engine.modify(id) { $0.totalBytes = self.writeOffset }
        transferred()
    }

    // MARK: completion

    /// Every byte is in the part file: make it durable, then give it its final name.
    private func transferred() {
        engine.modify(id) { $0.state = .verifying }
        guard let file else { return }
        let path = file.path
        engine.loop.offload({ () -> FileError? in
            do throws(FileError) {
                let sync = try PartFile(path: path)
                try sync.sync()
                return nil
            } catch {
                return error
            }
        }, then: { [weak self] error in
            guard let self, !self.stopped else { return }
            if let error { return self.failed(Job.fileError(error)) }
            self.publish()
        })
    }

    private func publish() {
        guard let download = engine.download(id), let base = download.filename, let file else { return }
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
                    $0.durableBytes = size
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

    /// Retries after a backoff when the error allows it and attempts remain; otherwise the download fails.
    private func failed(_ error: DownloadError) {
        guard let download = engine.download(id) else { return }
        if error.retryable, download.attempts < engine.config.maxAttempts, download.state != .verifying {
            let delay = min(engine.config.retryMaxDelay,
                            engine.config.retryBaseDelay * pow(2, Double(max(0, download.attempts - 1))))
            log.warning("attempt failed, retrying in \(delay)s: \(error.message)",
                        meta.merging(["error.code": error.code.rawValue]) { a, _ in a })
            let timer = LoopTimer(loop: engine.loop, delay: delay) { [weak self] in self?.retry() }
            retryTimer = timer
            timer.start()
            return
        }
        log.warning("download failed: \(error.message)", meta.merging(["error.code": error.code.rawValue]) { a, _ in a })
        // Keep what was received: a retry after the cause is fixed continues from there.
        closeFile()
        engine.modify(id) {
            $0.state = .failed
            $0.error = error
        }
        engine.jobEnded(id)
    }

    private func retry() {
        retryTimer = nil
        guard !stopped, let download = engine.download(id) else { return }
        engine.modify(id) { $0.attempts += 1 }
        if download.state == .probing {
            probe(head: true)
        } else {
            beginTransfer()
        }
    }

    // MARK: helpers

    private func baseRequest(_ download: Download) -> TransferRequest {
        var request = TransferRequest(url: download.url)
        request.headers = download.headers.map { ($0.name, $0.value) }
        request.connectTimeout = engine.config.connectTimeout
        request.maxSpeed = download.maxSpeed
        return request
    }

    private func launch(_ request: TransferRequest, configure: (Transfer) -> Void) {
        do {
            let transfer = try Transfer(request)
            configure(transfer)
            self.transfer = transfer
            engine.multi.add(transfer)
        } catch {
            failed(DownloadError(.internalError, "cannot start a transfer: \(error)"))
        }
    }

    static func httpError(_ status: Int) -> DownloadError {
        let retryable = status == 408 || status == 429 || (500..<600).contains(status)
        return DownloadError(.http(status), "the server answered HTTP \(status)", retryable: retryable)
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
