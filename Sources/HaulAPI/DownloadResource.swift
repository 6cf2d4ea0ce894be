import HaulCore

/// The download resource of the API contract, built from an engine snapshot. Request headers are never included
/// and credentials in URLs are redacted.
enum DownloadResource {
    static func json(_ snapshot: DownloadSnapshot) -> JSONValue {
        let d = snapshot.download
        let progress: JSONValue
        if let total = d.totalBytes {
            progress = .number(total == 0 ? (d.state == .completed ? 1 : 0) : Double(d.receivedBytes) / Double(total))
        } else {
            progress = .null
        }
        return .object([
            ("id", .string(d.id)),
            ("url", .string(Redact.url(d.url))),
            ("final_url", JSONValue(d.finalURL.map(Redact.url))),
            ("filename", JSONValue(d.filename)),
            ("path", JSONValue(d.relativePath)),
            ("state", .string(d.state.rawValue)),
            ("total_bytes", JSONValue(d.totalBytes)),
            ("received_bytes", JSONValue(d.receivedBytes)),
            ("progress", progress),
            ("speed", .number(snapshot.speed.rounded())),
            ("eta_seconds", snapshot.etaSeconds.map { .number($0.rounded(.up)) } ?? .null),
            ("connections", JSONValue(d.connections)),
            ("active_connections", JSONValue(snapshot.activeConnections)),
            ("resumable", .bool(d.resumable)),
            ("segments", .array(segments(d))),
            ("checksum", .null),
            ("priority", JSONValue(d.priority)),
            ("max_speed", JSONValue(d.maxSpeed)),
            ("error", d.error.map { .object([("code", .string($0.code.rawValue)), ("message", .string($0.message))]) }
                ?? .null),
            ("attempts", JSONValue(d.attempts)),
            ("created_at", .string(Timestamp.rfc3339(d.createdAt))),
            ("updated_at", .string(Timestamp.rfc3339(d.updatedAt))),
            ("started_at", JSONValue(d.startedAt.map(Timestamp.rfc3339))),
            ("completed_at", JSONValue(d.completedAt.map(Timestamp.rfc3339))),
        ])
    }

    /// One connection for now: a single segment covering the file.
    private static func segments(_ d: Download) -> [JSONValue] {
        if let total = d.totalBytes {
            guard total > 0 else { return [] }
            return [.object([("start", JSONValue(0)), ("end", JSONValue(total - 1)),
                             ("received", JSONValue(d.receivedBytes))])]
        }
        guard d.receivedBytes > 0 || d.state == .downloading else { return [] }
        return [.object([("start", JSONValue(0)), ("end", .null), ("received", JSONValue(d.receivedBytes))])]
    }
}
