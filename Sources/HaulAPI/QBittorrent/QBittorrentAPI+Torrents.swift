import FoundationEssentials
import HaulCore
import HaulLoop

/// `torrents/*`: reading, adding, removing and changing torrents, each named by its info-hash.
extension QBittorrentAPI {
    /// The folder the caller's downloads land under: its token's root, else the download root.
    func callersRoot(_ caller: Caller) -> String {
        guard let folder = caller.token?.root else { return root }
        return QBitTorrent.joined(root, folder)
    }

    /// Every download the caller sees that the front lists (torrents; every kind with --qbittorrent-list-all), in
    /// the order they were added.
    func torrents(_ call: QBitCall) -> [QBitTorrent] {
        let operations = call.operations
        // Only torrents are read (and made snapshots of), unless every kind is listed.
        var filter = DownloadFilter()
        if !config.listAll { filter.kinds = [.torrent] }
        let snapshots = operations.ids(matching: filter).compactMap(operations.snapshot)
        // qBittorrent's `priority`: the place in the queue of a waiting download, from 1.
        let waiting = snapshots.map(\.download).filter { $0.state == .queued }
            .sorted { ($0.priority, -$0.queueOrder) > ($1.priority, -$1.queueOrder) }
        var places: [String: Int] = [:]
        for (index, download) in waiting.enumerated() { places[download.id] = index + 1 }
        let server = call.operations.settings.seeding
        return snapshots.compactMap { snapshot in
            let d = snapshot.download
            guard let hash = QBitTorrent.hash(of: d, listAll: config.listAll) else { return nil }
            return QBitTorrent(
                snapshot: snapshot, hash: hash, savePath: savePath(of: d),
                limits: SeedLimits.of(d, category: d.category.flatMap { try? base.category($0) }, server: server),
                queuePosition: places[d.id] ?? 0)
        }
    }

    /// The torrent of `hash`, or 404 (qBittorrent's `Not Found`).
    func torrent(_ call: QBitCall, _ hash: String) throws(QBitError) -> QBitTorrent {
        let key = hash.lowercased()
        guard let found = torrents(call).first(where: { $0.hash == key }) else { throw QBitError.notFound }
        return found
    }

    /// The torrents `hashes` names (all of them for `all`) that the caller may change; unknown hashes are passed
    /// over, as qBittorrent does, and so are another token's torrents (a token below manage changes its own).
    func named(_ call: QBitCall) throws(QBitError) -> [QBitTorrent] {
        let hashes = try call.hashes()
        return torrents(call).filter { (hashes?.contains($0.hash) ?? true) && call.caller.mayChange($0.download) }
    }

    /// A download's folder, absolute: its download folder, or its completed folder once moved there.
    func savePath(of d: Download) -> String {
        if d.moved, let completed = d.completedDirectory {
            return QBitTorrent.joined(base.config.completedRoot ?? root, completed)
        }
        return QBitTorrent.joined(root, d.directory)
    }

    // MARK: reading

    /// `torrents/info`: `filter`, `category`, `tag`, `hashes`, then `sort` (any member) and `reverse`, `offset`
    /// and `limit`.
    func info(_ call: QBitCall) throws(QBitError) -> QBitAnswer {
        let form = call.form
        var list = torrents(call)
        if let filter = form["filter"] { list = list.filter { QBittorrentAPI.matches($0, filter: filter) } }
        if let category = form["category"] { list = list.filter { ($0.download.category ?? "") == category } }
        if let tag = form["tag"] {
            list = list.filter { torrent in
                let tags = DownloadTags.of(torrent.download)
                return tag.isEmpty ? tags.isEmpty : tags.contains(tag)
            }
        }
        if let hashes = form["hashes"] {
            let wanted = Set(hashes.split(separator: "|").map { $0.lowercased() })
            list = list.filter { wanted.contains($0.hash) }
        }
        let ids = list.map(\.download.id)
        var items = list.map { $0.info() }
        if let key = form["sort"] {
            items.sort { a, b in
                QBittorrentAPI.precedes(a.first { $0.0 == key }?.1, b.first { $0.0 == key }?.1)
            }
            if try form.bool("reverse") == true { items.reverse() }
        }
        if let offset = try form.integer("offset") {
            let start = offset < 0 ? max(0, items.count + Int(offset)) : min(items.count, Int(offset))
            items = Array(items[start...])
        }
        if let limit = try form.integer("limit"), limit > 0 { items = Array(items.prefix(Int(limit))) }
        return .listing(.array(items.map { .object($0) }), showing: ids)
    }

