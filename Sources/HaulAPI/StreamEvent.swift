import HaulCore

/// One server-sent event: a server-wide sequence number, a kind, and the download it is about.
struct StreamEvent {
    enum Kind: String {
        case created, progress, state, removed, snapshot
    }

    let sequence: Int64
    let kind: Kind
    /// nil for a snapshot, which is about every download.
    let downloadID: String?
    /// The `data:` payload, JSON on one line.
    let data: String

    /// The event in `text/event-stream` form.
    var wire: String { "id: \(sequence)\nevent: \(kind.rawValue)\ndata: \(data)\n\n" }
}
