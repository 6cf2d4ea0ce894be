/// A BitTorrent download's life in the machine: libtorrent fetches and verifies the pieces in the runner's
/// session; the machine decides when it starts, when its files may be fetched, when it is done and what it shows.
/// States as for any download: probing while the metadata comes and the files are checked, downloading, verifying
/// while the files are synced and named, seeding while it uploads to the swarm (if its limits let it), then
/// completed; paused and failed as always.
extension DownloadMachine {
    mutating func startTorrent() {
        phase = .torrenting
        torrentRate = 0
        emit(.torrent(.start))
    }

    /// The metadata is in and the files checked: the size, the name and the files are known, and what was on
    /// disk already (a resume) counts. The runner checked the names, the quota and the free space first.
    mutating func torrentReady(_ info: TorrentInfo) {
        guard phase == .torrenting, download.state == .probing else { return }
        showTorrent(info)
        download.filename = info.name ?? download.filename
        // One file fetched is read as a file while it downloads: its type from its name.
        if let path = info.readablePath { download.contentType = Self.containerType(of: path) }
        transition(.probed)
        emit(.torrent(.release))
    }

    mutating func torrentProgress(_ info: TorrentInfo, rate: Double) {
        guard phase == .torrenting || phase == .seeding else { return }
        torrentRate = rate
        showTorrent(info)
    }

    /// Every wanted piece is verified: the files are synced and get their final name.
    mutating func torrentFinished() {
        guard phase == .torrenting, download.state == .downloading else { return }
        torrentRate = 0
        transition(.transferred)
        phase = .publishing
        emit(.torrent(.publish(base: download.torrent?.name ?? download.filename ?? "torrent")))
    }

    /// The files are named and the torrent stays in the swarm (the runner found its limits let it seed), in the
    /// seeding state, which holds no slot; the runner watches its limits.
    mutating func torrentSeeding(_ name: String, file: FileStamp?) {
        guard phase == .publishing else { return }
        retry = nil
        phase = .seeding
        torrentRate = 0
        transition(.seed) {
            $0.filename = name
            $0.fileStamp = file
            $0.journal = $0.segments
            $0.error = nil
        }
        emit(.torrent(.seed(name: name)))
    }

    /// A download seeding when the server stopped seeds again at the start (it never waits for a slot).
    mutating func resumeSeeding() {
        phase = .seeding
        torrentRate = 0
        emit(.torrent(.seed(name: download.filename ?? "")))
    }

    /// Seeding ends (a limit met, a client paused it, or it cannot seed): out of the swarm, and completed.
    mutating func torrentSeeded() {
        guard phase == .seeding else { return }
        emit(.torrent(.unseed))
        end(.verified) { $0.error = nil }
    }

    /// The download is removed: libtorrent deletes what it wrote before the staging folder goes; a seeding
    /// torrent's files are named, and the engine deletes them if asked.
    mutating func torrentRemoved() {
        if phase == .seeding {
            emit(.torrent(.unseed))
            phase = .idle
        } else if phase != .idle {
            emit(.torrent(.remove))
        }
    }

    /// The wanted files' size and verified bytes as one segment: progress, ETA and totals read it as any
    /// download's. libtorrent's resume data and its check of the files, not the journal, say what is on disk.
    private mutating func showTorrent(_ info: TorrentInfo) {
        download.torrent = info
        let wanted = info.files.filter(\.wanted)
        let total = wanted.reduce(Int64(0)) { $0 + $1.size }
        let done = min(total, wanted.reduce(Int64(0)) { $0 + $1.done })
        guard !info.files.isEmpty else { return }
        download.totalBytes = total
        let segments = total > 0 ? [Segment(start: 0, end: total - 1, received: done)] : []
        download.segments = segments
        download.journal = segments
    }
}