    /// Whether a torrent is in one of qBittorrent's filters (an unknown one matches all, as in qBittorrent).
    static func matches(_ torrent: QBitTorrent, filter: String) -> Bool {
        let state = torrent.state
        let paused = state.hasPrefix("paused")
        switch filter {
        case "downloading":
            return ["downloading", "metaDL", "stalledDL", "checkingDL", "pausedDL", "queuedDL", "forcedDL"].contains(
                state)
        case "seeding": return ["uploading", "stalledUP", "checkingUP", "queuedUP", "forcedUP"].contains(state)
        case "completed": return torrent.finished
        case "paused", "stopped": return paused
        case "resumed", "running": return !paused
        case "active": return torrent.snapshot.speed > 0 || (torrent.download.torrent?.uploadSpeed ?? 0) > 0
        case "inactive": return torrent.snapshot.speed == 0 && (torrent.download.torrent?.uploadSpeed ?? 0) == 0
        case "stalled": return state == "stalledDL" || state == "stalledUP"
        case "stalled_uploading": return state == "stalledUP"
        case "stalled_downloading": return state == "stalledDL"
        case "checking": return state.hasPrefix("checking")
        case "errored": return state == "error" || state == "missingFiles"
        default: return true
        }
    }

    /// JSON values in `sort`'s order: numbers by value, strings by text, booleans false first.
    static func precedes(_ a: JSONValue?, _ b: JSONValue?) -> Bool {
        switch (a, b) {
        case (.number(let x)?, .number(let y)?): return x < y
        case (.string(let x)?, .string(let y)?): return x.lowercased() < y.lowercased()
        case (.bool(let x)?, .bool(let y)?): return !x && y
        default: return false
        }
    }

    // MARK: changing

    /// Does `changes` to each named torrent.
    func change(_ call: QBitCall, _ changes: DownloadChanges) throws(QBitError) -> QBitAnswer {
        for torrent in try named(call) {
            let id = torrent.download.id
            // A paused torrent resumed, a finished one paused: qBittorrent answers both without complaint.
            if changes.state == .queued, torrent.download.state != .paused, !changes.changesOptions { continue }
            if changes.state == .paused,
                !(torrent.download.state.isActive || torrent.download.state == .queued
                    || torrent.download.state == .seeding), !changes.changesOptions
            {
                continue
            }
            try QBittorrentAPI.attempt(call.operations.change(id, changes))
        }
        return .done
    }

    /// `torrents/delete`: removes them, their files too with `deleteFiles=true`.
    func delete(_ call: QBitCall) throws(QBitError) -> QBitAnswer {
        let deleteFiles = try call.form.bool("deleteFiles") ?? false
        let ids = try named(call).map(\.download.id)
        try QBittorrentAPI.attempt(call.operations.remove(batch: ids[...], deleteFile: deleteFiles))
        return .done
    }

    /// `torrents/setCategory`: an existing category, or "" for none (409 for one that is not there).
    func setCategory(_ call: QBitCall) throws(QBitError) -> QBitAnswer {
        let name = try call.required("category")
        guard name.isEmpty || (try? call.operations.category(name)) != nil else {
            throw QBitError(409, "Incorrect category name")
        }
        var changes = DownloadChanges()
        changes.category = .some(name.isEmpty ? nil : name)
        return try change(call, changes)
    }

    /// `torrents/addTags` and `removeTags`: `tags` comma-separated.
    func retag(_ call: QBitCall, adding: Bool) throws(QBitError) -> QBitAnswer {
        guard let given = DownloadTags.parse(try call.required("tags")) else {
            throw QBitError(400, "tags " + DownloadTags.problem)
        }
        for torrent in try named(call) {
            var tags = Set(DownloadTags.of(torrent.download))
            if adding { tags.formUnion(given) } else { tags.subtract(given) }
            guard let joined = DownloadTags.parse(tags.joined(separator: ",")) else {
                throw QBitError(400, "tags " + DownloadTags.problem)
            }
            var changes = DownloadChanges()
            changes.tags = .some(DownloadTags.joined(joined))
            try QBittorrentAPI.attempt(call.operations.change(torrent.download.id, changes))
        }
        if adding { createdTags.formUnion(given) }
        return .done
    }

