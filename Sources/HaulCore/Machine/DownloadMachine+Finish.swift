import HaulLoop

/// The end of a download (verification, the final name, failure), what clients ask for (pause, resume, changes,
/// removal), and the periodic work (speed, stalls, checkpoints).
extension DownloadMachine {
    // MARK: completion

    /// Every byte is in the part file: make it durable, check it, then give it its name.
    mutating func transferred() {
        transition(.transferred)
        phase = .verifying
        emit(.verify(download.checksum.flatMap(Checksum.init)?.algorithm))
    }

    mutating func verified(_ digest: String?) {
        guard phase == .verifying else { return }
        if let expected = download.checksum.flatMap(Checksum.init), let digest, digest != expected.hex {
            if mirrorBytesInDoubt { return refetchFromFirstSource(expected: expected, actual: digest) }
            return checksumMismatch(expected: expected, actual: digest)
        }
        // Every byte is on disk: the journal says so before the file gets a name, so a crash between the link and
        // the unlink is recognised as finished at the next start.
        download.journal = download.segments
        emit(.saveJournal(download.journal))
        phase = .publishing
        emit(.publish(base: download.filename ?? "download"))
    }

    /// The bytes are wrong: nothing gets the final name, and the part file is discarded so a retry starts over.
    mutating func checksumMismatch(expected: Checksum, actual: String) {
        emit(.deletePartFile)
        generation += 1
        setSegments([])
        log(.warning, "checksum mismatch")
        end(.fail) {
            $0.error = DownloadError(
                .checksumMismatch,
                "\(expected.algorithm.rawValue) of the file is \(actual), "
                    + "expected \(expected.hex)")
        }
    }

    /// The file failed its checksum with bytes from mirrors in it: not a failure yet. The mirrors that wrote are
    /// dropped, and the ranges they wrote (the whole file when this run does not know them) are fetched again from
    /// the first source, the rest kept; the download waits for a slot again and resumes from there. A second
    /// mismatch, with no mirror's byte left, fails.
    mutating func refetchFromFirstSource(expected: Checksum, actual: String) {
        let total = download.totalBytes ?? 0
        var doubt = mirrorWritten.sorted { $0.first < $1.first }
        if doubt.isEmpty { doubt = [ByteRange(0, max(0, total - 1))] }
        var merged: [ByteRange] = []
        for range in doubt {
            if let last = merged.last, range.first <= last.last + 1 {
                merged[merged.count - 1].last = max(last.last, range.last)
            } else {
                merged.append(range)
            }
        }
        for index in download.mirrors.indices where download.mirrors[index].receivedBytes > 0 {
            dropMirror(
                index,
                "the file failed its \(expected.algorithm.rawValue) check with bytes from it; they are "
                    + "fetched again from \(Redact.url(download.url))")
        }
        mirrorWritten = []
        let again = merged.reduce(Int64(0)) { $0 + $1.last - $1.first + 1 }
        log(
            .warning,
            "checksum mismatch with bytes from mirrors: \(again) bytes are fetched again from the first "
                + "source", ["checksum.actual": actual])
        setSegments(SegmentPlanner.excluding(merged, total: total))
        // The verification synced every byte: the journal may vouch for all those kept.
        download.journal = download.segments
        end(.interrupt) { $0.error = nil }
    }

    mutating func published(_ name: String, file: FileStamp?) {
        guard phase == .publishing else { return }
        retry = nil
        if download.kind.isPlaylist, let file, file.size != download.totalBytes {
            // Remuxed into another container (the config file's hls-remux): the file named is the new one.
            generation += 1
            setSegments([Segment(start: 0, end: file.size - 1, received: file.size)])
            download.totalBytes = file.size
            download.contentType = Self.containerType(of: name)
        }
        end(.verified) {
            $0.filename = name
            $0.fileStamp = file
            $0.journal = $0.segments
            $0.error = nil
        }
    }

    /// The type of a remuxed file, by its extension.
    static func containerType(of name: String) -> String? {
        switch name.split(separator: ".").last?.lowercased() {
        case "mp4", "m4v": return "video/mp4"
        case "mkv": return "video/x-matroska"
        case "mov": return "video/quicktime"
        case "webm": return "video/webm"
        case "ts": return "video/mp2t"
        default: return nil
        }
    }

    /// Leaves the running phases for good with `event`'s transition: the slot is given back.
    mutating func end(_ event: DownloadEvent, _ change: (inout Download) -> Void) {
        phase = .idle
        connections.removeAll()
        checkpointInFlight = false
        meter.reset()
        transition(event, change)
        emit(.finished)
    }

    // MARK: failure

    /// The download fails and keeps what it received (a retry continues from there), but not the blocks reserved
    /// for the rest.
    mutating func fail(_ error: DownloadError) {
        guard phase != .idle else { return }
        cancelEverything()
        emit(.release(unwritten))
        emit(.closeFile(sync: download.segments, generation: generation))
        end(.fail) { $0.error = error }
    }

    mutating func fileFailed(_ error: FileError) {
        guard phase != .idle else { return }
        fail(DownloadError.file(error))
    }

    /// The ranges reserved and never written.
    var unwritten: [ByteRange] {
        if download.segments.isEmpty, let total = download.totalBytes, total > 0 { return [ByteRange(0, total - 1)] }
        return download.segments.compactMap { segment in
            segment.end.flatMap { segment.cursor <= $0 ? ByteRange(segment.cursor, $0) : nil }
        }
    }

