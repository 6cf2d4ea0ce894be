import Glibc
import HaulLoop

/// A BitTorrent download's runner: its torrent in the engine's session, in a staging folder of its own until its
/// files are complete; the names, the quota and the free space checked before a piece is fetched; progress read
/// each second; the finished files synced and named as a plain download's file is.
/// What a torrent's runner keeps: whether the machine heard it is ready, the ticks seen, and its files' indexes in
/// the session (pad files left out).
struct TorrentRun {
    var readyTold = false
    /// Complete and named, uploading: it holds no slot.
    var seeding = false
    var ticks = 0
    var fileIndexes: [Int] = []
    /// The session's index of its one file fetched (nil when it fetches several), set with the files' progress.
    var readableIndex: Int?
    /// The .torrent being fetched by URL, before the torrent is added.
    var fileFetch: (id: TransferID, fetch: TorrentFileFetch)?
}

extension DownloadRunner: TorrentObserver {
    /// The torrent's key in the session: the download's sequence number (unique in the store).
    var torrentKey: UInt64 { UInt64(bitPattern: host.download(id)?.sequence ?? 0) }

    /// Checks the torrent's pieces again, when it is in the session; false otherwise.
    func recheckTorrent() -> Bool {
        guard let session = host.torrents?.current, session.status(torrentKey) != nil else { return false }
        session.recheck(torrentKey)
        return true
    }

    func torrentStep(_ step: TorrentStep) {
        switch step {
        case .start: startTorrent()
        case .release: releaseTorrent()
        case .publish(let base): publishTorrent(base)
        case .stop:
            cancelTorrentFileFetch()
            host.torrents?.stop(torrentKey, staging: try? stagingFolder(create: false), deleteFiles: false)
        case .remove:
            cancelTorrentFileFetch()
            leaveSession(deleteFiles: true)
        case .want(let offset):
            // The pieces of the next few MiB from the reader's byte, each with a deadline.
            guard let index = torrent.readableIndex else { return }
            host.torrents?.current?.want(torrentKey, file: index, offset: offset, length: 8 << 20)
        case .seed(let name): seedTorrent(name)
        case .unseed:
            torrent.seeding = false
            leaveSession(deleteFiles: false)
        }
    }

    /// Takes the torrent out of the session (deleting what libtorrent wrote with `deleteFiles`), then removes its
    /// staging folder.
    private func leaveSession(deleteFiles: Bool) {
        let parent = try? host.directory(host.download(id)?.directory ?? "", create: false)
        let name = TorrentStaging.name(id)
        host.torrents?.stop(torrentKey, staging: nil, deleteFiles: deleteFiles) { try? parent?.removeTree(name) }
    }

    /// What every add of the download's torrent says: its key, its files' place, its upload limit and how many
    /// peers it may have.
    func torrentAdd(savePath: String, of download: Download) -> TorrentAdd {
        var add = TorrentAdd(key: torrentKey, savePath: savePath)
        add.uploadLimit = download.uploadLimit ?? 0
        add.maxConnections = max(download.connections * 4, 20)
        return add
    }

    /// The download's staging folder (made with `create`).
    func stagingFolder(create: Bool) throws(FileError) -> ConfinedDirectory {
        let directory = try host.directory(host.download(id)?.directory ?? "", create: create)
        let name = TorrentStaging.name(id)
        if create { try directory.makeDirectory(name) }
        return try directory.subdirectory(name)
    }

    func startTorrent() {
        guard let torrents = host.torrents, let download = host.download(id) else {
            return deliver(
                .torrentFailed(
                    DownloadError(.bittorrentDisabled, "BitTorrent is off on this server (--bittorrent turns it on)")))
        }
        do {
            let staging = try stagingFolder(create: true)
            // A .torrent by URL: fetched first, kept beside the files (never asked for again).
            if !DownloadKind.isMagnet(download.url), !staging.exists(TorrentStaging.metadata) {
                return fetchTorrentFile(download, into: staging)
            }
            try staging.makeDirectory(TorrentStaging.data)
            var add = torrentAdd(
                savePath: staging.absolute(TorrentStaging.data, root: host.config.downloadRoot), of: download)
            add.magnet = DownloadKind.isMagnet(download.url) ? download.url : nil
            add.torrent = staging.readFile(TorrentStaging.metadata, limit: Int(TorrentSession.maxMetadataBytes))
            add.resume = staging.readFile(TorrentStaging.resume, limit: Int(TorrentSession.maxMetadataBytes))
            // Nothing is fetched before the names, the quota and the disk were looked at.
            add.hold = true
            add.sequential = download.sequential
            add.downloadLimit = download.maxSpeed ?? 0
            torrent.readyTold = false
            torrents.start(add, observer: self)
        } catch {
            deliver(.torrentFailed(DownloadError.file(error)))
        }
    }

