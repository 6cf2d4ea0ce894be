import HaulLoop

/// Starting: the probe (HEAD, else a one-byte ranged GET), its retries, and the part file it leads to.
extension DownloadMachine {
    mutating func start(now: Double) {
        transition(.start) {
            $0.error = nil
            $0.attempts += 1
        }
        restarts = 0
        probe(head: true)
    }

    /// A crash after the file got its name and before `completed` was stored: the runner found it finished.
    mutating func foundFinished(_ name: String) {
        transition(.finished) {
            $0.filename = name
            $0.journal = $0.segments
        }
        log(.info, "found the download completed before a restart")
        emit(.finished)
    }

    mutating func probe(head: Bool) {
        let id = newTransfer()
        phase = .probing(id, head: head, since: nil)
        emit(.fetch(id, head ? .head : .firstByte))
    }

    /// The probe's headers: a HEAD's are all there is; a 200 to the one-byte GET would stream the whole file, so
    /// it is stopped at its headers (which settle the probe).
    mutating func probeResponded(_ id: TransferID, head: Bool, _ response: TransferResponse) {
        if !head, response.status != 206 { emit(.abort(id)) }
    }

    mutating func probeEnded(_ result: TransferResult, head: Bool) {
        guard let response = result.response, result.failure == nil || result.failure == .aborted else {
            // Some servers cut or mangle HEAD: the one-byte GET may still work.
            if head, result.failure == .cutOff || result.failure == .other { return probe(head: false) }
            return failProbe(DownloadError.transfer(result))
        }
        switch head ? Probe.interpretHead(response) : Probe.interpretRangedGet(response) {
        case .tryRangedGet:
            headLength = (200..<300).contains(response.status)
                ? response.header("content-length").flatMap { Int64($0) }.flatMap { $0 >= 0 ? $0 : nil } : nil
            probe(head: false)
        case .httpError(let status):
            failProbe(DownloadError.http(status, response: response))
        case .result(var result):
            // A server that answers GET without a length (chunked) may still have told HEAD the size: keep it, so a
            // body running past it is caught instead of written forever.
            if !head, result.totalBytes == nil { result.totalBytes = headLength }
            probed(result)
        }
    }

    /// The probe failed: probe again after a backoff while attempts remain, else the download fails.
    mutating func failProbe(_ error: DownloadError) {
        guard error.retryable, download.attempts < settings.maxAttempts else { return fail(error) }
        download.attempts += 1
        let delay = backoff(attempt: download.attempts - 1, error: error)
        log(.warning, "attempt failed, retrying in \(Self.seconds(delay)) s: \(error.message)",
            ["error.code": error.code.rawValue])
        let timer = newTimer()
        phase = .probeBackoff(timer)
        emit(.schedule(timer, after: delay))
    }

    mutating func probed(_ probe: ProbeResult) {
        if let expected = download.expectedBytes, let total = probe.totalBytes, expected != total {
            return fail(DownloadError(.sizeMismatch, "the server says the file has \(total) bytes; \(expected) "
                + "were expected (size)"))
        }
        let changed = download.receivedBytes > 0
            && (download.totalBytes != probe.totalBytes || download.etag != probe.etag
                || download.lastModified != probe.lastModified)
        if changed { log(.info, "remote file changed since the last attempt; starting over") }
        download.finalURL = probe.finalURL
        download.totalBytes = probe.totalBytes
        download.acceptsRanges = probe.acceptsRanges
        download.etag = probe.etag
        download.lastModified = probe.lastModified
        download.contentType = probe.contentType
        if changed {
            generation += 1
            setSegments([])
        }
        phase = .opening(contentDisposition: probe.contentDisposition)
        let base = download.requestedFilename
            ?? FileName.derive(contentDisposition: probe.contentDisposition,
                               finalURL: download.finalURL ?? download.url)
        emit(.openPartFile(PartFileRequest(current: download.filename, base: base)))
    }

    mutating func fileOpened(_ info: PartFileInfo) {
        guard case .opening = phase else { return }
        if let why = info.passedOver {
            log(.warning, "the part file \(why); choosing another name")
            generation += 1
            setSegments([])
        }
        download.filename = info.name
        if let adopted = info.adopted {
            // The resume plan continues it if smaller than the remote file, completes it if equal, restarts it if
            // larger.
            setSegments([Segment(start: 0, end: download.totalBytes.map { $0 - 1 }, received: adopted)])
            download.journal = download.segments
            log(.info, "adopting an existing part file", ["file.size": String(adopted)])
        }
        transition(.probed)
        plan(partSize: info.size, allocated: info.allocated, free: info.free)
    }

    /// `seconds` with two decimals, for log lines.
    static func seconds(_ value: Double) -> String {
        let hundredths = Int((value * 100).rounded())
        let fraction = hundredths % 100
        return "\(hundredths / 100)." + (fraction < 10 ? "0" : "") + String(fraction)
    }
}