    /// Cancels every transfer and timer the download has going.
    mutating func cancelEverything() {
        if download.kind == .torrent, phase == .torrenting || phase == .publishing || phase == .seeding {
            emit(.torrent(.stop))
        }
        switch phase {
        case .probing(let id, _), .probingHead(let id, _): emit(.cancel(id))
        case .probeBackoff(let timer): emit(.cancelTimer(timer))
        default: break
        }
        if let stream = probeStream {
            probeStream = nil
            emit(.cancel(stream.id))
        }
        for connection in connections { drop(connection) }
        connections.removeAll()
        for id in mirrorProbes.keys { emit(.cancel(id)) }
        mirrorProbes.removeAll()
        for id in mirrorChecks.keys { emit(.cancel(id)) }
        mirrorChecks.removeAll()
        mirrorsAwaitingCheck.removeAll()
    }

    // MARK: clients

    mutating func pause() {
        // Pausing a seeding torrent ends its seeding: its files are complete, so it is.
        if phase == .seeding { return torrentSeeded() }
        if phase != .idle {
            stopEverything(sync: true)
            transition(.pause)
            emit(.finished)
        } else {
            transition(.pause)
        }
    }

    mutating func resume() {
        retry = nil
        transition(.resume) {
            $0.error = nil
            $0.attempts = 0
        }
    }

    mutating func change(_ changes: DownloadChanges) {
        if let priority = changes.priority { download.priority = priority }
        if let rank = changes.queueRank { download.queueRank = rank }
        if let maxSpeed = changes.maxSpeed { download.maxSpeed = maxSpeed }
        if let connections = changes.connections { download.connections = connections }
        if let category = changes.category { download.category = category }
        if let tags = changes.tags { download.tags = tags }
        if let ratio = changes.seedRatio { download.seedRatio = ratio }
        if let time = changes.seedTime { download.seedTime = time }
        if changes.connections != nil { limitsChanged() }
    }

    /// Ends every transfer and closes the part file (synced and journaled when `sync`); the state stays.
    mutating func stopEverything(sync: Bool) {
        guard phase != .idle else { return }
        cancelEverything()
        emit(.closeFile(sync: sync ? download.segments : nil, generation: generation))
        phase = .idle
        checkpointInFlight = false
        meter.reset()
    }

    // MARK: time

    mutating func timerFired(_ timer: TimerID) {
        if let retry, retry.deadlines[timer] != nil {
            var deadlines = retry.deadlines
            deadlines[timer] = nil
            self.retry = RetryWait(error: retry.error, deadlines: deadlines)
        }
        if phase == .probeBackoff(timer) { return probe() }
        guard let index = connections.firstIndex(where: { $0.state == .backoff(timer) }) else { return }
        launch(index)
    }

    /// Every tick: samples the speed, cuts a probe or a connection that stalled (or stayed below `lowestSpeed`)
    /// for `stallTimeout`, checkpoints, and looks again for work for free connections.
    mutating func tick(now: Double) {
        switch phase {
        case .probing(let id, let since):
            guard let since else { return phase = .probing(id, since: now) }
            guard now - since >= settings.stallTimeout else { return }
            emit(.cancel(id))
            failProbe(
                DownloadError(
                    .timeout, "no answer to the first request for \(Int(settings.stallTimeout)) s",
                    retryable: true))
        case .probingHead(let id, let since):
            guard let since else { return phase = .probingHead(id, since: now) }
            guard now - since >= settings.stallTimeout else { return }
            // A silent HEAD tells nothing: on with the body.
            emit(.cancel(id))
            probe()
        case .transferring:
            guard activeConnections > 0 else { return meter.reset() }
            meter.sample(bytes: download.receivedBytes, at: now)
            watchStalls(now: now)
            checkpoint()
            // A connection freed while the others' rates were still unknown found nothing worth stealing; now they
            // are known, a slow one may have a share to give.
            fill()
        default:
            break
        }
    }

    private mutating func watchStalls(now: Double) {
        for index in connections.indices.reversed() where index < connections.count {
            guard case .fetching(let id) = connections[index].state,
                download.segments.indices.contains(connections[index].segment)
            else { continue }
            let received = download.segments[connections[index].segment].received
            let last = connections[index].lastTickBytes
            connections[index].lastTickBytes = received
            guard last >= 0 else { continue }
            let rate = Double(received - last) / max(settings.tickInterval, 0.001)
            guard received == last || rate < Double(settings.lowestSpeed) else {
                connections[index].slowSince = nil
                continue
            }
            let since = connections[index].slowSince ?? now
            connections[index].slowSince = since
            guard now - since >= settings.stallTimeout else { continue }
            let what =
                received == last
                ? "nothing received for \(Int(settings.stallTimeout)) s"
                : "slower than \(settings.lowestSpeed) bytes/s for \(Int(settings.stallTimeout)) s"
            emit(.cancel(id))
            connectionFailed(index, DownloadError(.timeout, what, retryable: true))
        }
    }

    /// Syncs the part file off the loop and then journals the segments as they were when the sync began: the
    /// journal never claims a byte that is not on disk.
    mutating func checkpoint() {
        guard !checkpointInFlight, phase == .transferring,
            download.receivedBytes > download.durableBytes
        else { return }
        checkpointInFlight = true
        bytesSinceCheckpoint = 0
        emit(.checkpoint(download.segments, generation: generation))
    }

    mutating func synced(_ segments: [Segment], generation: Int, final: Bool) {
        if !final { checkpointInFlight = false }
        // A checkpoint that finishes after the download stopped, or after its segments were thrown away, is stale.
        guard generation == self.generation, final || phase != .idle else { return }
        download.journal = SegmentPlanner.journal(synced: segments, live: download.segments)
        emit(.saveJournal(download.journal))
    }

    mutating func syncFailed(_ error: FileError) {
        checkpointInFlight = false
        log(.warning, "checkpoint failed: \(error)")
    }
}
