import FoundationEssentials
import HaulLoop

/// A download's machine on the heap, so the engine's dictionary holds a reference, not the value. While the machine
/// is idle (nothing runs: a paused, queued, completed or failed download read from the store or added, or one whose
/// runner ended), its download is kept packed (`PackedDownload`, a fifth of the memory or less) and unpacked for each
/// read; what its run kept stays beside it (a failed download's last error, a paused one's counters), but for a
/// completed one's, which is dropped. A client's read through the registry (`DownloadRegistry.reading`) keeps it
/// unpacked a while, and a change unpacks it for good unless the machine is still idle after it.
final class MachineBox {
    private var live: DownloadMachine
    /// The download's fields while packed; `live` then holds `vacant` in their place.
    private var packed: PackedDownload?
    /// The clock's time of the last bytes written, which stamp no `updatedAt` on the hot path; a snapshot makes
    /// `updated_at` follow them.
    var lastWriteAt: Double? {
        // Only the first write of a run can take anything down: nothing is put up while a write's time is pending,
        // and every later write is on the hot path.
        didSet { if oldValue == nil { changing() } }
    }
    /// Gone from the registry (removed, or replaced by another box): its entry in creation order is passed over
    /// until swept. Beside `lastWriteAt`'s flag byte, so the box grows by nothing.
    var isRemoved = false {
        didSet { changing() }
    }
    /// Whether the engine put up a status answer of this download (`StatusBoard`), which any change takes down
    /// first (with every page of the list). Beside `isRemoved`, in the same padding.
    private var isPublished = false
    /// Readers of the file waiting for its bytes: while any, each write is told (`EngineListener.engineWrote`).
    var readers = 0

    /// What a packed box's machine holds instead of its download: one download shared by all of them.
    private static let vacant = Download(
        id: "", sequence: 0, url: "", headers: [], requestedFilename: nil, directory: "", state: .paused,
        connections: 1, priority: 0, maxSpeed: nil, createdAt: Date(timeIntervalSinceReferenceDate: 0))

    init(_ machine: DownloadMachine) { live = machine }

    /// A box for a download loaded packed: its machine is idle, as every one loaded is.
    init(packed: PackedDownload, settings: MachineSettings) {
        live = DownloadMachine(download: Self.vacant, settings: settings)
        self.packed = packed
    }

    /// The machine; a packed one's download is unpacked for the read (each read: nothing is kept), and for good
    /// when changed (packed again after the change if the machine is still idle).
    var machine: DownloadMachine {
        _read {
            if let packed {
                var machine = live
                machine.download = packed.download
                yield machine
            } else {
                yield live
            }
        }
        _modify {
            changing()
            let wasPacked = packed != nil
            unpack()
            yield &live
            if wasPacked { pack() }
        }
    }

    /// The download, unpacked (a copy) if packed: what a walk of many reads.
    var download: Download { packed?.download ?? live.download }

    /// The download's id, read without unpacking it.
    var id: String { packed?.id ?? live.download.id }

    /// The download's state, read without unpacking it.
    var state: DownloadState { packed?.state ?? live.download.state }

    var isPacked: Bool { packed != nil }

    /// Whether the download's file is `name` in `directory`, read from the packed bytes if packed.
    func names(_ name: String, in directory: String) -> Bool {
        if let packed { return packed.names(name, in: directory) }
        return live.download.filename == name && live.download.directory == directory
    }

    /// Whether `filter` matches the download, read from the packed bytes where they tell.
    func matches(_ filter: DownloadFilter) -> Bool {
        if let packed, let answer = packed.matches(filter) { return answer }
        return filter.matches(download)
    }

    /// Adds the texts a search looks in (`Download.matches(search:)`) to `index`, read from the packed bytes if
    /// packed: the name, and the URL unless it carries credentials (searched as shown, without them); a torrent
    /// named by its metadata, or a URL with credentials, is a candidate for every search.
    func addSearchTexts(to index: inout SearchIndex) {
        if let packed {
            return packed.scan(texts: true) { scan, text in
                let name = (scan.filename ?? scan.requestedFilename).map { UnsafeBufferPointer(rebasing: text[$0]) }
                let url = UnsafeBufferPointer(rebasing: text[scan.url])
                index.add(
                    scan.sequence, name: name, url: url,
                    opaque: (name == nil && scan.kind == .torrent) || url.contains(UInt8(ascii: "@")))
            }
        }
        let d = live.download
        var name = d.filename ?? d.requestedFilename
        var url = d.url
        let opaque = (name == nil && d.kind == .torrent) || url.utf8.contains(UInt8(ascii: "@"))
        url.withUTF8 { url in
            guard name != nil else { return index.add(d.sequence, name: nil, url: url, opaque: opaque) }
            name!.withUTF8 { index.add(d.sequence, name: $0, url: url, opaque: opaque) }
        }
    }

