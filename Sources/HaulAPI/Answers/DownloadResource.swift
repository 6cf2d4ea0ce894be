import HaulCore

/// The download resource of the API contract, built from an engine snapshot, with the options the option table
/// shows. Request headers are never included and credentials in URLs are redacted. `owner` (the name of the token
/// that added it) is shown to managers and admins only.
enum DownloadResource {
    static func json(_ snapshot: DownloadSnapshot, owner: Bool) -> JSONValue {
        let d = snapshot.download
        let progress: JSONValue
        if let total = d.totalBytes {
            progress = .number(total == 0 ? (d.state == .completed ? 1 : 0) : Double(d.receivedBytes) / Double(total))
        } else if let hls = d.hls, hls.segmentsTotal > 0 {
            // A playlist's output has no size until its end: its segments tell how far it is.
            progress = .number(Double(hls.segmentsDone) / Double(hls.segmentsTotal))
        } else {
            progress = .null
        }
        var members: [(String, JSONValue)] = [
            ("id", .string(d.id)),
            ("url", .string(Redact.url(d.url))),
            ("final_url", JSONValue(d.finalURL.map(Redact.url))),
            ("path", JSONValue(d.relativePath ?? requestedPath(d))),
            ("state", .string(d.state.rawValue)),
            ("total_bytes", JSONValue(d.totalBytes)),
            ("received_bytes", JSONValue(d.receivedBytes)),
            ("progress", progress),
            ("speed", .number(snapshot.speed.rounded())),
            ("eta_seconds", snapshot.etaSeconds.map { .number($0.rounded(.up)) } ?? .null),
            ("active_connections", JSONValue(snapshot.activeConnections)),
            // A playlist's stream resumes too, from the byte the journal vouches for, of the same playlist.
            ("resumable", .bool(d.resumable || d.streamResumable)),
            ("segments", .array(segments(d))),
            // What a reader may take now: the ranges on disk, [start, end) and merged, and the bytes from 0.
            ("available", .array(d.available.map { .array([JSONValue($0.first), JSONValue($0.last + 1)]) })),
            ("contiguous_bytes", JSONValue(d.contiguousBytes)),
            ("content_type", JSONValue(d.contentType)),
            ("hls", d.hls?.json ?? .null),
            ("torrent", d.torrent?.json ?? .null),
            (
                "mirrors",
                .array(
                    d.mirrors.enumerated().map { index, m in
                        .object([
                            ("url", .string(Redact.url(m.url))),
                            ("state", .string(m.state.rawValue)),
                            ("reason", JSONValue(m.reason)),
                            ("received_bytes", JSONValue(m.receivedBytes)),
                            (
                                "speed",
                                .number(
                                    (index < snapshot.mirrorSpeeds.count ? snapshot.mirrorSpeeds[index] : 0)
                                        .rounded())
                            ),
                            ("errors", JSONValue(Int64(m.errors))),
                        ])
                    })
            ),
            ("error", error(d.error)),
            ("last_error", error(snapshot.lastError)),
            ("next_attempt_at", JSONValue(snapshot.nextAttemptAt.map(Timestamp.rfc3339))),
            ("attempts", JSONValue(d.attempts)),
            ("created_at", .string(Timestamp.rfc3339(d.createdAt))),
            ("updated_at", .string(Timestamp.rfc3339(d.updatedAt))),
            ("started_at", JSONValue(d.startedAt.map(Timestamp.rfc3339))),
            ("completed_at", JSONValue(d.completedAt.map(Timestamp.rfc3339))),
            ("node", JSONValue(d.node)),
            ("queue_order", JSONValue(d.queueOrder)),
            ("completed_directory", JSONValue(d.completedDirectory)),
            ("moved", .bool(d.moved)),
            ("move_error", JSONValue(d.moveError)),
            ("hook", hook(d)),
        ]
        DownloadOptions.show(d, into: &members)
        if owner { members.append(("owner", JSONValue(d.ownerName))) }
        return .object(members)
    }

    /// The operator's hook: due, or how the last one ended; null when none ran or is due.
    private static func hook(_ d: Download) -> JSONValue {
        guard d.hookPending || d.hookAt != nil else { return .null }
        return .object([
            ("pending", .bool(d.hookPending)), ("status", JSONValue(d.hookStatus.map(Int64.init))),
            ("error", JSONValue(d.hookError)), ("at", JSONValue(d.hookAt.map(Timestamp.rfc3339))),
        ])
    }

    private static func requestedPath(_ d: Download) -> String? {
        d.requestedFilename.map { d.directory.isEmpty ? $0 : d.directory + "/" + $0 }
    }

    private static func error(_ error: DownloadError?) -> JSONValue {
        error.map { .object([("code", .string($0.code.rawValue)), ("message", .string($0.message))]) } ?? .null
    }

    /// In file order; an empty file has none.
    private static func segments(_ d: Download) -> [JSONValue] {
        d.segments.filter { segment in segment.end.map { $0 >= segment.start } ?? true }
            .sorted { $0.start < $1.start }
            .map {
                .object([
                    ("start", JSONValue($0.start)), ("end", JSONValue($0.end)),
                    ("received", JSONValue($0.received)),
                ])
            }
    }
}
