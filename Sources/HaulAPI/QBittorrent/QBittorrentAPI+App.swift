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
        try QBittorrentAPI.attempt(call.operations.putCategory(category))
        return .done
    }

    /// Makes a category `torrents/add` names that is not there, as qBittorrent does, when the caller may make
    /// categories; otherwise the add is refused for it.
    func makeCategory(_ name: String, call: QBitCall) throws(QBitError) {
        guard call.caller.scope >= .manage else { return }
        guard Validate.categoryName(name) == nil else { throw QBitError(400, "Invalid category name") }
        let category = HaulCore.Category(name: name, directory: newCategoryFolder(name, call.caller))
        try QBittorrentAPI.attempt(call.operations.putCategory(category))
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
            try QBittorrentAPI.attempt(call.operations.removeCategory(name))
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

    /// Bytes fetched over the downloads the caller sees (a torrent's: its verified pieces).
    func downloadedBytes(_ call: QBitCall) -> Int64 { call.operations.totals().receivedBytes }

    /// `app/preferences`: what applies to Haul, in qBittorrent's names (limits in bytes per second, times in
    /// minutes).
    func preferences(_ call: QBitCall) -> JSONValue {
        let settings = call.operations.settings
        let bittorrent = base.config.bittorrent
        let share = ShareLimits(settings.seeding)
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
            ("max_ratio_enabled", .bool(share.ratioEnabled)),
            ("max_ratio", .number(share.ratio)),
            ("max_seeding_time_enabled", .bool(share.timeEnabled)),
            ("max_seeding_time", JSONValue(share.minutes)),
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

    /// `app/setPreferences` (`json`): `dl_limit` (0 for none), `max_active_downloads` (or `max_active_torrents`)
    /// and the share limits (`max_ratio_enabled`, `max_ratio`, `max_seeding_time_enabled`, `max_seeding_time`)
    /// change the server's settings; the rest are fixed by Haul's flags and passed over, as qBittorrent passes
    /// over what it does not know.
    func setPreferences(_ call: QBitCall) throws(QBitError) -> QBitAnswer {
        guard let text = call.form["json"], case .object(let given)? = try? JSONValue.parse(Array(text.utf8)) else {
            throw QBitError(400, "json must be a JSON object")
        }
        var members: [(String, JSONValue)] = []
        var share = ShareLimits(call.operations.settings.seeding)
        var shareChanged = false
        for (name, value) in given {
            switch name {
            case "dl_limit":
                guard let limit = value.integerValue else { throw QBitError(400, "dl_limit must be an integer") }
                members.append(("max_speed", limit > 0 ? JSONValue(limit) : .null))
            case "max_active_downloads", "max_active_torrents":
                guard let count = value.integerValue, count >= 1 else { continue }
                members.append(("max_active", JSONValue(min(count, 1000))))
            case "max_ratio_enabled", "max_seeding_time_enabled":
                guard case .bool(let on) = value else { throw QBitError(400, "\(name) must be true or false") }
                if name == "max_ratio_enabled" { share.ratioEnabled = on } else { share.timeEnabled = on }
                shareChanged = true
            case "max_ratio":
                guard case .number(let ratio) = value, ratio <= QBitTorrent.unlimitedRatio else {
                    throw QBitError(400, "max_ratio must be a number up to 10000")
                }
                share.ratio = ratio
                shareChanged = true
            case "max_seeding_time":
                guard let minutes = value.integerValue, minutes <= QBitTorrent.unlimitedSeconds / 60 else {
                    throw QBitError(400, "max_seeding_time must be an integer of minutes up to 5256000")
                }
                share.minutes = minutes
                shareChanged = true
            default: continue
            }
        }
        if shareChanged {
            let limits = share.limits
            members += [("seed_ratio", .number(limits.ratio)), ("seed_time", JSONValue(limits.seconds))]
        }
        guard !members.isEmpty else { return .done }
        let (change, errors) = SettingsChange.parse(members)
        if let error = errors.first { throw QBitError(400, "\(error.field) \(error.message)") }
        try QBittorrentAPI.attempt(call.operations.changeSettings(change))
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

/// The server's seeding limits as qBittorrent's preferences say them: a ratio and a time in minutes, each on or
/// off. Haul's (both 0: no seeding) and qBittorrent's (both off: seeding forever) differ; "forever" is kept as the
/// largest ratio.
struct ShareLimits {
    var ratioEnabled: Bool
    var ratio: Double
    var timeEnabled: Bool
    var minutes: Int64

    init(_ limits: SeedLimits) {
        if !limits.seeds {
            // It stops at once: a ratio limit of 0 reached.
            (ratioEnabled, ratio, timeEnabled, minutes) = (true, 0, false, -1)
        } else {
            ratioEnabled = limits.ratio > 0 && limits.ratio < QBitTorrent.unlimitedRatio
            ratio = ratioEnabled ? limits.ratio : -1
            timeEnabled = limits.seconds > 0
            minutes = timeEnabled ? limits.seconds / 60 : -1
        }
    }

    /// Haul's limits for these.
    var limits: SeedLimits {
        if ratioEnabled && ratio <= 0 || timeEnabled && minutes <= 0 { return SeedLimits() }
        if !ratioEnabled && !timeEnabled { return SeedLimits(ratio: QBitTorrent.unlimitedRatio) }
        return SeedLimits(ratio: ratioEnabled ? ratio : 0, seconds: timeEnabled ? minutes * 60 : 0)
    }
}
