import HaulCore

/// What aria2 tells its WebSockets as downloads change, worked out as a value: a change in, the notifications to
/// send out. A start is told once however many active states it passes through; a removal is a stop only for a
/// download that had not finished (forgetting a result is no stop); while a socket's call is being answered, what
/// the call causes (a start, on adding) waits and follows the answer, as aria2 sends them.
struct Aria2Notifier {
    /// One notification: its method, the download's GID, and the token that added the download (whose sockets
    /// may hear of it).
    struct Notification: Equatable {
        var method: String
        var gid: String
        var owner: String?

        var message: [UInt8] {
            JSONValue.object([
                ("jsonrpc", .string("2.0")), ("method", .string(method)),
                ("params", .array([.object([("gid", .string(gid))])])),
            ]).serializedBytes()
        }
    }

    static let methods = [
        "aria2.onDownloadStart", "aria2.onDownloadPause", "aria2.onDownloadStop",
        "aria2.onDownloadComplete", "aria2.onDownloadError", "aria2.onBtDownloadComplete",
    ]

    /// The aria2 status last told of each download that changed state.
    private var lastStatus: [String: String] = [:]
    /// The token that added each download told of (kept for its removal, when it is gone).
    private var owners: [String: String?] = [:]
    private var answering = false
    private var held: [Notification] = []

    /// A socket's call is being answered: what follows waits for its answer.
    mutating func answerStarted() { answering = true }

    /// The answer went: what waited for it, in order.
    mutating func answerSent() -> [Notification] {
        answering = false
        defer { held.removeAll() }
        return held
    }

    /// What to send now for `change`; `download` is the download as it stands after an update.
    mutating func changed(_ change: EngineChange, download: Download?) -> [Notification] {
        switch change {
        case .created: return []
        case .updated(let id, let stateChanged):
            guard stateChanged, let download else { return [] }
            owners[id] = download.owner
            let now = Aria2Status.status(download.state)
            guard lastStatus.updateValue(now, forKey: id) != now else { return [] }
            let method: String
            switch now {
            case "active": method = "aria2.onDownloadStart"
            case "paused": method = "aria2.onDownloadPause"
            case "complete": method = "aria2.onDownloadComplete"
            case "error": method = "aria2.onDownloadError"
            default: return []
            }
            return send(Notification(method: method, gid: Aria2GIDs.gid(of: id), owner: download.owner))
        case .removed(let id, let last):
            lastStatus.removeValue(forKey: id)
            // Told to the sockets of the token that added it, which only this remembers now.
            let owner = owners.removeValue(forKey: id) ?? nil
            guard !last.isFinished else { return [] }
            return send(Notification(method: "aria2.onDownloadStop", gid: Aria2GIDs.gid(of: id), owner: owner))
        }
    }

    /// `notification` now, or after the answer being written.
    private mutating func send(_ notification: Notification) -> [Notification] {
        guard !answering else {
            held.append(notification)
            return []
        }
        return [notification]
    }

    /// No socket is open: nothing told is remembered.
    mutating func forget() {
        lastStatus.removeAll()
        owners.removeAll()
    }
}
