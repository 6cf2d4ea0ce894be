import FoundationEssentials
import HaulLoop

/// What a reader of a download's file sees at one moment: the download, the ranges on disk, and which version of
/// them (bumped when written bytes are given up, so a reader never splices two versions).
public struct ReadView: Sendable {
    public var download: Download
    public var available: [ByteRange]
    public var version: Int
    /// Whether a runner has it (its bytes may still come, whatever its state says yet).
    public var running: Bool

    /// Whether more of the file can come without a client's word: it runs, or is about to.
    public var growing: Bool { running || download.state.isActive }
}

/// Reading a download's file while it arrives: what is on disk, the part file opened, readers told of each write,
/// and a queued download started for a reader.
extension Operations {
    /// What the caller may read of `id` now.
    public func readView(_ id: String) throws(EngineError) -> ReadView {
        guard let box = engine.registry.reading(id), caller.sees(box.machine.download) else { throw .notFound(id) }
        let download = box.machine.download
        return ReadView(
            download: download, available: download.available, version: box.machine.discards,
            running: engine.pool[id] != nil)
    }

    /// The file that holds `id`'s bytes, opened for reading: the finished file once completed, else its part file
    /// (nil while there is none yet). A descriptor stays on its file when the part file is given its final name.
    public func openForReading(_ id: String) throws(EngineError) -> OpenFile? {
        let view = try readView(id)
        if view.download.state == .completed { return try file(id).file }
        if view.download.kind == .torrent { return try openTorrentFile(view.download) }
        guard let name = view.download.filename else { return nil }
        do {
            return try engine.directory(view.download.directory, create: false).openForReading(name + ".part")
        } catch {
            if error.isMissing { return nil }
            throw .conflict("the part file cannot be read: \(error)")
        }
    }

    /// A torrent's one file fetched, in its staging folder while it downloads (nil before libtorrent made it); its
    /// files once they are named.
    private func openTorrentFile(_ download: Download) throws(EngineError) -> OpenFile? {
        if download.state == .seeding { return try file(download.id).file }
        guard let path = download.torrent?.readablePath else { throw .conflict(TorrentInfo.severalFiles) }
        let parts = path.split(separator: "/").map(String.init)
        guard let name = parts.last else { return nil }
        do {
            var directory = try engine.directory(download.directory, create: false)
                .subdirectory(TorrentStaging.name(download.id)).subdirectory(TorrentStaging.data)
            for part in parts.dropLast() { directory = try directory.subdirectory(part) }
            return try directory.openForReading(name)
        } catch {
            if error.isMissing { return nil }
            throw .conflict("the torrent's file cannot be read: \(error)")
        }
    }

    /// Counts a reader of `id` in or out: while any reads, every write of its bytes is told to the listener
    /// (`EngineListener.engineWrote`), so a waiting reader answers within the write.
    public func follow(reading id: String, _ reading: Bool) {
        guard let box = engine.machines[id] else { return }
        box.readers = max(0, box.readers + (reading ? 1 : -1))
    }

    /// A reader waits for byte `offset` of `id`: the download fetches it next (a connection moved or started
    /// there), when it runs and can fetch by range.
    public func want(_ id: String, at offset: Int64) {
        guard let download = engine.download(id), caller.sees(download), engine.pool[id] != nil else { return }
        engine.deliver(id, .wanted(offset))
    }

    /// Starts a queued download now, ahead of the queue and past `max_active`, because a reader asked (`?start=1`,
    /// `--start-on-read`); its token's own running limit still holds. False when it is not queued or may not start.
    @discardableResult
    /// Has a running torrent's pieces checked again against its files (libtorrent's recheck); false when it is
    /// not running (waiting, paused, finished, not a torrent).
    public func recheck(_ id: String) throws(EngineError) -> Bool {
        try mayChange(id)
        guard engine.download(id)?.kind == .torrent, let runner = engine.pool[id] else { return false }
        return runner.recheckTorrent()
    }

    public func startForReading(_ id: String) throws(EngineError) -> Bool {
        try mayChange(id)
        guard let download = engine.download(id), download.state == .queued, engine.pool[id] == nil,
            engine.cluster == nil
        else { return false }
        if let owner = download.owner, engine.tenancy.freeSlots(of: owner) <= 0 { return false }
        engine.pool.start(
            DownloadRunner(host: engine, id: download.id, url: download.url, maxSpeed: download.maxSpeed))
        return true
    }
}