    private func releaseTorrent() {
        guard let session = host.torrents?.current else { return }
        let key = torrentKey
        if let download = host.download(id), let files = download.torrent?.files, let all = session.files(key) {
            // The session's files include pad files (never fetched); the resource's leave them out.
            var priorities = [UInt8](repeating: 0, count: all.count)
            for (shown, index) in torrent.fileIndexes.enumerated() where shown < files.count && index < all.count {
                priorities[index] = files[shown].wanted ? 4 : 0
            }
            session.setFilePriorities(key, priorities)
            if download.firstLast { session.firstLast(key) }
        }
        session.resume(key)
        // Complete already (every piece was on disk): libtorrent said so while it was held.
        if session.status(key)?.finished == true {
            if let info = torrentInfo() { deliver(.torrentProgress(info, rate: 0)) }
            deliver(.torrentFinished)
        }
    }

    // MARK: what the session says

    func torrentEvent(_ event: TorrentEvent) {
        switch event {
        case .metadata, .checked:
            torrentMaybeReady()
        case .finished:
            if torrent.seeding { return }
            guard torrent.readyTold else { return torrentMaybeReady() }
            // The files' last progress first: the resource shows them complete.
            if let info = torrentInfo() { deliver(.torrentProgress(info, rate: 0)) }
            deliver(.torrentFinished)
        case .error(_, let message) where torrent.seeding:
            // Its files are complete and named: an error (a file gone) ends the seeding, not the download.
            host.log.warning("seeding stopped", ["download.id": id, "error.message": message])
            deliver(.torrentSeeded)
        case .error(_, let message):
            deliver(.torrentFailed(DownloadError(.torrentFailed, message)))
        case .resumeData(let key, let data):
            host.torrents?.saveCheckpoint(data, of: key, into: try? stagingFolder(create: false))
        default:
            break
        }
    }

    func torrentTick() {
        if torrent.seeding { return seedingTick() }
        // An event may come while libtorrent still says it is checking: the tick looks again.
        guard torrent.readyTold else { return torrentMaybeReady() }
        guard let status = host.torrents?.status(torrentKey), let info = torrentInfo(status) else { return }
        deliver(.torrentProgress(info, rate: Double(status.downloadRate)))
        torrent.ticks += 1
        // Resume data every half minute: after a crash, what it vouches for is not checked again.
        if torrent.ticks % 30 == 0 { host.torrents?.checkpoint(torrentKey) }
    }

    /// The metadata is in and the files checked: their names, the quota and the free space decide whether it
    /// goes on. The .torrent is kept beside the files (a magnet's metadata is not asked for again).
    private func torrentMaybeReady() {
        guard !torrent.readyTold, let session = host.torrents?.current, let status = session.status(torrentKey),
            status.hasMetadata,
            status.state != .checkingFiles, status.state != .checkingResumeData,
            let metadata = session.metadata(torrentKey), let info = torrentInfo(status)
        else { return }
        let meta: TorrentMeta
        do {
            meta = try TorrentSession.parse(metadata)
        } catch {
            return deliver(.torrentFailed(DownloadError(.torrentUnsafe, error.message)))
        }
        if let problem = TorrentLayout.problem(meta.files) {
            return deliver(.torrentFailed(DownloadError(.torrentUnsafe, problem)))
        }
        let staging = try? stagingFolder(create: false)
        if staging?.exists(TorrentStaging.metadata) == false {
            try? staging?.writeFile(TorrentStaging.metadata, metadata)
        }
        guard info.files.contains(where: \.wanted) else {
            let given = host.download(id)?.files ?? ""
            return deliver(
                .torrentFailed(
                    DownloadError(
                        .torrentFailed, "files '\(given)' names none of the torrent's \(info.files.count) files")))
        }
        let wanted = info.files.filter(\.wanted).reduce(Int64(0)) { $0 + $1.size }
        let done = info.files.filter(\.wanted).reduce(Int64(0)) { $0 + $1.done }
        if let allowance = host.quotaAllowance(for: id), wanted > allowance {
            return deliver(
                .torrentFailed(
                    DownloadError(
                        .quotaExceeded,
                        "the torrent's files take \(wanted) bytes; the token's quota leaves \(max(0, allowance))")))
        }
        if let free = try? staging?.freeBytes(),
            let refusal = host.config.space.refusal(total: wanted, needed: wanted - done, free: free)
        {
            return deliver(.torrentFailed(refusal))
        }
        torrent.readyTold = true
        deliver(.torrentReady(info))
    }

