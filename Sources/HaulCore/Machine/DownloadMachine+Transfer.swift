import HaulLoop

/// Fetching the segments: the plan, connections, the check of each reply before its first byte is written, the
/// writes, retries, restarts and work stealing.
extension DownloadMachine {
    /// Decides the segments: the journaled ones when the file can be resumed, else one plan from zero; then makes
    /// sure the file fits and reserves its blocks.
    mutating func plan(partSize: Int64, allocated: Int64, free: Int64) {
        let segments = ResumePlan.segments(
            journal: download.segments, partFileSize: partSize,
            total: download.totalBytes, resumable: download.resumable,
            connections: download.connections, minSplit: settings.minSplitSize,
            order: download.sequential ? .sequential : download.firstLast ? .firstLast : .spread,
            streamResumable: download.streamResumable)
        if segments != download.segments {
            generation += 1
            setSegments(segments)
        }
        var allocated = allocated, free = free
        if segments.allSatisfy({ $0.received == 0 }), partSize > 0 {
            emit(.truncate(to: 0))
            free += allocated
            allocated = 0
        }
        reserved = false
        unreservedSinceCheck = 0
        guard let total = download.totalBytes else { return startTransferring() }
        if let allowance = quotaAllowance, total > allowance { return fail(quotaRefusal(allowance)) }
        // What the file still needs (a resumed one holds its blocks already) must leave the reserve free; then its
        // blocks are taken at once, so a full disk fails here, not hours into the transfer.
        if let refusal = settings.space.refusal(total: total, needed: total - allocated, free: free) {
            return fail(refusal)
        }
        // A small file's blocks are not reserved: on a list of 64 KiB files fallocate cost 7.5% of the server's CPU,
        // as much as writing them, and the check above has kept the reserve free; its writes are checked as they
        // land, as an unknown size's are.
        guard total >= Self.smallestReserved else { return startTransferring() }
        phase = .reserving
        emit(.reserve(total))
    }

    /// Files this size or larger get their blocks reserved before the first byte is written.
    static let smallestReserved: Int64 = 1 << 20

    mutating func reservedSpace(_ ok: Bool) {
        guard phase == .reserving else { return }
        reserved = ok
        startTransferring()
    }

    mutating func startTransferring() {
        let resumed = download.segments.reduce(0) { $0 + $1.received }
        if resumed > 0 {
            log(.info, "resuming", ["bytes": String(resumed), "segments": String(download.segments.count)])
        }
        plannedConnections = min(download.resumable ? download.connections : 1, sessionCap ?? .max)
        phase = .transferring
        probeMirrors()
        fill()
    }

    /// Opens connections while there is work and the download's limit allows: idle segments first, then halves of
    /// the largest ranges still being fetched (work stealing). With nothing left to fetch, the file is complete.
    mutating func fill() {
        guard phase == .transferring, download.state == .downloading else { return }
        while !hostBusy, connections.count < connectionsAllowed {
            var segments = download.segments
            let busy = connections.map { ($0.segment, rate(of: $0)) }
            guard
                let index = SegmentPlanner.nextWork(
                    &segments, busy: busy, recent: recentRates,
                    minSplit: settings.minSplitSize)
            else { break }
            if segments != download.segments { setSegments(segments) }
            if let stream = probeStream, download.segments[index].cursor == 0 {
                // The first request's body is this segment's: it goes on streaming, no second request.
                probeStream = nil
                connections.append(
                    Connection(
                        segment: index, state: .fetching(stream.id),
                        requested: stream.ranged ? (0, nil) : nil, launchedAt: now))
                continue
            }
            var connection = Connection(segment: index, state: .backoff(TimerID(0)))
            connection.source = chooseSource()
            connections.append(connection)
            launch(connections.count - 1)
        }
        // A first request no segment could use (the part file holds the start already): stop it at its headers.
        if let stream = probeStream {
            probeStream = nil
            emit(.abort(stream.id))
        }
        if connections.isEmpty, download.segments.allSatisfy(\.isDone) { transferred() }
    }

