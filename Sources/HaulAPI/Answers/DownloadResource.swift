import HaulCore

/// The download resource of the API contract, built from an engine snapshot, with the options the option table
/// shows. Request headers are never included and credentials in URLs are redacted. `owner` (the name of the token
/// that added it) is shown to managers and admins only.
enum DownloadResource {
    /// The resource's bytes: what a status read, a page and an event send.
    static func bytes(_ snapshot: DownloadSnapshot, owner: Bool) -> [UInt8] {
        var writer = JSONWriter()
        write(snapshot, owner: owner, into: &writer)
        return writer.bytes
    }

    /// Writes the resource straight into `w`, member by member in the contract's order.
    static func write(_ snapshot: DownloadSnapshot, owner: Bool, into w: inout JSONWriter) {
        let d = snapshot.download
        w.object { w in
            w.key("id")
            w.string(d.id)
            w.key("url")
            w.string(Redact.url(d.url))
            w.key("final_url")
            w.string(d.finalURL.map(Redact.url))
            w.key("path")
            w.string(d.relativePath ?? requestedPath(d))
            w.key("state")
            w.string(d.state.rawValue)
            w.key("total_bytes")
            w.integer(d.totalBytes)
            w.key("received_bytes")
            w.integer(d.receivedBytes)
            w.key("progress")
            if let total = d.totalBytes {
                w.number(total == 0 ? (d.state == .completed ? 1 : 0) : Double(d.receivedBytes) / Double(total))
            } else if let hls = d.hls, hls.segmentsTotal > 0 {
                // A playlist's output has no size until its end: its segments tell how far it is.
                w.number(Double(hls.segmentsDone) / Double(hls.segmentsTotal))
            } else {
                w.null()
            }
            w.key("speed")
            w.number(snapshot.speed.rounded())
            w.key("eta_seconds")
            w.number(snapshot.etaSeconds.map { $0.rounded(.up) })
            w.key("active_connections")
            w.integer(snapshot.activeConnections)
            // A playlist's stream resumes too, from the byte the journal vouches for, of the same playlist.
            w.key("resumable")
            w.bool(d.resumable || d.streamResumable)
            w.key("segments")
            segments(d, into: &w)
            // What a reader may take now: the ranges on disk, [start, end) and merged, and the bytes from 0.
            w.key("available")
            w.array { w in
                for range in d.available {
                    w.array { w in
                        w.integer(range.first)
                        w.integer(range.last + 1)
                    }
                }
            }
            w.key("contiguous_bytes")
            w.integer(d.contiguousBytes)
            w.key("content_type")
            w.string(d.contentType)
            w.key("hls")
            w.value(d.hls?.json ?? .null)
            w.key("torrent")
            w.value(d.torrent?.json ?? .null)
            w.key("mirrors")
            mirrors(snapshot, into: &w)
            w.key("error")
            error(d.error, into: &w)
            w.key("last_error")
            error(snapshot.lastError, into: &w)
            w.key("next_attempt_at")
            w.string(snapshot.nextAttemptAt.map(Timestamp.rfc3339))
            w.key("attempts")
            w.integer(d.attempts)
            w.key("created_at")
            w.string(Timestamp.rfc3339(d.createdAt))
            w.key("updated_at")
            w.string(Timestamp.rfc3339(d.updatedAt))
            w.key("started_at")
            w.string(d.startedAt.map(Timestamp.rfc3339))
            w.key("completed_at")
            w.string(d.completedAt.map(Timestamp.rfc3339))
            w.key("node")
            w.string(d.node)
            w.key("queue_order")
            w.integer(d.queueOrder)
            w.key("completed_directory")
            w.string(d.completedDirectory)
            w.key("moved")
            w.bool(d.moved)
            w.key("move_error")
            w.string(d.moveError)
            w.key("hook")
            hook(d, into: &w)
            DownloadOptions.show(d, into: &w)
            if owner {
                w.key("owner")
                w.string(d.ownerName)
            }
        }
    }

    private static func mirrors(_ snapshot: DownloadSnapshot, into w: inout JSONWriter) {
        w.array { w in
            for (index, m) in snapshot.download.mirrors.enumerated() {
                w.object { w in
                    w.key("url")
                    w.string(Redact.url(m.url))
                    w.key("state")
                    w.string(m.state.rawValue)
                    w.key("reason")
                    w.string(m.reason)
                    w.key("received_bytes")
                    w.integer(m.receivedBytes)
                    w.key("speed")
                    w.number((index < snapshot.mirrorSpeeds.count ? snapshot.mirrorSpeeds[index] : 0).rounded())
                    w.key("errors")
                    w.integer(Int64(m.errors))
                }
            }
        }
    }

    /// The operator's hook: due, or how the last one ended; null when none ran or is due.
    private static func hook(_ d: Download, into w: inout JSONWriter) {
        guard d.hookPending || d.hookAt != nil else { return w.null() }
        w.object { w in
            w.key("pending")
            w.bool(d.hookPending)
            w.key("status")
            w.integer(d.hookStatus.map(Int64.init))
            w.key("error")
            w.string(d.hookError)
            w.key("at")
            w.string(d.hookAt.map(Timestamp.rfc3339))
        }
    }

    private static func requestedPath(_ d: Download) -> String? {
        d.requestedFilename.map { d.directory.isEmpty ? $0 : d.directory + "/" + $0 }
    }

    private static func error(_ error: DownloadError?, into w: inout JSONWriter) {
        guard let error else { return w.null() }
        w.object { w in
            w.key("code")
            w.string(error.code.rawValue)
            w.key("message")
            w.string(error.message)
        }
    }

    /// In file order; an empty file has none.
    private static func segments(_ d: Download, into w: inout JSONWriter) {
        let shown = d.segments.filter { segment in segment.end.map { $0 >= segment.start } ?? true }
        w.array { w in
            for segment in shown.sorted(by: { $0.start < $1.start }) {
                w.object { w in
                    w.key("start")
                    w.integer(segment.start)
                    w.key("end")
                    w.integer(segment.end)
                    w.key("received")
                    w.integer(segment.received)
                }
            }
        }
    }
}
