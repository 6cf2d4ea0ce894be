import FoundationEssentials
import HaulCore
import HaulLoop

/// Categories, tags, the preferences and the transfer totals, in qBittorrent's shapes.
extension QBittorrentAPI {
    // MARK: categories

    /// `torrents/categories`: each category by name, with its folder as an absolute save path.
    func categoriesJSON(_ call: QBitCall) -> JSONValue {
        .object(call.operations.categories.map { ($0.name, categoryJSON($0)) })
    }

    func categoryJSON(_ category: HaulCore.Category) -> JSONValue {
        .object([("name", .string(category.name)), ("savePath", .string(QBitTorrent.joined(root, category.directory)))])
    }

    /// The folder a category made by this front gets: its name, under the caller's root.
    func newCategoryFolder(_ name: String, _ caller: Caller) -> String {
        caller.token?.root.map { $0 + "/" + name } ?? name
    }

    /// `torrents/createCategory` (409 when it exists) and `editCategory` (409 when it does not): `category` and
    /// `savePath` (absolute under the download root, or relative to it; empty: the category's name).
    func putCategory(_ call: QBitCall, creating: Bool) throws(QBitError) -> QBitAnswer {
        let name = try call.required("category")
        guard Validate.categoryName(name) == nil else { throw QBitError(400, "Invalid category name") }
        let existing = try? call.operations.category(name)
        if creating, existing != nil { throw QBitError(409, "Unable to create category") }
        if !creating, existing == nil { throw QBitError(409, "Unable to edit category") }
        var category = existing ?? HaulCore.Category(name: name, directory: newCategoryFolder(name, call.caller))
        if let path = call.form["savePath"] {
            category.directory = try folder(of: path, otherwise: newCategoryFolder(name, call.caller))
        }
        do throws(EngineError) {
            _ = try call.operations.putCategory(category)
        } catch {
            try QBittorrentAPI.fail(error)
        }
        return .done
    }

    /// Makes a category `torrents/add` names that is not there, as qBittorrent does, when the caller may make
    /// categories; otherwise the add is refused for it.
    func makeCategory(_ name: String, call: QBitCall) throws(QBitError) {
        guard call.caller.scope >= .manage else { return }
        guard Validate.categoryName(name) == nil else { throw QBitError(400, "Invalid category name") }
        do throws(EngineError) {
            _ = try call.operations.putCategory(
                HaulCore.Category(name: name, directory: newCategoryFolder(name, call.caller)))
        } catch {
            try QBittorrentAPI.fail(error)
        }
    }

    /// A save path as a folder relative to the download root.
    private func folder(of path: String, otherwise: String) throws(QBitError) -> String {
        guard !path.isEmpty else { return otherwise }
        var relative = path
        if path.hasPrefix("/") {
            let prefix = root.hasSuffix("/") ? root : root + "/"
            guard path.hasPrefix(prefix) else {
                throw QBitError(400, "savePath must be under the download root \(root)")
            }
            relative = String(path.dropFirst(prefix.count))
        }
        if let problem = Validate.directory(relative) { throw QBitError(400, "savePath \(problem)") }
        let folder = Validate.sanitizedDirectory(relative)
        return folder.isEmpty ? otherwise : folder
    }

    /// `torrents/removeCategories`: names one per line; one not there is passed over.
    func removeCategories(_ call: QBitCall) throws(QBitError) -> QBitAnswer {
        let names = (try call.required("categories")).split(whereSeparator: \.isNewline).map(String.init)
        for name in names where (try? call.operations.category(name)) != nil {
            do throws(EngineError) {
                try call.operations.removeCategory(name)
            } catch {
                try QBittorrentAPI.fail(error)
            }
        }
        return .done
    }

    // MARK: tags

    /// Every tag: those the caller's downloads hold and those made by `createTags`.
    func tags(_ call: QBitCall) -> [String] {
        var all = createdTags
        for torrent in torrents(call) { all.formUnion(DownloadTags.of(torrent.download)) }
        return all.sorted()
    }

    func createTags(_ call: QBitCall) throws(QBitError) -> QBitAnswer {
        guard let tags = DownloadTags.parse(try call.required("tags")) else {
            throw QBitError(400, "tags " + DownloadTags.problem)
        }
        createdTags.formUnion(tags)
        return .done
    }

    /// `torrents/deleteTags`: the tags go from every download the caller may change.
    func deleteTags(_ call: QBitCall) throws(QBitError) -> QBitAnswer {
        guard let gone = DownloadTags.parse(try call.required("tags")) else {
            throw QBitError(400, "tags " + DownloadTags.problem)
        }
        createdTags.subtract(gone)
        for torrent in torrents(call) {
            let tags = DownloadTags.of(torrent.download)
            guard !Set(tags).isDisjoint(with: gone) else { continue }
            var changes = DownloadChanges()
            changes.tags = .some(DownloadTags.joined(tags.filter { !gone.contains($0) }))
            _ = try? call.operations.change(torrent.download.id, changes)
        }
        return .done
    }