    /// Starts (or restarts) connection `index`'s request from its segment's cursor.
    mutating func launch(_ index: Int) {
        let segmentIndex = connections[index].segment
        guard download.segments.indices.contains(segmentIndex) else {
            connections.remove(at: index)
            return
        }
        if !download.resumable, !download.streamResumable, download.segments[segmentIndex].received > 0 {
            // Nothing can prove the bytes so far belong to the version a new request gets: start over.
            generation += 1
            updateSegments { $0[segmentIndex].received = 0 }
            emit(.truncate(to: 0))
        }
        let segment = download.segments[segmentIndex]
        // A mirror dropped since (or one a whole-body plan cannot use): the best source left.
        if connections[index].source > 0, !usableSources.contains(connections[index].source) || !download.resumable {
            connections[index].source = download.resumable ? chooseSource() : 0
        }
        let source = connections[index].source
        let kind: FetchKind
        if download.resumable, let total = download.totalBytes,
            segment.cursor > 0 || segment.end != total - 1 || source > 0
        {
            // The last segment asks for "the rest"; the others for their exact range. Each source has its own
            // validator.
            let end = segment.end == total - 1 ? nil : segment.end
            let validator = source == 0 ? download.validator : download.mirrors[source - 1].validator
            kind = .range(start: segment.cursor, end: end, ifRange: validator)
            connections[index].requested = (segment.cursor, end)
        } else if download.streamResumable, segment.cursor > 0, source == 0 {
            // The rest of a stream of unknown size, from where it stopped, of the same version.
            kind = .range(start: segment.cursor, end: nil, ifRange: download.etag)
            connections[index].requested = (segment.cursor, nil)
        } else {
            kind = .whole
            connections[index].requested = nil
        }
        let id = newTransfer()
        connections[index].state = .fetching(id)
        connections[index].lastTickBytes = -1
        connections[index].slowSince = nil
        connections[index].launchedAt = now
        connections[index].bytesAtLaunch = segment.received
        emit(source == 0 ? .fetch(id, kind) : .fetchFrom(id, kind, url: download.mirrors[source - 1].url))
    }

    func connection(with id: TransferID) -> Int? { connections.firstIndex { $0.transfer == id } }

    /// Bytes per second of a connection's transfer since it started; nil before a fifth of a second of it (too
    /// little to tell), or while it waits to retry.
    func rate(of connection: Connection) -> Double? {
        guard case .fetching = connection.state, download.segments.indices.contains(connection.segment) else {
            return nil
        }
        let elapsed = now - connection.launchedAt
        guard elapsed >= 0.2 else { return nil }
        return Double(download.segments[connection.segment].received - connection.bytesAtLaunch) / elapsed
    }

    // MARK: replies

    mutating func responded(_ id: TransferID, _ response: TransferResponse) {
        if case .probing(let probe, _) = phase, probe == id { return probeResponded(id, response) }
        if case .probingHead(let head, _) = phase, head == id { return headResponded(response) }
        if mirrorProbes[id] != nil { return mirrorProbeAnswered(id, response) }
        if mirrorChecks[id] != nil { return mirrorCheckResponded(id, response) }
        guard let index = connection(with: id), case .fetching = connections[index].state else {
            return emit(.abort(id))
        }
        if connections[index].source > 0, let requested = connections[index].requested {
            return mirrorRangeResponded(index, requested, response)
        }
        guard let requested = connections[index].requested else {
            switch response.status {
            case 200..<300 where response.status != 206:
                takeWholeBody(index, response)
            case 200..<400:
                stop(
                    index,
                    .failed(
                        DownloadError(
                            .rangeMismatch,
                            "unexpected status \(response.status) to a plain "
                                + "GET", retryable: true)))
            default:
                stop(index, .failed(origin.error(status: response.status, response: response)))
            }
            return
        }
        switch origin.checkRange(
            response, start: requested.start, end: requested.end, total: download.totalBytes,
            etag: download.etag, lastModified: download.lastModified)
        {
        case .accept:
            break
        case .restartWithBody:
            // Range ignored, or If-Range found a new version: this body is the whole file, from byte 0.
            takeWholeBody(index, response)
        case .changed:
            restart(because: "the remote file changed")
        case .mismatch:
            stop(
                index,
                .failed(
                    DownloadError(
                        .rangeMismatch,
                        "the server answered a different byte range "
                            + "(Content-Range: \(response.header("content-range") ?? "none"))", retryable: true)))
        case .httpError(416):
            restart(because: "the server cannot serve the range any more (416)")
        case .httpError(let status):
            stop(index, .failed(origin.error(status: status, response: response)))
        }
    }

