import FoundationEssentials
import HaulCore
import HaulLoop

/// What `sync/maindata` last sent one client, so the next answer (asked with that `rid`) holds only what changed:
/// the torrents' changed members, the torrents, categories and tags gone, the totals that moved. An `rid` it does
/// not hold (0, an old one, another session's) gets everything (`full_update`).
struct QBitSync {
    var rid = 0
    var torrents: [String: [(String, JSONValue)]] = [:]
    var categories: [String: JSONValue] = [:]
    var tags: Set<String> = []
    var server: [(String, JSONValue)] = []

    /// The answer to a request with `asked`, and what this client then holds.
    mutating func answer(
        asked: Int, torrents now: [String: [(String, JSONValue)]], categories nowCategories: [String: JSONValue],
        tags nowTags: Set<String>, server nowServer: [(String, JSONValue)]
    ) -> JSONValue {
        let full = asked == 0 || asked != rid
        // rid counts answers; it wraps long before it could overflow.
        rid = rid % 1_000_000 + 1
        var members: [(String, JSONValue)] = []
        if full {
            members = [
                ("categories", .object(nowCategories.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })),
                ("full_update", .bool(true)),
                ("rid", .number(Double(rid))),
                ("server_state", .object(nowServer)),
                ("tags", .array(nowTags.sorted().map { .string($0) })),
                ("torrents", .object(now.sorted { $0.key < $1.key }.map { ($0.key, .object($0.value)) })),
                ("trackers", .object([])),
            ]
        } else {
            let changedCategories = nowCategories.filter { categories[$0.key] != $0.value }
            if !changedCategories.isEmpty {
                members.append(
                    ("categories", .object(changedCategories.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })))
            }
            let goneCategories = categories.keys.filter { nowCategories[$0] == nil }.sorted()
            if !goneCategories.isEmpty {
                members.append(("categories_removed", .array(goneCategories.map { .string($0) })))
            }
            members.append(("rid", .number(Double(rid))))
            let serverChanges = QBitSync.changed(from: server, to: nowServer)
            if !serverChanges.isEmpty { members.append(("server_state", .object(serverChanges))) }
            let newTags = nowTags.subtracting(tags).sorted()
            if !newTags.isEmpty { members.append(("tags", .array(newTags.map { .string($0) }))) }
            let goneTags = tags.subtracting(nowTags).sorted()
            if !goneTags.isEmpty { members.append(("tags_removed", .array(goneTags.map { .string($0) }))) }
            var changed: [(String, JSONValue)] = []
            for (hash, item) in now.sorted(by: { $0.key < $1.key }) {
                let members = torrents[hash].map { QBitSync.changed(from: $0, to: item) } ?? item
                if !members.isEmpty { changed.append((hash, .object(members))) }
            }
            if !changed.isEmpty { members.append(("torrents", .object(changed))) }
            let gone = torrents.keys.filter { now[$0] == nil }.sorted()
            if !gone.isEmpty { members.append(("torrents_removed", .array(gone.map { .string($0) }))) }
        }
        torrents = now
        categories = nowCategories
        tags = nowTags
        server = nowServer
        return .object(members)
    }

    /// The members of `new` whose value differs from `old`'s (or that `old` lacks).
    static func changed(from old: [(String, JSONValue)], to new: [(String, JSONValue)]) -> [(String, JSONValue)] {
        var before: [String: JSONValue] = [:]
        for (name, value) in old { before[name] = value }
        return new.filter { before[$0.0] != $0.1 }
    }
}

extension QBittorrentAPI {
    /// `sync/maindata?rid=N`.
    func mainData(_ call: QBitCall) throws(QBitError) -> QBitAnswer {
        let asked = Int(clamping: try call.form.integer("rid") ?? 0)
        var torrents: [String: [(String, JSONValue)]] = [:]
        for torrent in self.torrents(call) { torrents[torrent.hash] = torrent.info(withHash: false) }
        var categories: [String: JSONValue] = [:]
        for category in call.operations.categories { categories[category.name] = categoryJSON(category) }
        var sync = syncState(call.syncKey)
        let answer = sync.answer(
            asked: asked, torrents: torrents, categories: categories, tags: Set(tags(call)),
            server: serverState(call))
        keep(sync, for: call.syncKey)
        return .json(answer)
    }

    /// `server_state`: `transfer/info`'s totals and qBittorrent's other members.
    private func serverState(_ call: QBitCall) -> [(String, JSONValue)] {
        let totals = call.operations.totals()
        let received = downloadedBytes(call)
        let ratio = received > 0 ? Double(totals.uploadedBytes) / Double(received) : 0
        var members: [(String, JSONValue)] = [
            ("alltime_dl", JSONValue(received)),
            ("alltime_ul", JSONValue(totals.uploadedBytes)),
            ("average_time_queue", .number(0)),
        ]
        members += transferInfo(call)
        members += [
            ("free_space_on_disk", JSONValue(call.operations.diskSpace()?.free ?? -1)),
            ("global_ratio", .string(received > 0 ? Decimals.format(ratio, places: 2) : "-")),
            ("queued_io_jobs", .number(0)),
            ("queueing", .bool(true)),
            ("read_cache_hits", .string("0")),
            ("read_cache_overload", .string("0")),
            ("refresh_interval", .number(1500)),
            ("total_buffers_size", .number(0)),
            ("total_peer_connections", .number(Double(totals.torrentPeers))),
            ("total_queued_size", .number(0)),
            ("total_wasted_session", .number(0)),
            ("use_alt_speed_limits", .bool(false)),
            ("write_cache_overload", .string("0")),
        ]
        return members.sorted { $0.0 < $1.0 }
    }
}
