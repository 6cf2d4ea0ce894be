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
            w.member("id", d.id)
            w.member("url", Redact.url(d.url))
            w.member("final_url", d.finalURL.map(Redact.url))
            w.member("path", d.relativePath ?? requestedPath(d))
            w.member("state", d.state.rawValue)
            w.member("total_bytes", d.totalBytes)
            w.member("received_bytes", d.receivedBytes)
            w.key("progress")
            if let total = d.totalBytes {
                w.number(total == 0 ? (d.state == .completed ? 1 : 0) : Double(d.receivedBytes) / Double(total))
            } else if let hls = d.hls, hls.segmentsTotal > 0 {
                // A playlist's output has no size until its end: its segments tell how far it is.
                w.number(Double(hls.segmentsDone) / Double(hls.segmentsTotal))
            } else {
                w.null()
            }
            w.member("speed", number: snapshot.speed.rounded())
            w.member("eta_seconds", number: snapshot.etaSeconds.map { $0.rounded(.up) })
            w.member("active_connections", snapshot.activeConnections)
            // A playlist's stream resumes too, from the byte the journal vouches for, of the same playlist.
            w.member("resumable", d.resumable || d.streamResumable)
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
            w.member("contiguous_bytes", d.contiguousBytes)
            w.member("content_type", d.contentType)
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
            w.member("next_attempt_at", snapshot.nextAttemptAt.map(Timestamp.rfc3339))
            w.member("attempts", d.attempts)
            w.member("created_at", Timestamp.rfc3339(d.createdAt))
            w.member("updated_at", Timestamp.rfc3339(d.updatedAt))
            w.member("started_at", d.startedAt.map(Timestamp.rfc3339))
            w.member("completed_at", d.completedAt.map(Timestamp.rfc3339))
            w.member("node", d.node)
            w.member("queue_order", d.queueOrder)
            w.member("completed_directory", d.completedDirectory)
            w.member("moved", d.moved)
            w.member("move_error", d.moveError)
            w.key("hook")
            hook(d, into: &w)
            DownloadOptions.show(d, into: &w)
            if owner {
                w.member("owner", d.ownerName)
            }
        }
    }

    private static func mirrors(_ snapshot: DownloadSnapshot, into w: inout JSONWriter) {
        w.array { w in
            for (index, m) in snapshot.download.mirrors.enumerated() {
                w.object { w in
                    w.member("url", Redact.url(m.url))
                    w.member("state", m.state.rawValue)
                    w.member("reason", m.reason)
                    w.member("received_bytes", m.receivedBytes)
                    w.member(
                        "speed",
                        number: (index < snapshot.mirrorSpeeds.count ? snapshot.mirrorSpeeds[index] : 0).rounded())
                    w.member("errors", Int64(m.errors))
                }
            }
        }
    }

    /// The operator's hook: due, or how the last one ended; null when none ran or is due.
    private static func hook(_ d: Download, into w: inout JSONWriter) {
        guard d.hookPending || d.hookAt != nil else { return w.null() }
        w.object { w in
            w.member("pending", d.hookPending)
            w.member("status", d.hookStatus.map(Int64.init))
            w.member("error", d.hookError)
            w.member("at", d.hookAt.map(Timestamp.rfc3339))
        }
    }

    private static func requestedPath(_ d: Download) -> String? {
        d.requestedFilename.map { d.directory.isEmpty ? $0 : d.directory + "/" + $0 }
    }

    private static func error(_ error: DownloadError?, into w: inout JSONWriter) {
        guard let error else { return w.null() }
        w.object { w in
            w.member("code", error.code.rawValue)
            w.member("message", error.message)
        }
    }

    /// In file order; an empty file has none.
    private static func segments(_ d: Download, into w: inout JSONWriter) {
        let shown = d.segments.filter { segment in segment.end.map { $0 >= segment.start } ?? true }
        w.array { w in
            for segment in shown.sorted(by: { $0.start < $1.start }) {
                w.object { w in
                    w.member("start", segment.start)
                    w.member("end", segment.end)
                    w.member("received", segment.received)
                }
            }
        }
    }
}
