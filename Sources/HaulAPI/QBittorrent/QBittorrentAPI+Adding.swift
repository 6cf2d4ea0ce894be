import FoundationEssentials
import HaulCore
import HaulLoop

/// `torrents/add`: magnet links and .torrent URLs (`urls`, one per line) and .torrent files (multipart
/// `torrents`), made through the option table as REST's POST makes them.
extension QBittorrentAPI {
    func add(_ call: QBitCall) throws(QBitError) -> QBitAnswer {
        let form = call.form
        let urls = (form["urls"] ?? "").split(whereSeparator: \.isNewline)
            .map { HTTPField.trimmed(String($0)) }.filter { !$0.isEmpty }
        let files = form.files.filter { $0.field == "torrents" }
        guard !urls.isEmpty || !files.isEmpty else { return .text("Fails.") }
        let options = try addOptions(call)
        // Whatever the URL, the client means a torrent: a .torrent file's address, if not a magnet link.
        let sources: [[(String, JSONValue)]] =
            urls.map { url in
                DownloadKind.isMagnet(url)
                    ? [("url", .string(url))] : [("url", .string(url)), ("kind", .string("torrent"))]
            } + files.map { [("torrent", .string(Base64.encode($0.bytes)))] }
        let names = urls + files.map(\.filename)
        var requests: [NewDownload] = []
        for (source, name) in zip(sources, names) {
            var body = RequestBody(members: options + source)
            let request = API.newDownload(&body)
            if let problem = body.errors.first {
                // A link that is not one is passed over, as qBittorrent does (`Fails.` when none was added).
                if problem.field == "url" { continue }
                // A .torrent that is not one: qBittorrent's 415, in its words.
                if problem.field == "torrent" {
                    throw QBitError(415, "Error: '\(name)' is not a valid torrent file: \(problem.message)")
                }
                throw QBitError(400, "\(QBittorrentAPI.qbitName(problem.field)): \(problem.message)")
            }
            requests.append(request)
        }
        if let name = form["category"], !name.isEmpty, (try? call.operations.category(name)) == nil {
            try makeCategory(name, call: call)
        }
        var added = 0
        var refusal: EngineError?
        for request in requests {
            do throws(EngineError) {
                _ = try call.operations.add(request)
                added += 1
            } catch {
                refusal = refusal ?? error
            }
        }
        if added == 0, let refusal { try QBittorrentAPI.fail(refusal) }
        if requests.isEmpty { return .text("Fails.") }
        return .text(added > 0 ? "Ok." : "Fails.")
    }

    /// What a torrent added takes from the call, as the option table's members.
    private func addOptions(_ call: QBitCall) throws(QBitError) -> [(String, JSONValue)] {
        let form = call.form
        var options: [(String, JSONValue)] = []
        let category = form["category"].flatMap { $0.isEmpty ? nil : $0 }
        if let category { options.append(("category", .string(category))) }
        if let tags = form["tags"], !tags.isEmpty { options.append(("tags", .string(tags))) }
        let paused = try form.bool("paused")
        let stopped = try form.bool("stopped")
        if paused == true || stopped == true { options.append(("start_paused", .bool(true))) }
        if try form.bool("sequentialDownload") == true { options.append(("sequential", .bool(true))) }
        if try form.bool("firstLastPiecePrio") == true { options.append(("first_last", .bool(true))) }
        if let ratio = try form.number("ratioLimit"), let limit = try QBittorrentAPI.ratio(ratio) {
            options.append(("seed_ratio", .number(limit)))
        }
        if let minutes = try form.integer("seedingTimeLimit"),
            let seconds = try QBittorrentAPI.seconds(minutes: minutes)
        {
            options.append(("seed_time", JSONValue(seconds)))
        }
        if let limit = try form.integer("upLimit"), limit > 0 { options.append(("upload_limit", JSONValue(limit))) }
        if let limit = try form.integer("dlLimit"), limit > 0 { options.append(("max_speed", JSONValue(limit))) }
        if let layout = form["contentLayout"], layout != "Original" {
            throw QBitError(
                400, "contentLayout \(layout) is not supported: Haul keeps a torrent's own layout (Original)")
        }
        if let path = form["savepath"] ?? form["savePath"], !path.isEmpty {
            if let directory = try directory(of: path, category: category, caller: call.caller), !directory.isEmpty {
                options.append(("directory", .string(directory)))
            }
        }
        return options
    }

    /// A save path as a download's folder: relative to its category's folder (or its token's root), where it
    /// must lie; an absolute one under the download root.
    private func directory(of path: String, category: String?, caller: Caller) throws(QBitError) -> String? {
        var relative = path
        if path.hasPrefix("/") {
            let prefix = root.hasSuffix("/") ? root : root + "/"
            guard path == root || path + "/" == prefix || path.hasPrefix(prefix) else {
                throw QBitError(400, "savepath must be under the download root \(root)")
            }
            relative = path.hasPrefix(prefix) ? String(path.dropFirst(prefix.count)) : ""
        }
        while relative.hasSuffix("/") { relative.removeLast() }
        var base = caller.token?.root ?? ""
        if let name = category { base = (try? self.base.category(name).directory) ?? newCategoryFolder(name, caller) }
        guard !base.isEmpty else { return relative }
        // Where the category (or the token's root) puts it already.
        if relative == base { return nil }
        guard relative.hasPrefix(base + "/") else {
            throw QBitError(
                400,
                "savepath must be under \(QBitTorrent.joined(root, base))"
                    + (category.map { ", category \($0)'s folder" } ?? ""))
        }
        return String(relative.dropFirst(base.count + 1))
    }

    /// The option table's names as qBittorrent's, in what a refusal says.
    static func qbitName(_ field: String) -> String {
        switch field {
        case "url": return "urls"
        case "torrent": return "torrents"
        case "directory": return "savepath"
        case "seed_ratio": return "ratioLimit"
        case "seed_time": return "seedingTimeLimit"
        default: return field
        }
    }
}