    /// `torrents/setShareLimits`: `ratioLimit` and `seedingTimeLimit` (minutes), -2 for the category's or the
    /// server's, -1 for none.
    func setShareLimits(_ call: QBitCall) throws(QBitError) -> QBitAnswer {
        guard let ratio = try call.form.number("ratioLimit"), let minutes = try call.form.integer("seedingTimeLimit")
        else { throw QBitError(400, "Bad Request") }
        var changes = DownloadChanges()
        changes.seedRatio = try QBittorrentAPI.ratio(ratio)
        changes.seedTime = try QBittorrentAPI.seconds(minutes: minutes)
        return try change(call, changes)
    }

    /// A share ratio limit as Haul holds it: nil for the category's or server's (-2), the largest for none (-1).
    static func ratio(_ value: Double) throws(QBitError) -> Double? {
        if value == -2 { return nil }
        if value == -1 { return QBitTorrent.unlimitedRatio }
        guard value >= 0, value <= QBitTorrent.unlimitedRatio else {
            throw QBitError(400, "ratioLimit must be -2, -1 or from 0 to 10000")
        }
        return value
    }

    /// A seeding time limit in minutes as Haul's seconds: nil for the category's or server's (-2), the largest
    /// for none (-1).
    static func seconds(minutes: Int64) throws(QBitError) -> Int64? {
        if minutes == -2 { return nil }
        if minutes == -1 { return QBitTorrent.unlimitedSeconds }
        guard minutes >= 0, minutes <= QBitTorrent.unlimitedSeconds / 60 else {
            throw QBitError(400, "seedingTimeLimit must be -2, -1 or from 0 to 5256000 minutes")
        }
        return minutes * 60
    }

    /// `torrents/setDownloadLimit`: bytes per second, 0 or less for none.
    func setDownloadLimit(_ call: QBitCall) throws(QBitError) -> QBitAnswer {
        guard let limit = try call.form.integer("limit") else { throw QBitError(400, "Bad Request") }
        var changes = DownloadChanges()
        changes.maxSpeed = .some(limit > 0 ? min(limit, DownloadOptions.maxBytes) : nil)
        return try change(call, changes)
    }

    /// `topPrio`, `bottomPrio`, `increasePrio`, `decreasePrio`: moves the waiting ones in the queue.
    func move(_ call: QBitCall, _ move: QueueMove) throws(QBitError) -> QBitAnswer {
        let ids = try named(call).filter { $0.download.isWaiting }.map(\.download.id)
        // Moved one by one in the order named, the last named ending nearest the end moved to.
        for id in move == .top || move == .up ? ids.reversed() : ids {
            try QBittorrentAPI.attempt(call.operations.move(id, move))
        }
        return .done
    }

    /// `torrents/setForceStart` with `value=true`: a waiting torrent starts now, ahead of the queue (a paused one
    /// is resumed first).
    func forceStart(_ call: QBitCall) throws(QBitError) -> QBitAnswer {
        guard try call.form.bool("value") == true else { return .done }
        for torrent in try named(call) where torrent.download.isWaiting {
            let id = torrent.download.id
            if torrent.download.state == .paused {
                try QBittorrentAPI.attempt(call.operations.change(id, DownloadChanges(state: .queued)))
            }
            try QBittorrentAPI.attempt(call.operations.startForReading(id))
        }
        return .done
    }

    /// `torrents/recheck`: a running torrent's pieces are checked again against its files. One that is not
    /// running (waiting, paused, finished) is checked when it next runs; when none of those named runs, 409 says so.
    func recheck(_ call: QBitCall) throws(QBitError) -> QBitAnswer {
        let torrents = try named(call)
        var checked = 0
        for torrent in torrents {
            if try QBittorrentAPI.attempt(call.operations.recheck(torrent.download.id)) { checked += 1 }
        }
        guard checked > 0 || torrents.isEmpty else {
            throw QBitError(
                409,
                "only a running torrent is checked again; a paused or waiting one is checked when it resumes, "
                    + "and a finished one's pieces were checked as they came")
        }
        return .done
    }

    /// An engine's refusal as qBittorrent-style text with the REST API's status.
    static func fail(_ error: EngineError) throws(QBitError) -> Never {
        let problem = Problem(error)
        throw QBitError(problem.status, problem.detail)
    }

    /// An engine call, its refusal answered as `fail` answers it.
    @discardableResult
    static func attempt<T>(_ work: @autoclosure () throws(EngineError) -> T) throws(QBitError) -> T {
        do {
            return try work()
        } catch {
            try fail(error)
        }
    }
}