    // MARK: preferences and totals

    /// Bytes fetched over the downloads the caller sees.
    func downloadedBytes(_ call: QBitCall) -> Int64 {
        call.operations.ids(matching: DownloadFilter()).reduce(0) { sum, id in
            guard let d = call.operations.snapshot(id)?.download else { return sum }
            return sum + (d.torrent.map { max($0.downloaded, $0.files.reduce(0) { $0 + $1.done }) } ?? d.receivedBytes)
        }
    }

    /// `app/preferences`: what applies to Haul, in qBittorrent's names (limits in bytes per second, times in
    /// minutes).
    func preferences(_ call: QBitCall) -> JSONValue {
        let settings = call.operations.settings
        let bittorrent = base.config.bittorrent
        let seeding = bittorrent.seeding
        return .object([
            ("save_path", .string(callersRoot(call.caller))),
            ("temp_path_enabled", .bool(false)),
            ("temp_path", .string("")),
            ("torrent_content_layout", .string("Original")),
            ("start_paused_enabled", .bool(false)),
            ("auto_tmm_enabled", .bool(false)),
            ("queueing_enabled", .bool(true)),
            ("max_active_downloads", .number(Double(settings.maxActive))),
            ("max_active_torrents", .number(Double(settings.maxActive))),
            ("max_active_uploads", .number(-1)),
            ("dont_count_slow_torrents", .bool(false)),
            ("dl_limit", JSONValue(settings.maxSpeed ?? 0)),
            ("up_limit", JSONValue(bittorrent.uploadLimit)),
            ("alt_dl_limit", .number(0)),
            ("alt_up_limit", .number(0)),
            ("max_connec", .number(-1)),
            ("max_connec_per_torrent", .number(-1)),
            // Both limits 0: a finished torrent does not seed (it stops at once, as at ratio 0).
            ("max_ratio_enabled", .bool(seeding.ratio > 0 || !seeding.seeds)),
            ("max_ratio", .number(seeding.seeds ? (seeding.ratio > 0 ? seeding.ratio : -1) : 0)),
            ("max_seeding_time_enabled", .bool(seeding.seconds > 0 || !seeding.seeds)),
            ("max_seeding_time", JSONValue(seeding.seeds ? (seeding.seconds > 0 ? seeding.seconds / 60 : -1) : 0)),
            ("max_ratio_act", .number(0)),
            ("dht", .bool(bittorrent.dht)),
            ("pex", .bool(true)),
            ("lsd", .bool(bittorrent.lsd)),
            ("encryption", .number(0)),
            ("upnp", .bool(bittorrent.portMapping)),
            ("listen_port", .number(0)),
            ("web_ui_username", .string(config.username)),
            ("bypass_local_auth", .bool(!gate.hasToken)),
        ])
    }

    /// `app/setPreferences` (`json`): `dl_limit` (0 for none) and `max_active_downloads` (or
    /// `max_active_torrents`) change the server's settings; the rest are fixed by Haul's flags and passed over,
    /// as qBittorrent passes over what it does not know.
    func setPreferences(_ call: QBitCall) throws(QBitError) -> QBitAnswer {
        guard let text = call.form["json"], case .object(let given)? = try? JSONValue.parse(Array(text.utf8)) else {
            throw QBitError(400, "json must be a JSON object")
        }
        var members: [(String, JSONValue)] = []
        for (name, value) in given {
            switch name {
            case "dl_limit":
                guard let limit = value.integerValue else { throw QBitError(400, "dl_limit must be an integer") }
                members.append(("max_speed", limit > 0 ? JSONValue(limit) : .null))
            case "max_active_downloads", "max_active_torrents":
                guard let count = value.integerValue, count >= 1 else { continue }
                members.append(("max_active", JSONValue(min(count, 1000))))
            default: continue
            }
        }
        guard !members.isEmpty else { return .done }
        let (change, errors) = SettingsChange.parse(members)
        if let error = errors.first { throw QBitError(400, "\(error.field) \(error.message)") }
        do throws(EngineError) {
            _ = try call.operations.changeSettings(change)
        } catch {
            try QBittorrentAPI.fail(error)
        }
        return .done
    }

    /// `transfer/info`: speeds now, and the bytes fetched of the downloads the caller sees (torrents' payload,
    /// files' bytes received).
    func transferInfo(_ call: QBitCall) -> [(String, JSONValue)] {
        let totals = call.operations.totals()
        return [
            ("connection_status", .string("connected")),
            ("dht_nodes", .number(0)),
            ("dl_info_data", JSONValue(downloadedBytes(call))),
            ("dl_info_speed", JSONValue(Int64(totals.speed.rounded()))),
            ("dl_rate_limit", JSONValue(call.operations.settings.maxSpeed ?? 0)),
            ("up_info_data", JSONValue(totals.uploadedBytes)),
            ("up_info_speed", JSONValue(Int64(totals.uploadSpeed.rounded()))),
            ("up_rate_limit", JSONValue(base.config.bittorrent.uploadLimit)),
        ]
    }
}
