import FoundationEssentials
import HaulCore
import HaulLoop

/// One download as qBittorrent 4.5 shows a torrent: keyed by its info-hash, in qBittorrent's states, fields and
/// units (seconds since 1970, bytes, ratios; -1 and -2 where qBittorrent says "none" and "the global one").
struct QBitTorrent {
    let snapshot: DownloadSnapshot
    /// Its key: the v1 info-hash, or the first 40 digits of a v2 one; another kind's (`--qbittorrent-list-all`) is
    /// made from its id.
    let hash: String
    /// Its folder, absolute.
    let savePath: String
    /// Where it stops seeding, as worked out from its own limits, its category's and the server's.
    let limits: SeedLimits
    /// Its place among the waiting downloads, from 1; 0 when it is not waiting.
    let queuePosition: Int

    var download: Download { snapshot.download }

    /// A download's key, nil when it has no info-hash yet and is not listed (a torrent by URL before its
    /// .torrent came).
    static func hash(of download: Download, listAll: Bool) -> String? {
        if let info = download.torrent?.infoHash { return String(info.lowercased().prefix(40)) }
        if download.kind == .torrent, let hash = magnetHash(download.url) { return hash }
        // A torrent by URL is listed once its .torrent came: a key that changed then would lose it for the client.
        guard listAll, download.kind != .torrent else { return nil }
        return Digest.hex(Digest.of(Array(("haul:" + download.id).utf8), .sha1))
    }

    /// The 40-digit info-hash of a magnet link's `xt=urn:btih:` (hex, or base32 decoded to hex).
    static func magnetHash(_ link: String) -> String? {
        guard let query = link.split(separator: "?", maxSplits: 1).last else { return nil }
        for pair in query.split(separator: "&") where pair.lowercased().hasPrefix("xt=urn:btih:") {
            let value = String(pair.dropFirst("xt=urn:btih:".count))
            if value.count == 40, value.allSatisfy(\.isHexDigit) { return value.lowercased() }
            if value.count == 32, let bytes = base32(value) { return Digest.hex(bytes) }
        }
        for pair in query.split(separator: "&") where pair.lowercased().hasPrefix("xt=urn:btmh:1220") {
            let value = pair.dropFirst("xt=urn:btmh:1220".count)
            if value.count == 64, value.allSatisfy(\.isHexDigit) { return String(value.prefix(40)).lowercased() }
        }
        return nil
    }

