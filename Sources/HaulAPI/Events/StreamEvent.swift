import HaulCore

/// One server-sent event: a server-wide sequence number, a kind, and the download it is about. Its JSON is made
/// the first time a client needs it, so events nobody is listening to cost no serialization.
final class StreamEvent {
    enum Kind: String {
        case created, progress, state, removed
    }

    enum Payload {
        case download(DownloadSnapshot)
        case removed(String)
    }

    let sequence: Int64
    let kind: Kind
    let downloadID: String
    /// The download's category, for streams that follow one (`?category=`).
    let category: String?
    /// The token that added the download: a stream of a token with a root carries only its own.
    let owner: String?
    private let payload: Payload

    init(sequence: Int64, kind: Kind, downloadID: String, category: String?, owner: String?, payload: Payload) {
        self.sequence = sequence
        self.kind = kind
        self.downloadID = downloadID
        self.category = category
        self.owner = owner
        self.payload = payload
    }

    /// The `data:` payload, JSON on one line; and with the download's `owner`, for managers' streams.
    lazy var data: String = serialized(owner: false)
    lazy var dataWithOwner: String = serialized(owner: true)

    private func serialized(owner: Bool) -> String {
        switch payload {
        case .download(let snapshot):
            return String(decoding: DownloadResource.bytes(snapshot, owner: owner), as: UTF8.self)
        case .removed(let id):
            return JSONValue.object([("id", .string(id))]).serialized()
        }
    }

    /// The event in `text/event-stream` form, with the owner or without.
    func wire(owner: Bool) -> String {
        "id: \(sequence)\nevent: \(kind.rawValue)\ndata: \(owner ? dataWithOwner : data)\n\n"
    }
}
