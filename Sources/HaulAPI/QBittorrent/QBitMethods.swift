import FoundationEssentials
import HaulCore
import HaulLoop

/// One call of qBittorrent's Web API: the operation it is (the scope a token needs, whether it changes anything:
/// the gate's rules, as for a REST route) and what answers it.
struct QBitMethod: Sendable {
    typealias Answer = @Sendable (QBittorrentAPI, QBitCall) throws(QBitError) -> QBitAnswer

    let operation: Operation
    let answer: Answer

    init(_ operation: Operation, _ answer: @escaping Answer) {
        self.operation = operation
        self.answer = answer
    }
}

/// What a call answers with: plain text (`Ok.`, `v4.5.2`, often nothing) or JSON.
enum QBitAnswer {
    case text(String)
    case json(JSONValue)
    /// A list of downloads (`torrents/info`), and the ids of those it may show.
    case listing(JSONValue, showing: [String])

    static let done = QBitAnswer.text("")
}

/// A call as its answer reads it: its parameters, the request, and the operations done for its caller.
struct QBitCall {
    let path: String
    let form: QBitForm
    let request: HTTPRequest
    let operations: Operations
    /// Whose `sync/maindata` state this is (a session's, or a caller's without one).
    let syncKey: String

    var caller: Caller { operations.caller }

    /// A parameter qBittorrent requires: 400 without it.
    func required(_ name: String) throws(QBitError) -> String {
        guard let value = form[name] else { throw QBitError(400, "Bad Request") }
        return value
    }

    /// `hashes`: info-hashes joined by `|`, or `all`.
    func hashes() throws(QBitError) -> Set<String>? {
        let text = try required("hashes")
        if text.lowercased() == "all" { return nil }
        return Set(text.split(separator: "|").map { $0.lowercased() })
    }
}

extension QBittorrentAPI {
    /// qBittorrent's version and Web API version the front answers as (4.5.2's), which clients check.
    static let version = "v4.5.2"
    static let webAPIVersion = "2.8.19"

    /// Every call answered, by path under /api/v2/.
    static let methods: [String: QBitMethod] = [
        // Answered before the table is read (sessions): here for the method check and the list.
        "auth/login": QBitMethod(.version) { _, _ in .done },
        "auth/logout": QBitMethod(.version) { _, _ in .done },
        "app/version": QBitMethod(.version) { _, _ in .text(version) },
        "app/webapiVersion": QBitMethod(.version) { _, _ in .text(webAPIVersion) },
        "app/buildInfo": QBitMethod(.version) { _, _ in
            .json(
                .object([
                    ("bitness", .number(64)), ("boost", .string("")), ("libtorrent", .string("2.0.8.0")),
                    ("openssl", .string("")), ("qt", .string("")), ("zlib", .string("")),
                ]))
        },
        "app/preferences": QBitMethod(.getSettings) { api, call in .json(api.preferences(call)) },
        "app/setPreferences": QBitMethod(.changeSettings) { api, call throws(QBitError) in
            try api.setPreferences(call)
        },
        "app/defaultSavePath": QBitMethod(.getSettings) { api, call in .text(api.callersRoot(call.caller)) },
        "torrents/info": QBitMethod(.listDownloads) { api, call throws(QBitError) in try api.info(call) },
        "torrents/properties": QBitMethod(.getDownload) { api, call throws(QBitError) in
            .json(try api.torrent(call, call.required("hash")).properties)
        },
        "torrents/files": QBitMethod(.getDownload) { api, call throws(QBitError) in
            .json(try api.torrent(call, call.required("hash")).files)
        },
        "torrents/trackers": QBitMethod(.getDownload) { api, call throws(QBitError) in
            let torrent = try api.torrent(call, call.required("hash"))
            let bittorrent = api.base.config.bittorrent
            return .json(torrent.trackersJSON(dht: bittorrent.dht, lsd: bittorrent.lsd))
        },
        "torrents/add": QBitMethod(.addDownloads) { api, call throws(QBitError) in try api.add(call) },
        "torrents/delete": QBitMethod(.removeDownload) { api, call throws(QBitError) in try api.delete(call) },
        "torrents/pause": QBitMethod(.changeDownload) { api, call throws(QBitError) in
            try api.change(call, DownloadChanges(state: .paused))
        },
        "torrents/resume": QBitMethod(.changeDownload) { api, call throws(QBitError) in
            try api.change(call, DownloadChanges(state: .queued))
        },
        // qBittorrent 5's names for the same.
        "torrents/stop": QBitMethod(.changeDownload) { api, call throws(QBitError) in
            try api.change(call, DownloadChanges(state: .paused))
        },
        "torrents/start": QBitMethod(.changeDownload) { api, call throws(QBitError) in
            try api.change(call, DownloadChanges(state: .queued))
        },
        "torrents/setCategory": QBitMethod(.changeDownload) { api, call throws(QBitError) in
            try api.setCategory(call)
        },
        "torrents/categories": QBitMethod(.listCategories) { api, call in .json(api.categoriesJSON(call)) },
        "torrents/createCategory": QBitMethod(.putCategory) { api, call throws(QBitError) in
            try api.putCategory(call, creating: true)
        },
        "torrents/editCategory": QBitMethod(.putCategory) { api, call throws(QBitError) in
            try api.putCategory(call, creating: false)
        },
        "torrents/removeCategories": QBitMethod(.removeCategory) { api, call throws(QBitError) in
            try api.removeCategories(call)
        },
        "torrents/tags": QBitMethod(.listDownloads) { api, call in .json(.array(api.tags(call).map { .string($0) })) },
        "torrents/addTags": QBitMethod(.changeDownload) { api, call throws(QBitError) in
            try api.retag(call, adding: true)
        },
        "torrents/removeTags": QBitMethod(.changeDownload) { api, call throws(QBitError) in
            try api.retag(call, adding: false)
        },
        "torrents/createTags": QBitMethod(.changeDownload) { api, call throws(QBitError) in
            try api.createTags(call)
        },
        "torrents/deleteTags": QBitMethod(.changeDownload) { api, call throws(QBitError) in
            try api.deleteTags(call)
        },
        "torrents/setShareLimits": QBitMethod(.changeDownload) { api, call throws(QBitError) in
            try api.setShareLimits(call)
        },
        "torrents/setDownloadLimit": QBitMethod(.changeDownload) { api, call throws(QBitError) in
            try api.setDownloadLimit(call)
        },
        "torrents/topPrio": QBitMethod(.changeDownload) { api, call throws(QBitError) in try api.move(call, .top) },
        "torrents/bottomPrio": QBitMethod(.changeDownload) { api, call throws(QBitError) in
            try api.move(call, .bottom)
        },
        "torrents/increasePrio": QBitMethod(.changeDownload) { api, call throws(QBitError) in try api.move(call, .up) },
        "torrents/decreasePrio": QBitMethod(.changeDownload) { api, call throws(QBitError) in
            try api.move(call, .down)
        },
        "torrents/setForceStart": QBitMethod(.changeDownload) { api, call throws(QBitError) in
            try api.forceStart(call)
        },
        "torrents/recheck": QBitMethod(.changeDownload) { api, call throws(QBitError) in try api.recheck(call) },
        "transfer/info": QBitMethod(.stats) { api, call in .json(.object(api.transferInfo(call))) },
        "sync/maindata": QBitMethod(.listDownloads) { api, call throws(QBitError) in try api.mainData(call) },
    ]
}
