import Glibc
import HaulLoop

/// A torrent's runner once its files are named (seeding from them until a limit is met), and before it is added
/// when its .torrent comes by URL.
extension DownloadRunner {
    /// The download's seeding limits: its own, else its category's, else the server's.
    var seedLimits: SeedLimits? {
        guard let download = host.download(id) else { return nil }
        return SeedLimits.of(
            download, category: download.category.flatMap(host.category), server: host.currentSettings.seeding)
    }

    /// Adds the torrent again from its named files, in upload mode (a piece missing is never fetched again): the
    /// .torrent and the resume data (what is verified, what was uploaded, how long it seeded) come from the
    /// staging folder, and the files' first path element becomes the name they were given.
    func seedTorrent(_ name: String) {
        guard let torrents = host.torrents, let download = host.download(id) else {
            return deliver(.torrentSeeded)
        }
        do throws(FileError) {
            let staging = try stagingFolder(create: false)
            let directory = try host.directory(download.directory, create: false)
            guard let metadata = staging.readFile(TorrentStaging.metadata, limit: Int(TorrentSession.maxMetadataBytes))
            else { throw FileError(call: "open", path: staging.shown(TorrentStaging.metadata), code: ENOENT) }
            var add = torrentAdd(savePath: directory.absolute("", root: host.config.downloadRoot), of: download)
            add.torrent = metadata
            add.resume = staging.readFile(TorrentStaging.resume, limit: Int(TorrentSession.maxMetadataBytes))
            add.root = name
            add.hold = true
            torrent.readyTold = true
            torrent.seeding = true
            torrents.start(add, observer: self)
            host.slotFreed()
        } catch {
            host.log.warning("cannot seed", ["download.id": id, "error.message": "\(error)"])
            deliver(.torrentSeeded)
        }
    }

    /// Each second while seeding: the swarm's figures, and whether a limit is met (or a piece went missing: a
    /// seeding torrent never fetches one again).
    func seedingTick() {
        guard let status = host.torrents?.status(torrentKey) else { return }
        if status.state == .checkingFiles || status.state == .checkingResumeData { return }
        guard let info = torrentInfo(status) else { return }
        deliver(.torrentProgress(info, rate: 0))
        let size = info.files.filter(\.wanted).reduce(Int64(0)) { $0 + $1.size }
        if !status.finished && !status.seeding {
            host.log.warning("seeding stopped: files changed on disk", ["download.id": id])
            return deliver(.torrentSeeded)
        }
        if seedLimits?.met(uploaded: status.uploaded, size: size, seeding: status.seedingSeconds) ?? true {
            return deliver(.torrentSeeded)
        }
        torrent.ticks += 1
        if torrent.ticks % 30 == 0 { host.torrents?.checkpoint(torrentKey) }
    }
}

extension DownloadRunner {
    /// Fetches the .torrent at the download's URL with the download's own requests' options and policy, checks it
    /// as a posted one is checked, keeps it in the staging folder, and starts the torrent from it.
    func fetchTorrentFile(_ download: Download, into staging: ConfinedDirectory) {
        let transfer = host.playlists.newRequestID()
        let request = self.request(.whole, url: download.url, of: download)
        let fetch = TorrentFileFetch(limit: Int(TorrentSession.maxMetadataBytes)) { [weak self] result in
            guard let self, !self.done, self.torrent.fileFetch?.id == transfer else { return }
            self.torrent.fileFetch = nil
            switch result {
            case .success(let bytes):
                do throws(TorrentError) {
                    _ = try TorrentSession.parse(bytes)
                } catch {
                    return self.deliver(
                        .torrentFailed(DownloadError(.torrentUnsafe, "not a usable .torrent: \(error.message)")))
                }
                do throws(FileError) {
                    try staging.writeFile(TorrentStaging.metadata, bytes)
                } catch {
                    return self.deliver(.torrentFailed(DownloadError.file(error)))
                }
                self.startTorrent()
            case .failure(let error):
                self.deliver(.torrentFailed(error))
            }
        }
        do {
            torrent.fileFetch = (transfer, fetch)
            try host.fetcher.start(transfer, request, delegate: fetch)
        } catch {
            torrent.fileFetch = nil
            deliver(.torrentFailed(DownloadError(.torrentFailed, "the .torrent could not be asked for: \(error)")))
        }
    }

    func cancelTorrentFileFetch() {
        guard let fetch = torrent.fileFetch else { return }
        torrent.fileFetch = nil
        host.fetcher.cancel(fetch.id)
    }
}