    /// RFC 4648's base32 (A-Z, 2-7), as old magnet links spell an info-hash.
    static func base32(_ text: String) -> [UInt8]? {
        var bytes: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for char in text.uppercased().utf8 {
            let value: UInt8
            switch char {
            case 65...90: value = char - 65
            case 50...55: value = char - 50 + 26
            default: return nil
            }
            buffer = buffer << 5 | UInt32(value)
            bits += 5
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        return bytes
    }

    // MARK: what it shows

    var name: String { download.torrent?.name ?? download.displayName }

    /// The wanted size (what qBittorrent calls `size`), and every file's (`total_size`); nil before the metadata.
    var size: Int64? {
        if let files = download.torrent?.files, !files.isEmpty {
            return files.filter(\.wanted).reduce(0) { $0 + $1.size }
        }
        return download.kind == .torrent ? nil : download.totalBytes
    }

    var totalSize: Int64? {
        if let files = download.torrent?.files, !files.isEmpty { return files.reduce(0) { $0 + $1.size } }
        return download.kind == .torrent ? nil : download.totalBytes
    }

    /// Bytes verified of what is wanted.
    var completed: Int64 {
        if download.state == .completed || download.state == .seeding { return size ?? 0 }
        if let files = download.torrent?.files, !files.isEmpty {
            return files.filter(\.wanted).reduce(0) { $0 + $1.done }
        }
        return download.receivedBytes
    }

    var progress: Double {
        if download.state == .completed || download.state == .seeding { return 1 }
        guard let size, size > 0 else { return 0 }
        return min(1, Double(completed) / Double(size))
    }

    /// Payload bytes fetched: libtorrent's count, at least what is verified.
    var downloaded: Int64 { max(download.torrent?.downloaded ?? download.receivedBytes, completed) }

    var finished: Bool { download.state == .completed || download.state == .seeding }

    /// qBittorrent's state names.
    var state: String {
        let torrent = download.torrent
        switch download.state {
        case .queued: return finished ? "queuedUP" : "queuedDL"
        case .probing:
            if torrent?.phase == .checking { return "checkingDL" }
            return download.kind == .torrent ? "metaDL" : "downloading"
        case .downloading:
            if torrent?.phase == .metadata { return "metaDL" }
            if torrent?.phase == .checking { return "checkingDL" }
            return snapshot.speed > 0 ? "downloading" : "stalledDL"
        case .verifying: return "checkingDL"
        case .seeding: return (torrent?.uploadSpeed ?? 0) > 0 ? "uploading" : "stalledUP"
        // A completed torrent has stopped seeding: qBittorrent's paused upload.
        case .completed: return "pausedUP"
        case .paused: return "pausedDL"
        case .failed:
            if let code = download.error?.code.rawValue, code == "file_gone" || code == "missing_files" {
                return "missingFiles"
            }
            return "error"
        }
    }

    /// Its files' folder or its single file, absolute.
    var contentPath: String {
        guard let name = download.filename ?? download.torrent?.name else { return "" }
        return QBitTorrent.joined(savePath, name)
    }

    var ratio: Double { (download.torrent?.ratio ?? 0).rounded(toPlaces: 4) }

    /// `ratio_limit`: -2 for the category's or server's, -1 for none, else the download's own.
    var ratioLimit: Double {
        guard let own = download.seedRatio else { return -2 }
        if own >= QBitTorrent.unlimitedRatio || own == 0 && (download.seedTime ?? 0) > 0 { return -1 }
        return own
    }

    /// `seeding_time_limit` in minutes: -2, -1, or the download's own.
    var seedingTimeLimit: Int64 {
        guard let own = download.seedTime else { return -2 }
        if own >= QBitTorrent.unlimitedSeconds || own == 0 && (download.seedRatio ?? 0) > 0 { return -1 }
        return own / 60
    }

    /// "Unlimited" as Haul holds it: the largest limits a download takes.
    static let unlimitedRatio = 10_000.0
    static let unlimitedSeconds: Int64 = 315_360_000

    var maxRatio: Double {
        limits.seeds ? (limits.ratio > 0 && limits.ratio < QBitTorrent.unlimitedRatio ? limits.ratio : -1) : 0
    }
    var maxSeedingTime: Int64 { limits.seeds ? (limits.seconds > 0 ? limits.seconds / 60 : -1) : 0 }

    var eta: Int64 {
        guard !finished, let seconds = snapshot.etaSeconds, seconds.isFinite, seconds >= 0 else { return 8_640_000 }
        return Int64(seconds.rounded())
    }

    static func epoch(_ date: Date?) -> Int64 { date.map { Int64($0.timeIntervalSince1970) } ?? 0 }

    var magnet: String { download.kind == .torrent && DownloadKind.isMagnet(download.url) ? download.url : "" }

    /// The trackers a magnet link names (`tr=`).
    var trackers: [String] {
        guard DownloadKind.isMagnet(download.url), let query = download.url.split(separator: "?").last else {
            return []
        }
        return query.split(separator: "&").compactMap { pair in
            pair.hasPrefix("tr=") ? PercentEncoding.decode(pair.dropFirst(3)) : nil
        }
    }

    var seeds: Int { download.torrent?.seeds ?? 0 }
    var leechers: Int { max(0, (download.torrent?.peers ?? 0) - seeds) }

    /// The members of `torrents/info`'s items (and `sync/maindata`'s, less `hash`), in qBittorrent's order.
    func info(withHash: Bool = true) -> [(String, JSONValue)] {
        let d = download
        let torrent = d.torrent
        let tags = DownloadTags.of(d).joined(separator: ", ")
        var members: [(String, JSONValue)] = [
            ("added_on", JSONValue(QBitTorrent.epoch(d.createdAt))),
            ("amount_left", JSONValue(max(0, (size ?? 0) - completed))),
            ("auto_tmm", .bool(false)),
            ("availability", .number(finished ? -1 : (seeds > 0 ? 1 : 0))),
            ("category", .string(d.category ?? "")),
            ("completed", JSONValue(completed)),
            ("completion_on", JSONValue(QBitTorrent.epoch(d.completedAt))),
            ("content_path", .string(contentPath)),
            ("dl_limit", JSONValue(d.maxSpeed ?? 0)),
            ("dlspeed", JSONValue(Int64(snapshot.speed.rounded()))),
            ("download_path", .string("")),
            ("downloaded", JSONValue(downloaded)),
            ("downloaded_session", JSONValue(downloaded)),
            ("eta", JSONValue(eta)),
            ("f_l_piece_prio", .bool(d.firstLast)),
            ("force_start", .bool(false)),
        ]
        if withHash { members.append(("hash", .string(hash))) }
        members += [
            ("infohash_v1", .string(hash)),
            ("infohash_v2", .string(torrent.map { $0.infoHash.count == 64 ? $0.infoHash : "" } ?? "")),
            ("last_activity", JSONValue(QBitTorrent.epoch(d.updatedAt))),
            ("magnet_uri", .string(magnet)),
            ("max_ratio", .number(maxRatio)),
            ("max_seeding_time", JSONValue(maxSeedingTime)),
            ("name", .string(name)),
            ("num_complete", JSONValue(Int64(seeds))),
            ("num_incomplete", JSONValue(Int64(leechers))),
            ("num_leechs", JSONValue(Int64(leechers))),
            ("num_seeds", JSONValue(Int64(seeds))),
            ("priority", JSONValue(Int64(queuePosition))),
            ("progress", .number(progress.rounded(toPlaces: 4))),
            ("ratio", .number(ratio)),
            ("ratio_limit", .number(ratioLimit)),
            ("save_path", .string(savePath)),
            ("seeding_time", JSONValue(torrent?.seedingTime ?? 0)),
            ("seeding_time_limit", JSONValue(seedingTimeLimit)),
            ("seen_complete", JSONValue(QBitTorrent.epoch(d.completedAt))),
            ("seq_dl", .bool(d.sequential)),
            ("size", JSONValue(size ?? 0)),
            ("state", .string(state)),
            ("super_seeding", .bool(false)),
            ("tags", .string(tags)),
            ("time_active", JSONValue(timeActive)),
            ("total_size", JSONValue(totalSize ?? -1)),
            ("tracker", .string("")),
            ("trackers_count", JSONValue(Int64(trackers.count))),
            ("up_limit", JSONValue(d.uploadLimit ?? 0)),
            ("uploaded", JSONValue(torrent?.uploaded ?? 0)),
            ("uploaded_session", JSONValue(torrent?.uploaded ?? 0)),
            ("upspeed", JSONValue(Int64((torrent?.uploadSpeed ?? 0).rounded()))),
        ]
        return members
    }

    /// Seconds it has run: from its start to its end, or to now.
    var timeActive: Int64 {
        guard let started = download.startedAt else { return 0 }
        let end =
            download.completedAt
            ?? (download.state.isActive || download.state == .seeding ? Date() : download.updatedAt)
        return max(0, Int64(end.timeIntervalSince(started)))
    }

    /// `torrents/properties`.
    var properties: JSONValue {
        let d = download
        let torrent = d.torrent
        let elapsed = timeActive
        return .object([
            ("addition_date", JSONValue(QBitTorrent.epoch(d.createdAt))),
            ("comment", .string("")),
            ("completion_date", d.completedAt.map { JSONValue(QBitTorrent.epoch($0)) } ?? .number(-1)),
            ("created_by", .string("")),
            ("creation_date", .number(-1)),
            ("dl_limit", JSONValue(d.maxSpeed ?? -1)),
            ("dl_speed", JSONValue(Int64(snapshot.speed.rounded()))),
            ("dl_speed_avg", JSONValue(elapsed > 0 ? downloaded / elapsed : 0)),
            ("download_path", .string("")),
            ("eta", JSONValue(eta)),
            ("hash", .string(hash)),
            ("infohash_v1", .string(hash)),
            ("infohash_v2", .string(torrent.map { $0.infoHash.count == 64 ? $0.infoHash : "" } ?? "")),
            ("is_private", .bool(false)),
            ("last_seen", JSONValue(finished ? QBitTorrent.epoch(d.completedAt) : -1)),
            ("name", .string(name)),
            ("nb_connections", JSONValue(Int64(torrent?.peers ?? snapshot.activeConnections))),
            ("nb_connections_limit", .number(100)),
            ("peers", JSONValue(Int64(leechers))),
            ("peers_total", JSONValue(Int64(leechers))),
            ("piece_size", JSONValue(torrent?.pieceLength ?? 0)),
            ("pieces_have", JSONValue(Int64(torrent?.piecesDone ?? 0))),
            ("pieces_num", JSONValue(Int64(torrent?.pieces ?? 0))),
            ("reannounce", .number(0)),
            ("save_path", .string(savePath)),
            ("seeding_time", JSONValue(torrent?.seedingTime ?? 0)),
            ("seeds", JSONValue(Int64(seeds))),
            ("seeds_total", JSONValue(Int64(seeds))),
            ("share_ratio", .number(ratio)),
            ("time_elapsed", JSONValue(elapsed)),
            ("total_downloaded", JSONValue(downloaded)),
            ("total_downloaded_session", JSONValue(downloaded)),
            ("total_size", JSONValue(totalSize ?? -1)),
            ("total_uploaded", JSONValue(torrent?.uploaded ?? 0)),
            ("total_uploaded_session", JSONValue(torrent?.uploaded ?? 0)),
            ("total_wasted", .number(0)),
            ("up_limit", JSONValue(d.uploadLimit ?? -1)),
            ("up_speed", JSONValue(Int64((torrent?.uploadSpeed ?? 0).rounded()))),
            ("up_speed_avg", JSONValue(elapsed > 0 ? (torrent?.uploaded ?? 0) / elapsed : 0)),
        ])
    }

    /// `torrents/files`: each file with its progress and priority (1 wanted, 0 not), its pieces.
    var files: JSONValue {
        let d = download
        guard let torrent = d.torrent, !torrent.files.isEmpty else {
            // Another kind's one file.
            guard d.kind != .torrent, let size = totalSize else { return .array([]) }
            return .array([
                .object([
                    ("availability", .number(-1)), ("index", .number(0)), ("is_seed", .bool(finished)),
                    ("name", .string(d.filename ?? d.displayName)), ("piece_range", .array([.number(0), .number(0)])),
                    ("priority", .number(1)), ("progress", .number(progress.rounded(toPlaces: 4))),
                    ("size", JSONValue(size)),
                ])
            ])
        }
        var offset: Int64 = 0
        let piece = max(torrent.pieceLength, 1)
        return .array(
            torrent.files.enumerated().map { index, file in
                let first = offset / piece
                let last = max(first, (offset + max(file.size, 1) - 1) / piece)
                offset += file.size
                let fileProgress =
                    finished && file.wanted ? 1 : file.size > 0 ? Double(file.done) / Double(file.size) : 1
                var members: [(String, JSONValue)] = [
                    ("availability", .number(finished ? -1 : (seeds > 0 ? 1 : 0))),
                    ("index", JSONValue(Int64(index))),
                ]
                if index == 0 { members.append(("is_seed", .bool(finished))) }
                members += [
                    ("name", .string(file.path)),
                    ("piece_range", .array([JSONValue(first), JSONValue(last)])),
                    ("priority", .number(file.wanted ? 1 : 0)),
                    ("progress", .number(fileProgress.rounded(toPlaces: 4))),
                    ("size", JSONValue(file.size)),
                ]
                return .object(members)
            })
    }

    /// `torrents/trackers`: DHT, peer exchange and local discovery as qBittorrent lists them, then the magnet's.
    func trackersJSON(dht: Bool, lsd: Bool) -> JSONValue {
        func entry(_ url: String, status: Int, tier: Int) -> JSONValue {
            .object([
                ("msg", .string("")), ("num_downloaded", .number(0)), ("num_leeches", .number(0)),
                ("num_peers", .number(0)), ("num_seeds", .number(0)), ("status", .number(Double(status))),
                ("tier", .number(Double(tier))), ("url", .string(url)),
            ])
        }
        // Status 0: disabled, 1: not contacted, 2: working.
        var list = [
            entry("** [DHT] **", status: dht ? 2 : 0, tier: -1), entry("** [PeX] **", status: 2, tier: -1),
            entry("** [LSD] **", status: lsd ? 2 : 0, tier: -1),
        ]
        for (tier, url) in trackers.enumerated() { list.append(entry(url, status: 1, tier: tier)) }
        return .array(list)
    }

    static func joined(_ folder: String, _ name: String) -> String {
        folder.isEmpty ? name : folder.hasSuffix("/") ? folder + name : folder + "/" + name
    }
}

extension Double {
    fileprivate func rounded(toPlaces places: Int) -> Double {
        var scale = 1.0
        for _ in 0..<places { scale *= 10 }
        return (self * scale).rounded() / scale
    }
}