    /// What the resource shows of the torrent, from `status` when the caller read it already (each read is a
    /// round trip to libtorrent's thread).
    func torrentInfo(_ known: TorrentStatus? = nil) -> TorrentInfo? {
        guard let session = host.torrents?.current, let status = known ?? session.status(torrentKey) else {
            return nil
        }
        var info = host.download(id)?.torrent ?? TorrentInfo(infoHash: status.infoHash)
        info.infoHash = status.infoHash
        // The name is the metadata's, fixed once it is in: asked for until then only.
        if info.files.isEmpty { info.name = session.name(torrentKey) ?? info.name }
        info.phase =
            !status.hasMetadata
            ? .metadata
            : status.state == .checkingFiles || status.state == .checkingResumeData
                ? .checking : status.seeding ? .seeding : status.finished ? .finished : .downloading
        info.peers = status.peers
        info.seeds = status.seeds
        info.uploadSpeed = Double(status.uploadRate)
        info.uploaded = status.uploaded
        info.downloaded = status.downloaded
        info.seedingTime = status.seedingSeconds
        let piecesBefore = info.piecesDone
        info.pieces = status.pieces
        info.piecesDone = status.piecesDone
        if status.hasMetadata, info.files.isEmpty, let files = session.files(torrentKey) {
            let selection = host.download(id)?.files.flatMap(TorrentSelection.init)
            info.files = files.filter { !$0.pad }.enumerated().map { index, file in
                let wanted = selection?.wants(number: index + 1, path: file.path) ?? true
                return TorrentInfo.File(path: file.path, size: file.size, done: 0, wanted: wanted)
            }
            torrent.fileIndexes = files.indices.filter { !files[$0].pad }
            // Once, with the file list: the piece size is the metadata's.
            if let bytes = session.metadata(torrentKey), let meta = try? TorrentSession.parse(bytes) {
                info.pieceLength = meta.pieceLength
            }
        }
        if !info.files.isEmpty {
            if torrent.fileIndexes.isEmpty, let files = session.files(torrentKey) {
                torrent.fileIndexes = files.indices.filter { !files[$0].pad }
            }
            let progress = session.fileProgress(torrentKey, count: (torrent.fileIndexes.last ?? -1) + 1)
            for (shown, index) in torrent.fileIndexes.enumerated()
            where index < progress.count && shown < info.files.count {
                info.files[shown].done = progress[index]
            }
        }
        // One file fetched: where a reader finds it, and what of it is verified (read again only when a piece
        // came; at most one range per two pieces).
        let wanted = info.files.indices.filter { info.files[$0].wanted }
        if wanted.count == 1, let shown = wanted.first, shown < torrent.fileIndexes.count {
            let index = torrent.fileIndexes[shown]
            if info.readablePath != info.files[shown].path || index != torrent.readableIndex
                || status.piecesDone != piecesBefore || info.readable.isEmpty
            {
                info.readable = session.fileHave(torrentKey, index: index, capacity: status.pieces / 2 + 1).map {
                    ByteRange($0.first, $0.last)
                }
            }
            info.readablePath = info.files[shown].path
            torrent.readableIndex = index
        } else {
            info.readablePath = nil
            info.readable = []
            torrent.readableIndex = nil
        }
        return info
    }

    // MARK: the end

    /// Out of the session (its files closed), then synced and named: a single file as a plain download's, a
    /// folder the same way; the staging folder goes.
    private func publishTorrent(_ base: String) {
        guard let torrents = host.torrents else { return }
        let key = torrentKey
        let name = torrents.current?.name(key) ?? base
        let staging = try? stagingFolder(create: false)
        torrents.stop(key, staging: staging, deleteFiles: false) { [weak self] in
            guard let self, !self.done else { return }
            self.nameTorrent(name, base: base)
        }
    }

    private func nameTorrent(_ name: String, base: String) {
        let directory: ConfinedDirectory
        let data: ConfinedDirectory
        do {
            directory = try host.directory(host.download(id)?.directory ?? "", create: false)
            data = try stagingFolder(create: false).subdirectory(TorrentStaging.data)
        } catch {
            return deliver(.publishFailed(DownloadError.file(error)))
        }
        host.loop.offload(
            { () -> Result<String, FileError> in
                Result { () throws(FileError) -> String in
                    try data.syncTree(name)
                    for n in 0..<10_000 {
                        let candidate = FileName.candidate(base, n)
                        if try directory.rename(name, in: data, to: candidate) {
                            try directory.sync()
                            return candidate
                        }
                    }
                    throw FileError(call: "rename", path: directory.shown(base), code: EEXIST)
                }
            },
            then: { [weak self] result in
                guard let self, !self.done else { return }
                switch result {
                case .success(let final):
                    let stamp = directory.size(final).flatMap { size in
                        directory.identity(final).map { FileStamp($0, size: size) }
                    }
                    guard self.seedLimits?.seeds == true else {
                        try? directory.removeTree(TorrentStaging.name(self.id))
                        return self.deliver(.published(name: final, file: stamp))
                    }
                    // The .torrent and the resume data stay beside it while it seeds (a restart seeds again).
                    try? (try? self.stagingFolder(create: false))?.removeTree(TorrentStaging.data)
                    self.deliver(.torrentSeeding(name: final, file: stamp))
                case .failure(let error):
                    self.deliver(.publishFailed(DownloadError.file(error)))
                }
            })
    }
}