    /// Stops connection `index`'s transfer from inside its callback; its end then counts as `outcome`.
    mutating func stop(_ index: Int, _ outcome: Connection.Outcome) {
        guard let id = connections[index].transfer else { return }
        connections[index].state = .stopping(id, outcome)
        emit(.abort(id))
    }

    /// This connection's 200 carries the whole file: it writes from byte 0. When the file is unchanged the server
    /// ignores Range, and the download stays on one connection; when the file changed (If-Range did not match), the
    /// new version is split again over the download's connections, each range asked for with its validator.
    mutating func takeWholeBody(_ index: Int, _ response: TransferResponse) {
        let requested = connections[index].requested
        let length =
            response.header("content-length").flatMap { Int64($0) }.flatMap { $0 >= 0 ? $0 : nil }
            ?? (requested == nil ? download.totalBytes : nil)
        let (etag, lastModified) = origin.validators(response)
        let ignoresRange = requested != nil && etag == download.etag && lastModified == download.lastModified
        if requested != nil {
            log(
                .info,
                ignoresRange
                    ? "the server ignores Range: one connection from byte 0"
                    : "the remote file changed: starting over from byte 0")
        }
        // Every other connection goes: this body is the file.
        var kept = connections[index]
        for (other, connection) in connections.enumerated() where other != index { drop(connection) }
        generation += 1
        kept.segment = 0
        kept.requested = nil
        connections = [kept]
        // The blocks reserved were for the ranged plan; this body is written as it comes, and checked as it grows.
        reserved = false
        unreservedSinceCheck = 0
        setSegments([Segment(start: 0, end: length.map { $0 - 1 })])
        download.totalBytes = length
        download.etag = etag
        download.lastModified = lastModified
        // (A playlist's stream answers so when its index is lost: it still takes ranges.)
        if ignoresRange, !download.kind.isPlaylist { download.acceptsRanges = false }
        plannedConnections = min(download.resumable ? download.connections : 1, sessionCap ?? .max)
        emit(.truncate(to: 0))
        if length != nil { emit(.measureFreeSpace) }
        // The others take halves of what this body has yet to bring (work stealing), once the file is cut back.
        if plannedConnections > 1 { fill() }
    }

    /// Ends a connection that is not the one calling back: its transfer is cancelled, its timer too.
    mutating func drop(_ connection: Connection) {
        switch connection.state {
        case .fetching(let id), .stopping(let id, _): emit(.cancel(id))
        case .backoff(let timer): emit(.cancelTimer(timer))
        }
    }

    // MARK: body

    /// Body bytes arrived: how many belong to the segment and where they go.
    mutating func received(_ id: TransferID, count: Int) {
        guard let index = connection(with: id), case .fetching = connections[index].state,
            download.segments.indices.contains(connections[index].segment)
        else { return emit(.abort(id)) }
        let segment = download.segments[connections[index].segment]
        let take = Int(min(Int64(count), segment.remaining ?? Int64.max))
        if take > 0 {
            if !reserved, let refusal = unreservedRefusal(endingAt: segment.cursor + Int64(take), count: take) {
                return stop(index, .failed(refusal))
            }
            emit(.write(id, offset: segment.cursor, count: take))
        }
        // A range split under this connection ends where its part does: on the chunk that reaches it, without
        // waiting for one more.
        guard take < count || segment.remaining == Int64(take) else { return }
        // The last byte this connection's request covers: its range's end, else the end of the file.
        let wantedEnd = connections[index].requested?.end ?? download.totalBytes.map { $0 - 1 }
        if let end = segment.end, let wantedEnd, end < wantedEnd {
            // The range was split while this connection fetched it: its part is done.
            stop(index, .reachedEnd)
        } else if take < count {
            // Not a split: the body goes on past the size the file is known to have.
            stop(
                index,
                .failed(
                    DownloadError(
                        .sizeMismatch,
                        "the server sent more than the "
                            + "\((segment.end ?? 0) + 1) bytes the file has")))
        }
    }