    /// What a sort of the list reads of the download, from the packed bytes if packed (its speed is then 0: a
    /// machine packed runs nothing).
    var sortFields: SortFields {
        if let packed {
            return packed.scan(texts: false) { scan, _ in
                SortFields(
                    sequence: scan.sequence, state: scan.state, totalBytes: scan.totalBytes,
                    receivedBytes: scan.receivedBytes, priority: Int(scan.priority),
                    queueOrder: scan.queueRank ?? scan.sequence &* QueueOrder.step, speed: 0)
            }
        }
        let d = live.download
        return SortFields(
            sequence: d.sequence, state: d.state, totalBytes: d.totalBytes, receivedBytes: d.receivedBytes,
            priority: d.priority, queueOrder: d.queueOrder, speed: live.speed)
    }

    struct SortFields {
        var sequence: Int64
        var state: DownloadState
        var totalBytes: Int64?
        var receivedBytes: Int64
        var priority: Int
        var queueOrder: Int64
        var speed: Double
    }

    /// Unpacks the download for the reads to come (the registry packs it again later: `DownloadRegistry.reading`).
    func unpack() {
        guard let packed else { return }
        live.download = packed.download
        self.packed = nil
    }

    /// Packs the download if its machine is idle, no write's time is pending and nobody reads its file as it
    /// arrives.
    func pack() {
        guard packed == nil, readers == 0, lastWriteAt == nil, live.phase == .idle else { return }
        packed = PackedDownload(live.download)
        live.download = Self.vacant
    }

    /// Settles what a run left once its runner is gone and the machine is idle, so the download can be packed: the
    /// time of its last write goes into `updatedAt` (as a snapshot would show it), and a completed download drops
    /// its run (connections, meters, counters: no transition leaves `completed`), so a long-running server's memory
    /// follows what it keeps, not what it has fetched. Any other keeps its run (a failed one shows its last error
    /// from it, a paused one may go on). False while it runs, or its file is read as it arrives.
    func settleRun(clock: Clock) -> Bool {
        guard live.phase == .idle, readers == 0, packed == nil else { return false }
        changing()
        if let written = lastWriteAt {
            let wall = clock.wallTime.addingTimeInterval(written - clock.now)
            if wall > live.download.updatedAt { live.download.updatedAt = wall }
            lastWriteAt = nil
        }
        if live.download.state == .completed { live.run = RunBox() }
        return true
    }

    /// Whether nothing in the download can change without a change of its machine: nothing runs, no write's time or
    /// retry is pending, and it is still in the registry.
    var rests: Bool { !isRemoved && lastWriteAt == nil && live.phase == .idle && live.nextAttemptAt == nil }

    /// Puts up `response` as the download's status answer while it `rests`.
    func publish(_ response: HTTPResponse) {
        guard rests, let board = live.settings.statusBoard else { return }
        if board.put(response, for: id) { isPublished = true }
    }

    /// Puts up `value`, another front's answer about the download, under `key` while it `rests`.
    func publishFront(_ value: any Sendable, key: String) {
        guard rests, let board = live.settings.statusBoard else { return }
        if board.putFront(value, key: key, for: id) { isPublished = true }
    }

    /// Takes down what the board shows of the download before it changes, or joins the list (added, or in place
    /// of another box): its status answer, and every page of the list.
    func changing() {
        guard let board = live.settings.statusBoard else { return }
        if isPublished {
            isPublished = false
            board.withdraw(id)
        }
        board.clearPages()
    }

    /// What a client reads of the download now, its times on `clock`'s wall time.
    func snapshot(clock: Clock) -> DownloadSnapshot {
        let machine = self.machine
        var download = machine.download
        if let written = lastWriteAt {
            let wall = clock.wallTime.addingTimeInterval(written - clock.now)
            if wall > download.updatedAt { download.updatedAt = wall }
        }
        var snapshot = DownloadSnapshot(
            download: download, speed: machine.speed, activeConnections: machine.activeConnections)
        snapshot.lastError = machine.lastRetryError
        if !download.mirrors.isEmpty { snapshot.mirrorSpeeds = machine.mirrorSpeeds }
        snapshot.nextAttemptAt = machine.nextAttemptAt.map { clock.wallTime.addingTimeInterval($0 - clock.now) }
        return snapshot
    }
}
