internal import CTorrent
import FoundationEssentials
import Glibc

/// A libtorrent session on the loop: its own threads do the network and disk work; it wakes the loop through a
/// pipe when it has something to say, and every call and event is on the loop's thread.
public final class TorrentSession {
    /// Metadata over this many bytes is refused before it is parsed.
    public static let maxMetadataBytes: Int64 = 32 << 20
    public static let maxFiles = 100_000

    private var session: OpaquePointer?
    private var wake: (read: Int32, write: Int32)
    private var watch: ReadWatch?
    private let onEvents: ([TorrentEvent]) -> Void

    public init(loop: EventLoop, settings: TorrentSettings, onEvents: @escaping ([TorrentEvent]) -> Void) throws {
        self.onEvents = onEvents
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else {
            throw TorrentError("cannot make a pipe: \(String(cString: strerror(errno)))")
        }
        wake = (fds[0], fds[1])
        for fd in fds {
            _ = fcntl(fd, F_SETFL, O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        var error: UnsafeMutablePointer<CChar>?
        session = Self.withSettings(settings) { haul_torrent_session_new($0, fds[1], &error) }
        guard session != nil else {
            let message = error.map { String(cString: $0) } ?? "libtorrent refused its settings"
            haul_torrent_free(error)
            Glibc.close(fds[0])
            Glibc.close(fds[1])
            throw TorrentError(message)
        }
        watch = try ReadWatch(loop: loop, fd: fds[0]) { [unowned self] in self.drain() }
    }

    deinit { close() }

    /// Stops every torrent and libtorrent's threads.
    public func close() {
        guard let session else { return }
        watch?.cancel()
        watch = nil
        haul_torrent_session_free(session)
        self.session = nil
        Glibc.close(wake.read)
        Glibc.close(wake.write)
    }

    public func apply(_ settings: TorrentSettings) {
        guard let session else { return }
        Self.withSettings(settings) { haul_torrent_session_apply(session, $0) }
    }

    public var listenPort: Int { session.map { Int(haul_torrent_listen_port($0)) } ?? 0 }

    /// Reads a .torrent file, refusing one over `maxBytes` or with more than `maxFiles` files.
    public static func parse(
        _ bytes: [UInt8], maxBytes: Int64 = maxMetadataBytes, maxFiles: Int = maxFiles
    ) throws(TorrentError) -> TorrentMeta {
        var meta = haul_torrent_meta()
        defer { haul_torrent_meta_clear(&meta) }
        let parsed = bytes.withUnsafeBytes {
            haul_torrent_parse($0.baseAddress!, $0.count, maxBytes, Int32(maxFiles), &meta)
        }
        guard parsed == 0, bytes.count > 0 else {
            throw TorrentError(meta.error.map { String(cString: $0) } ?? "not a torrent file")
        }
        var files: [TorrentFileEntry] = []
        files.reserveCapacity(Int(meta.num_files))
        bytes.withUnsafeBytes { raw in
            for index in 0..<Int(meta.num_files) {
                var path: UnsafeMutablePointer<CChar>?
                var size: Int64 = 0
                var pad: Int32 = 0
                guard haul_torrent_parse_file(raw.baseAddress!, raw.count, Int32(index), &path, &size, &pad) == 0
                else { continue }
                files.append(TorrentFileEntry(path: path.map { String(cString: $0) } ?? "", size: size, pad: pad != 0))
                haul_torrent_free(path)
            }
        }
        let hash = withUnsafeBytes(of: meta.info_hash) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        return TorrentMeta(
            infoHash: hash, name: meta.name.map { String(cString: $0) } ?? "", totalSize: meta.total_size,
            pieceLength: meta.piece_length, pieces: Int(meta.num_pieces), files: files)
    }

    public func add(_ add: TorrentAdd) throws(TorrentError) {
        guard let session else { throw TorrentError("the BitTorrent session is closed") }
        var error: UnsafeMutablePointer<CChar>?
        let trackers = add.trackers.joined(separator: "\n")
        let peers = add.peers.joined(separator: "\n")
        let torrent = add.torrent ?? []
        let resume = add.resume ?? []
        let result = torrent.withUnsafeBytes { torrentBytes in
            resume.withUnsafeBytes { resumeBytes in
                var params = haul_torrent_add_params()
                params.key = add.key
                params.torrent = add.torrent == nil ? nil : torrentBytes.baseAddress
                params.torrent_length = torrentBytes.count
                params.resume = add.resume == nil ? nil : resumeBytes.baseAddress
                params.resume_length = resumeBytes.count
                params.paused = add.paused ? 1 : 0
                params.hold = add.hold ? 1 : 0
                params.sequential = add.sequential ? 1 : 0
                params.upload_limit = add.uploadLimit
                params.download_limit = add.downloadLimit
                params.max_connections = Int32(add.maxConnections)
                return add.savePath.withCString { savePath in
                    params.save_path = savePath
                    return trackers.withCString { trackers in
                        params.trackers = trackers
                        return peers.withCString { peers in
                            params.peers = peers
                            return withOptionalCString(add.magnet) { magnet in
                                params.magnet = magnet
                                return withOptionalCString(add.root) { root in
                                    params.root = root
                                    return haul_torrent_add(session, &params, &error)
                                }
                            }
                        }
                    }
                }
            }
        }
        guard result == 0 else {
            let message = error.map { String(cString: $0) } ?? "libtorrent refused the torrent"
            haul_torrent_free(error)
            throw TorrentError(message)
        }
    }

    public func remove(_ key: UInt64, deleteFiles: Bool) {
        guard let session else { return }
        haul_torrent_remove(session, key, deleteFiles ? 1 : 0)
    }

    public func pause(_ key: UInt64) { session.map { haul_torrent_pause($0, key) } }

    public func resume(_ key: UInt64) { session.map { haul_torrent_resume($0, key) } }

    /// Asks for resume data (an event brings it); `flush` writes the files' caches out first.
    public func saveResume(_ key: UInt64, flush: Bool) {
        session.map { haul_torrent_save_resume($0, key, flush ? 1 : 0) }
    }

    public func setLimits(_ key: UInt64, upload: Int64, download: Int64) {
        session.map { haul_torrent_set_limits($0, key, upload, download) }
    }

    public func setSequential(_ key: UInt64, _ sequential: Bool) {
        session.map { haul_torrent_set_sequential($0, key, sequential ? 1 : 0) }
    }

    /// 0 skips a file, 1 low, 4 normal, 7 top.
    public func setFilePriorities(_ key: UInt64, _ priorities: [UInt8]) {
        guard let session else { return }
        priorities.withUnsafeBufferPointer {
            haul_torrent_set_file_priorities(session, key, $0.baseAddress!, Int32($0.count))
        }
    }

    public func firstLast(_ key: UInt64) { session.map { haul_torrent_first_last($0, key) } }

    /// Asks for the pieces of `[offset, offset + length)` of file `index` first.
    public func want(_ key: UInt64, file index: Int, offset: Int64, length: Int64) {
        session.map { haul_torrent_want_range($0, key, Int32(index), offset, length) }
    }

    public func recheck(_ key: UInt64) { session.map { haul_torrent_force_recheck($0, key) } }

    public func status(_ key: UInt64) -> TorrentStatus? {
        guard let session else { return nil }
        var status = haul_torrent_status()
        haul_torrent_status_of(session, key, &status)
        guard status.found != 0 else { return nil }
        let hash = withUnsafeBytes(of: status.info_hash) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        return TorrentStatus(
            state: TorrentStatus.State(rawValue: Int(status.state)), hasMetadata: status.has_metadata != 0,
            paused: status.paused != 0, finished: status.finished != 0, seeding: status.seeding != 0,
            errored: status.errored != 0, totalSize: status.total_size, totalDone: status.total_done,
            uploaded: status.all_time_upload, downloaded: status.all_time_download,
            downloadRate: status.download_rate, uploadRate: status.upload_rate, peers: Int(status.num_peers),
            seeds: Int(status.num_seeds), seedingSeconds: status.seeding_seconds,
            activeSeconds: status.active_seconds, pieces: Int(status.num_pieces),
            piecesDone: Int(status.pieces_done), infoHash: hash)
    }

    public func name(_ key: UInt64) -> String? { session.flatMap { taken(haul_torrent_name($0, key)) } }

    public func error(_ key: UInt64) -> String? { session.flatMap { taken(haul_torrent_error($0, key)) } }

    /// The .torrent file of a torrent with metadata.
    public func metadata(_ key: UInt64) -> [UInt8]? {
        guard let session else { return nil }
        var length = 0
        guard let pointer = haul_torrent_metadata(session, key, &length) else { return nil }
        defer { haul_torrent_free(pointer) }
        return Array(UnsafeRawBufferPointer(start: pointer, count: length))
    }

    /// The files as they are on disk (relative to the save path); nil before the metadata.
    public func files(_ key: UInt64) -> [TorrentFileEntry]? {
        guard let session else { return nil }
        let count = Int(haul_torrent_file_count(session, key))
        guard count >= 0 else { return nil }
        var files: [TorrentFileEntry] = []
        files.reserveCapacity(count)
        for index in 0..<count {
            var path: UnsafeMutablePointer<CChar>?
            var size: Int64 = 0
            var pad: Int32 = 0
            guard haul_torrent_file(session, key, Int32(index), &path, &size, &pad) == 0 else { continue }
            files.append(TorrentFileEntry(path: taken(path) ?? "", size: size, pad: pad != 0))
        }
        return files
    }

    /// Verified bytes per file.
    public func fileProgress(_ key: UInt64, count: Int) -> [Int64] {
        guard let session, count > 0 else { return [] }
        var done = [Int64](repeating: 0, count: count)
        let written = done.withUnsafeMutableBufferPointer {
            Int(haul_torrent_file_progress(session, key, $0.baseAddress!, Int32(count)))
        }
        return Array(done.prefix(written))
    }

    /// The verified bytes of file `index` (the session's numbering, pad files in), as (first, last) offsets in
    /// the file, in order; at most `capacity` ranges.
    public func fileHave(_ key: UInt64, index: Int, capacity: Int) -> [(first: Int64, last: Int64)] {
        guard let session, capacity > 0 else { return [] }
        var ranges = [Int64](repeating: 0, count: capacity * 2)
        let count = ranges.withUnsafeMutableBufferPointer {
            Int(haul_torrent_file_have(session, key, Int32(index), $0.baseAddress!, Int32(capacity)))
        }
        return (0..<count).map { (ranges[2 * $0], ranges[2 * $0 + 1]) }
    }

    // MARK: events

    /// Hands over what libtorrent has said so far, without waiting for the loop (at shutdown).
    public func poll() { drain() }

    private func drain() {
        var bytes = [UInt8](repeating: 0, count: 256)
        while read(wake.read, &bytes, bytes.count) > 0 {}
        guard let session else { return }
        var events: [TorrentEvent] = []
        var buffer = [haul_torrent_event](repeating: haul_torrent_event(), count: 64)
        while true {
            let count = buffer.withUnsafeMutableBufferPointer { Int(haul_torrent_pop(session, $0.baseAddress!, 64)) }
            for raw in buffer.prefix(count) { events.append(Self.event(raw)) }
            if count < 64 { break }
        }
        if !events.isEmpty { onEvents(events) }
    }

    private static func event(_ raw: haul_torrent_event) -> TorrentEvent {
        let key = raw.key
        let message = raw.message.map { String(cString: $0) } ?? ""
        haul_torrent_free(raw.message)
        defer { haul_torrent_free(raw.data) }
        switch Int(raw.kind) {
        case Int(HAUL_TORRENT_METADATA): return .metadata(key)
        case Int(HAUL_TORRENT_CHECKED): return .checked(key)
        case Int(HAUL_TORRENT_FINISHED): return .finished(key)
        case Int(HAUL_TORRENT_PIECE): return .piece(key, Int(raw.piece))
        case Int(HAUL_TORRENT_RESUME_DATA):
            let data = raw.data.map { Array(UnsafeRawBufferPointer(start: $0, count: raw.length)) } ?? []
            return .resumeData(key, data)
        case Int(HAUL_TORRENT_RESUME_FAILED): return .resumeFailed(key, message)
        case Int(HAUL_TORRENT_PAUSED): return .paused(key)
        case Int(HAUL_TORRENT_RESUMED): return .resumed(key)
        case Int(HAUL_TORRENT_REMOVED): return .removed(key)
        case Int(HAUL_TORRENT_FILES_DELETED): return .filesDeleted(key)
        case Int(HAUL_TORRENT_DELETE_FAILED): return .deleteFailed(key, message)
        case Int(HAUL_TORRENT_LISTEN_FAILED): return .listenFailed(message)
        default: return .error(key, message.isEmpty ? "libtorrent reported an error" : message)
        }
    }

    private static func withSettings<T>(
        _ settings: TorrentSettings, _ body: (UnsafePointer<haul_torrent_settings>) -> T
    ) -> T {
        let proxyType: Int32 =
            switch settings.proxy?.kind {
            case .socks5, .socks5h: 1
            case .http: 2
            default: 0
            }
        let encryption: Int32 =
            switch settings.encryption {
            case .prefer: 0
            case .require: 1
            case .refuse: 2
            }
        let blocked = settings.blockedRanges.joined(separator: "\n")
        let proxyURL = settings.proxy.flatMap { URLComponents(string: $0.url) }
        return settings.listenInterfaces.withCString { listen in
            settings.userAgent.withCString { agent in
                blocked.withCString { blocked in
                    withOptionalCString(settings.outgoingInterface) { outgoing in
                        withOptionalCString(settings.proxy?.host) { proxyHost in
                            withOptionalCString(proxyURL?.user) { proxyUser in
                                withOptionalCString(proxyURL?.password) { proxyPassword in
                                    var raw = haul_torrent_settings()
                                    raw.listen_interfaces = listen
                                    raw.outgoing_interface = outgoing
                                    raw.user_agent = agent
                                    raw.dht = settings.dht ? 1 : 0
                                    raw.lsd = settings.lsd ? 1 : 0
                                    raw.upnp = settings.upnp ? 1 : 0
                                    raw.natpmp = settings.natpmp ? 1 : 0
                                    raw.encryption = encryption
                                    raw.upload_limit = settings.uploadLimit
                                    raw.download_limit = settings.downloadLimit
                                    raw.max_connections = Int32(settings.maxConnections)
                                    raw.proxy_type = proxyType
                                    raw.proxy_host = proxyHost
                                    raw.proxy_port = Int32(proxyURL?.port ?? 1080)
                                    raw.proxy_user = proxyUser
                                    raw.proxy_password = proxyPassword
                                    raw.blocked_ranges = blocked
                                    return body(&raw)
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A string libtorrent made (freed here).
private func taken(_ pointer: UnsafeMutablePointer<CChar>?) -> String? {
    guard let pointer else { return nil }
    defer { haul_torrent_free(pointer) }
    return String(cString: pointer)
}

private func withOptionalCString<T>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> T) -> T {
    guard let string else { return body(nil) }
    return string.withCString { body($0) }
}