    /// Where the body of `id` goes from its next byte on, when every byte it brings is written as it comes: a
    /// connection fetching a segment whose end is known, of a file of known size whose blocks are reserved (no
    /// space or quota check on the way). nil when each chunk must be looked at first.
    func writeWindow(for id: TransferID) -> (start: Int64, end: Int64)? {
        guard reserved, download.totalBytes != nil, let index = connection(with: id),
            case .fetching = connections[index].state,
            download.segments.indices.contains(connections[index].segment)
        else { return nil }
        let segment = download.segments[connections[index].segment]
        guard let end = segment.end, end >= segment.cursor else { return nil }
        return (segment.cursor, end)
    }

    /// A file whose blocks were not reserved grows into free space as it comes: the largest-file limit is checked
    /// on every chunk, free space every few MiB (`measureFreeSpace`, answered by `freeSpace`).
    mutating func unreservedRefusal(endingAt end: Int64, count: Int) -> DownloadError? {
        if let maxFileSize = settings.space.maxFileSize, end > maxFileSize {
            return settings.space.refusalWhileWriting(written: end, free: .max)
        }
        if let allowance = quotaAllowance, end > allowance { return quotaRefusal(allowance) }
        unreservedSinceCheck += Int64(count)
        if unreservedSinceCheck >= settings.spaceCheckBytes {
            unreservedSinceCheck = 0
            emit(.measureFreeSpace)
        }
        return nil
    }

    /// The file would pass what its token's quota leaves it.
    func quotaRefusal(_ allowance: Int64) -> DownloadError {
        let size = download.totalBytes.map { "is \(SpacePolicy.bytes($0))" } ?? "ran past what it may hold"
        return DownloadError(
            .quotaExceeded,
            "the file \(size); the quota of the token that added it leaves "
                + "\(SpacePolicy.bytes(max(0, allowance)))")
    }

    mutating func freeSpace(_ free: Int64) {
        guard phase == .transferring, !reserved else { return }
        let written = download.segments.map(\.cursor).max() ?? 0
        let refusal =
            download.totalBytes.map {
                settings.space.refusal(total: $0, needed: $0 - written, free: free)
            } ?? settings.space.refusalWhileWriting(written: written, free: free)
        if let refusal { fail(refusal) }
    }

    mutating func wrote(_ id: TransferID, count: Int) {
        guard let index = connection(with: id) else { return }
        let segment = connections[index].segment
        guard download.segments.indices.contains(segment) else { return }
        download.segments[segment].received += Int64(count)
        let source = connections[index].source
        if source > 0, download.mirrors.indices.contains(source - 1) {
            download.mirrors[source - 1].receivedBytes += Int64(count)
            let last = download.segments[segment].cursor - 1
            noteMirrorWrite(ByteRange(last - Int64(count) + 1, last))
        }
        bytesSinceCheckpoint += Int64(count)
        if bytesSinceCheckpoint >= settings.checkpointBytes { checkpoint() }
        if !mirrorsAwaitingCheck.isEmpty { startMirrorChecks() }
    }

    mutating func writeFailed(_ id: TransferID, _ error: FileError) {
        guard let index = connection(with: id) else { return }
        connections[index].state = .stopping(id, .failed(DownloadError.file(error)))
        emit(.abort(id))
    }

}
