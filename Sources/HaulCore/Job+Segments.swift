import Foundation
import HaulLoop

/// Fetching the segments: planning, opening connections, checking each reply before its first byte is written,
/// writing at each segment's offset, retries, restarts and speed limits.
extension Job {
    /// Decides the segments: continue the journaled ones when the file can be resumed, else one plan from zero.
    func plan() {
        guard let download, let file else { return }
        let partSize = file.directory.size(file.name) ?? 0
        // Several ranges need a validator too: without one, nothing proves they come from one version.
        let ranged = download.resumable
        let segments = ResumePlan.segments(journal: download.segments, partFileSize: partSize,
                                           total: download.totalBytes, resumable: ranged,
                                           connections: download.connections, minSplit: engine.config.minSplitSize)
        if segments != download.segments {
            generation += 1
            engine.modify(id) { $0.segments = segments }
        }
        do {
            if segments.allSatisfy({ $0.received == 0 }), partSize > 0 { try file.truncate(to: 0) }
            reserved = false
            if let total = download.totalBytes {
                // What the file still needs (a resumed one holds its blocks already) must leave the reserve free;
                // then its blocks are taken now, so a full disk fails here, not hours into the transfer.
                let needed = total - (try file.usage().allocated)
                if let refusal = engine.config.space.refusal(total: total, needed: needed,
                                                              free: try file.directory.freeBytes()) {
                    return failed(refusal)
                }
                reserved = try file.reserve(total)
            }
        } catch {
            // fallocate may have taken part of the space before it ran out: `failed` gives back what is unwritten.
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
    func launch(_ connection: Connection) {
        guard let download, let file, !connection.defunct,
              download.segments.indices.contains(connection.segment) else {
            // The segments were replaced while this connection waited (a restart): it has nothing to fetch.
            engine.releaseConnection(to: host)
            connections.removeAll { $0 === connection }
            return
        }
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
            request.ifRange = download.validator
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
    func check(_ connection: Connection, _ response: TransferResponse) -> Bool {
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
    func takeWholeBody(_ connection: Connection, _ response: TransferResponse) -> Bool {
        guard let download, let file else { return false }
        let length = response.header("content-length").flatMap { Int64($0) }
            ?? (connection.requested == nil ? download.totalBytes : nil)
        let etag = Probe.strongETag(response.header("etag"))
        let lastModified = Probe.lastModified(response.header("last-modified"))
        let ignoresRange = connection.requested != nil && etag == download.etag && lastModified == download.lastModified
        if connection.requested != nil {
            log.info(ignoresRange ? "the server ignores Range: one connection from byte 0"
                                  : "the remote file changed: starting over from byte 0", meta)
        }
        for other in connections where other !== connection { other.defunct = true }
        if connection.requested != nil { plannedConnections = 1 }
        if let length, let refusal = engine.config.space.refusal(total: length, needed: length,
                                                                   free: (try? file.directory.freeBytes()) ?? .max) {
            connection.verdict = refusal
            return false
        }
        generation += 1
        connection.segment = 0
        connection.requested = nil
        // The blocks reserved were for the ranged plan; this body is written as it comes, and checked as it grows.
        reserved = false
        engine.modify(id) {
            $0.segments = [Segment(start: 0, end: length.map { $0 - 1 })]
            $0.totalBytes = length
            $0.etag = etag
            $0.lastModified = lastModified
            if ignoresRange { $0.acceptsRanges = false }
        }
        do {
            try file.truncate(to: 0)
        } catch {
            connection.verdict = Job.fileError(error)
            return false
        }
        if connections.count > 1 { scheduleSweep(then: nil) }
        return true
    }

    func write(_ connection: Connection, _ chunk: TransferChunk) -> ChunkDecision {
        guard !connection.defunct, let file, let segments = download?.segments,
              segments.indices.contains(connection.segment) else { return .abort }
        let segment = segments[connection.segment]
        let room = segment.remaining ?? Int64.max
        let take = Int(min(Int64(chunk.count), room))
        if take > 0 {
            if let wait = limitDelay(take), wait > 0 {
                hold(connection, for: wait)
                return .pause
            }
            if let refusal = spaceRefusal(writing: take, endingAt: segment.cursor + Int64(take)) {
                connection.verdict = refusal
                return .abort
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
            // The last byte this connection's request covers: its range's end, else the end of the file.
            let wantedEnd = connection.requested?.end ?? download?.totalBytes.map { $0 - 1 }
            if let end = segment.end, let wantedEnd, end < wantedEnd {
                // The range was split while this connection fetched it: its part is done.
                connection.reachedEnd = true
            } else {
                // Not a split: the body goes on past the size the file is known to have.
                connection.verdict = DownloadError(.sizeMismatch, "the server sent more than the "
                    + "\((segment.end ?? 0) + 1) bytes the file has")
            }
            return .abort
        }
        return .consumed
    }

    /// Why `count` more bytes, ending at offset `end`, must not be written: a file whose blocks were not reserved
    /// (size unknown, or a file system without fallocate) grows into free space as it comes, so the largest-file
    /// limit is checked on every chunk and the free space every 4 MiB. nil for a reserved file.
    func spaceRefusal(writing count: Int, endingAt end: Int64) -> DownloadError? {
        guard !reserved else { return nil }
        unreservedSinceCheck += Int64(count)
        let space = engine.config.space
        if let maxFileSize = space.maxFileSize, end > maxFileSize {
            return space.refusalWhileWriting(written: end, free: .max)
        }
        guard unreservedSinceCheck >= 4 << 20, let free = try? file?.directory.freeBytes() else { return nil }
        unreservedSinceCheck = 0
        return space.refusalWhileWriting(written: end, free: free - Int64(count))
    }

    /// Seconds until `count` bytes fit this download's and the global speed limits, spending them if they fit
    /// now; nil without limits.
    func limitDelay(_ count: Int) -> Double? {
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
    func hold(_ connection: Connection, for seconds: Double) {
        let timer = LoopTimer(loop: engine.loop, delay: seconds, priority: .transfer) { [weak connection] in
            connection?.resumeTimer = nil
            connection?.transfer?.resume()
        }
        connection.resumeTimer = timer
        timer.start()
    }

    func ended(_ connection: Connection, _ result: TransferResult) {
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
        guard let segments = download?.segments, segments.indices.contains(connection.segment) else { return }
        let segment = segments[connection.segment]
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
    func connectionFailed(_ connection: Connection, _ error: DownloadError) {
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
    func restartAll(because reason: String) {
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
    func scheduleSweep(then: (() -> Void)?) {
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
}
