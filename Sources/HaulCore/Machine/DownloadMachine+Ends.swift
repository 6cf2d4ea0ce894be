import HaulLoop

/// How a segment's transfer ends: done, cut off and retried, the file changed, or the download failed.
extension DownloadMachine {
    // MARK: ends

    mutating func ended(_ id: TransferID, _ result: TransferResult) {
        if case .probing(let probe, _) = phase, probe == id { return probeEnded(result) }
        // Whatever the HEAD said, the body is asked for again.
        if case .probingHead(let head, _) = phase, head == id { return probe() }
        if mirrorProbes[id] != nil { return mirrorProbeEnded(id, result) }
        guard let index = connection(with: id) else { return }
        var reachedEnd = false
        if case .stopping(_, let outcome) = connections[index].state {
            switch outcome {
            case .failed(let error): return connectionFailed(index, error)
            case .reachedEnd: reachedEnd = true
            }
        }
        switch result.failure {
        case .rangesRefused?: return refusedRanges()
        case .tooManyConnections? where connections[index].source == 0:
            return refusedSession(index, DownloadError.transfer(result))
        default: break
        }
        if result.failure != nil, !(result.failure == .aborted && reachedEnd) {
            return connectionFailed(index, DownloadError.transfer(result))
        }
        let segmentIndex = connections[index].segment
        guard download.segments.indices.contains(segmentIndex) else {
            connections.remove(at: index)
            return fill()
        }
        let segment = download.segments[segmentIndex]
        if segment.end == nil {
            // The size was unknown: the end of the body is the end of the file.
            updateSegments { $0[segmentIndex].end = segment.cursor - 1 }
            download.totalBytes = segment.cursor
        } else if !segment.isDone {
            return connectionFailed(
                index,
                DownloadError(
                    .sizeMismatch,
                    "the server ended a range "
                        + "\(segment.remaining ?? 0) bytes early", retryable: true))
        }
        if let rate = rate(of: connections[index]) {
            recentRates = recentRates.suffix(7) + [rate]
        }
        connections.remove(at: index)
        fill()
    }

    /// A connection failed: its segment is tried again after a backoff while attempts remain, else the download
    /// fails.
    mutating func connectionFailed(_ index: Int, _ error: DownloadError) {
        if connections[index].source > 0 { return mirrorConnectionFailed(index, error) }
        // The first source failed while mirrors agree: the segment goes on from one of them at once (an attempt
        // all the same, so a download whose every source fails still ends).
        if usableSources.count > 1, download.resumable, error.retryable, download.attempts < settings.maxAttempts {
            download.attempts += 1
            log(
                .warning, "connection failed, its segment goes on from a mirror: \(error.message)",
                ["error.code": error.code.rawValue])
            connections[index].source = chooseSource(excluding: 0)
            return launch(index)
        }
        guard error.retryable, download.attempts < settings.maxAttempts else { return fail(error) }
        download.attempts += 1
        let delay = backoff(attempt: download.attempts - 1, error: error)
        log(
            .warning, "connection failed, retrying in \(Self.seconds(delay)) s: \(error.message)",
            ["error.code": error.code.rawValue, "segment.index": String(connections[index].segment)])
        let timer = newTimer()
        connections[index].state = .backoff(timer)
        scheduleRetry(timer, after: delay, because: error)
    }

    mutating func couldNotStart(_ id: TransferID, _ message: String) {
        let error = DownloadError(.internalError, "cannot start a transfer: \(message)")
        if case .probing(let probe, _) = phase, probe == id { return fail(error) }
        if case .probingHead(let head, _) = phase, head == id { return probe() }
        guard let index = connection(with: id) else { return }
        connectionFailed(index, error)
    }

    /// The host has no connection to spare: the segment (or the first request) waits for a connection to be freed.
    mutating func noHostConnection(_ id: TransferID) {
        if case .probing(let probe, _) = phase, probe == id { return phase = .probeWaitingForHost }
        if case .probingHead(let head, _) = phase, head == id { return phase = .probeWaitingForHost }
        guard let index = connection(with: id) else { return }
        connections.remove(at: index)
        hostBusy = true
        if connections.isEmpty, download.segments.allSatisfy(\.isDone) { transferred() }
    }

    mutating func hostConnectionFreed() {
        if phase == .probeWaitingForHost { return probe() }
        hostBusy = false
        fill()
    }

    /// The remote file is not the one the segments hold: drop every connection and probe again, at most three
    /// times.
    mutating func restart(because reason: String) {
        for connection in connections { drop(connection) }
        connections.removeAll()
        restarts += 1
        guard restarts <= 3 else { return fail(DownloadError(.remoteChanged, "\(reason), again after 3 restarts")) }
        log(.info, "starting over: \(reason)")
        // The file changed: whether the mirrors still have it is asked again.
        for id in mirrorProbes.keys { emit(.cancel(id)) }
        mirrorProbes.removeAll()
        for id in mirrorChecks.keys { emit(.cancel(id)) }
        mirrorChecks.removeAll()
        mirrorsAwaitingCheck.removeAll()
        for index in download.mirrors.indices where download.mirrors[index].state == .active {
            download.mirrors[index].state = .pending
            download.mirrors[index].etag = nil
            download.mirrors[index].lastModified = nil
        }
        generation += 1
        setSegments([])
        emit(.closeFile(sync: nil, generation: generation))
        transition(.restart)
        probe()
    }

    /// The origin cannot start a transfer at an offset (an FTP server without REST): what is written may not be
    /// continued, so the file is fetched again from byte 0 on one connection.
    mutating func refusedRanges() {
        rangesRefused = true
        restart(because: "the server cannot start a transfer at an offset; fetching it whole on one connection")
    }

    /// The origin has no session to spare (FTP 421, too many from this address): the download goes on with the
    /// connections it has, and asks for no more than that in this run; with none left, it tries again after a wait.
    mutating func refusedSession(_ index: Int, _ error: DownloadError) {
        let others = connections.count - 1
        guard others > 0 else { return connectionFailed(index, error) }
        sessionCap = min(sessionCap ?? others, others)
        plannedConnections = min(plannedConnections, others)
        log(.info, "the server has no session to spare: going on with \(others) connections")
        // Its segment waits for a connection that finishes its own.
        connections.remove(at: index)
    }

    /// A new limit: fewer connections close the extra ones (their segments wait), more are opened at once.
    mutating func limitsChanged() {
        guard phase == .transferring, download.state == .downloading else { return }
        plannedConnections = min(download.resumable ? download.connections : 1, sessionCap ?? .max)
        while connections.count > plannedConnections { drop(connections.removeLast()) }
        fill()
    }
}
