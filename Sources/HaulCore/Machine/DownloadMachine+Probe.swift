import HaulLoop

/// Starting: the first request (a GET whose headers are the probe and whose body is the start of the file), its
/// retries, and the part file it leads to.
extension DownloadMachine {
    mutating func start(now: Double) {
        if download.state == .seeding { return resumeSeeding() }
        transition(.start) {
            $0.error = nil
            $0.attempts += 1
        }
        restarts = 0
        recentRates = []
        headTried = false
        headLength = nil
        if download.kind == .torrent { return startTorrent() }
        // A download with a journal to resume needs no probe: each segment's request carries If-Range, and a changed
        // file answers it with its new whole body.
        if let name = download.filename,
            download.resumable && ResumePlan.covers(download.segments, download.totalBytes)
                || download.streamResumable && ResumePlan.coversStream(download.segments)
        {
            phase = .opening(contentDisposition: nil)
            return emit(.openPartFile(PartFileRequest(current: name, base: name)))
        }
        probe()
    }

    /// A crash after the file got its name and before `completed` was stored: the runner found it finished.
    mutating func foundFinished(_ name: String, file: FileStamp?) {
        transition(.finished) {
            $0.filename = name
            $0.fileStamp = file
            $0.journal = $0.segments
        }
        log(.info, "found the download completed before a restart")
        emit(.finished)
    }

    mutating func probe() {
        let id = newTransfer()
        phase = .probing(id, since: nil)
        emit(.fetch(id, .probe))
    }

    /// The first request's headers: size, validators, name and range support are known before a body byte is
    /// written. The part file is opened and the plan made at once, while the body waits; then the connection for
    /// the segment at byte 0 takes this transfer over, so a small file costs one request.
    mutating func probeResponded(_ id: TransferID, _ response: TransferResponse) {
        switch origin.probe(response) {
        case .httpError(let status):
            emit(.abort(id))
            failProbe(origin.error(status: status, response: response))
        case .wrongRange:
            emit(.abort(id))
            failProbe(
                DownloadError(
                    .rangeMismatch,
                    "the server answered another range than bytes=0- "
                        + "(Content-Range: \(response.header("content-range") ?? "none"))", retryable: true))
        case .result(var result):
            if result.totalBytes == nil, !headTried, !download.kind.isPlaylist {
                // No size: a body running past the size HEAD tells would be written without end. HEAD (once), then
                // the body again.
                headTried = true
                emit(.abort(id))
                let head = newTransfer()
                phase = .probingHead(head, since: nil)
                return emit(.fetch(head, .head))
            }
            if result.totalBytes == nil { result.totalBytes = headLength }
            probeStream = (id, response.status == 206)
            probed(result)
        }
    }

    /// The HEAD's answer: its length, when it has one.
    mutating func headResponded(_ response: TransferResponse) {
        guard (200..<300).contains(response.status) else { return }
        headLength = response.header("content-length").flatMap { Int64($0) }.flatMap { $0 >= 0 ? $0 : nil }
    }

    /// The first request ended before its headers (or they were refused): try again after a backoff.
    mutating func probeEnded(_ result: TransferResult) {
        failProbe(
            result.failure == nil || result.failure == .aborted
                ? DownloadError(.badResponse, "the server ended the first request without an answer", retryable: true)
                : DownloadError.transfer(result))
    }

    /// The probe failed: probe again after a backoff while attempts remain, else the download fails.
    mutating func failProbe(_ error: DownloadError) {
        guard error.retryable, download.attempts < settings.maxAttempts else { return fail(error) }
        download.attempts += 1
        let delay = backoff(attempt: download.attempts - 1, error: error)
        log(
            .warning, "attempt failed, retrying in \(Self.seconds(delay)) s: \(error.message)",
            ["error.code": error.code.rawValue])
        let timer = newTimer()
        phase = .probeBackoff(timer)
        scheduleRetry(timer, after: delay, because: error)
    }

    mutating func probed(_ probe: ProbeResult) {
        if let expected = download.expectedBytes, let total = probe.totalBytes, expected != total {
            return fail(
                DownloadError(
                    .sizeMismatch,
                    "the server says the file has \(total) bytes; \(expected) "
                        + "were expected (size)"))
        }
        let changed =
            download.receivedBytes > 0
            && (download.totalBytes != probe.totalBytes || download.etag != probe.etag
                || download.lastModified != probe.lastModified)
        if changed { log(.info, "remote file changed since the last attempt; starting over") }
        download.finalURL = probe.finalURL == download.url ? download.url : probe.finalURL
        download.totalBytes = probe.totalBytes
        download.acceptsRanges = probe.acceptsRanges && !rangesRefused
        download.etag = probe.etag
        download.lastModified = probe.lastModified
        download.contentType = probe.contentType
        if changed {
            generation += 1
            setSegments([])
        }
        phase = .opening(contentDisposition: probe.contentDisposition)
        let base =
            download.requestedFilename
            ?? FileName.derive(
                contentDisposition: probe.contentDisposition,
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
        quotaAllowance = info.allowance
        plan(partSize: info.size, allocated: info.allocated, free: info.free)
    }

    /// `seconds` with two decimals, for log lines.
    static func seconds(_ value: Double) -> String {
        Decimals.format(value, places: 2)
    }
}
