import HaulLoop

/// Names one timer a download machine asked for; unique within its download.
public struct TimerID: Hashable, Sendable, CustomStringConvertible {
    public let value: Int
    public init(_ value: Int) { self.value = value }
    public var description: String { "timer\(value)" }
}

/// An inclusive byte range of the part file.
public struct ByteRange: Equatable, Sendable {
    public var first: Int64
    public var last: Int64

    public init(_ first: Int64, _ last: Int64) {
        self.first = first
        self.last = last
    }
}

/// What a transfer the machine asks for fetches. Each holds one of the host's connections while it runs.
public enum FetchKind: Equatable, Sendable {
    /// The download's first request: GET with `Range: bytes=0-`. Its headers are the probe (size, validators, name,
    /// range support); its body is the start of the file, written as the first segment.
    case probe
    /// HEAD, only when the first request's answer tells no size: HEAD may, so a body running past it is caught.
    case head
    /// A segment: bytes from `start` to `end` (inclusive), or to the end of the file when `end` is nil, sent with
    /// `If-Range: ifRange`.
    case range(start: Int64, end: Int64?, ifRange: String?)
    /// The whole file with a plain GET.
    case whole
    /// Bytes from `start` to `end` (inclusive) compared with what the part file holds there, never written: a
    /// mirror's first bytes against the first source's. Sent with `If-Range: ifRange`.
    case compare(start: Int64, end: Int64, ifRange: String?)
}

/// How the part file is to be opened: under its current name, or under a free one derived from `base`.
public struct PartFileRequest: Equatable, Sendable {
    /// The name the download has already (its part file is `name.part`), if any.
    public var current: String?
    /// The name to start from when a new one is needed: the client's, or one derived from the origin's answer.
    public var base: String

    public init(current: String?, base: String) {
        self.current = current
        self.base = base
    }
}

/// What opening the part file found.
public struct PartFileInfo: Equatable, Sendable {
    /// The name chosen (the part file is `name.part`).
    public var name: String
    /// Bytes the part file holds (its size).
    public var size: Int64
    /// Bytes of disk it holds (blocks).
    public var allocated: Int64
    /// Bytes free on its file system.
    public var free: Int64
    /// A part file nobody journals (another tool's, or ours with the database lost) was taken over, with this size.
    public var adopted: Int64?
    /// The part file under the current name was someone else's (another link, another owner), and why: the name was
    /// passed over for a free one.
    public var passedOver: String?
    /// The most bytes the file may have under its token's `quota_bytes` (what the token's other downloads leave);
    /// nil without a quota.
    public var allowance: Int64?

    public init(
        name: String, size: Int64, allocated: Int64, free: Int64, adopted: Int64? = nil,
        passedOver: String? = nil, allowance: Int64? = nil
    ) {
        self.allowance = allowance
        self.name = name
        self.size = size
        self.allocated = allocated
        self.free = free
        self.adopted = adopted
        self.passedOver = passedOver
    }
}

/// What happens to a download, as the machine hears it. Times are the clock's (monotonic seconds).
public enum MachineEvent: Sendable {
    /// A slot is free: probe and fetch it.
    case start(now: Double)
    /// Found at start finished already (a crash after its file got the name `name`).
    case foundFinished(name: String, file: FileStamp?)
    /// The final response of transfer `id`, before its body.
    case responded(TransferID, TransferResponse)
    /// `count` body bytes arrived on transfer `id` (not yet written).
    case received(TransferID, count: Int)
    /// The `write` the machine asked for succeeded.
    case wrote(TransferID, count: Int)
    /// The `write` failed; `count` bytes were not written.
    case writeFailed(TransferID, FileError)
    /// Transfer `id` ended (after `abort` too, with `.aborted`; never after `cancel`).
    case ended(TransferID, TransferResult)
    /// A `compare` transfer ended: `checked` bytes were compared, the first that differed at `differsAt`.
    case compared(TransferID, checked: Int64, differsAt: Int64?, TransferResult)
    /// The fetch could not be started at all.
    case couldNotStart(TransferID, String)
    /// The fetch was not started: the host has no connection to spare.
    case noHostConnection(TransferID)
    /// A host connection was given back somewhere: try again.
    case hostConnectionFreed
    case fileOpened(PartFileInfo)
    /// Opening, truncating, reserving, syncing or hashing the part file failed.
    case fileFailed(FileError)
    /// The `reserve` was done; false when the file system cannot reserve (bytes then take space as they come).
    case reserved(Bool)
    /// Free bytes on the part file's file system, as asked by `measureFreeSpace`.
    case freeSpace(Int64)
    /// The part file was synced with `segments` (of `generation`) on disk; `final` for the sync of `closeFile`.
    case synced([Segment], generation: Int, final: Bool)
    /// A checkpoint's sync failed.
    case syncFailed(FileError)
    /// The part file is synced and hashed: the hex digest when a checksum was asked for.
    case verified(String?)
    case published(name: String, file: FileStamp?)
    case publishFailed(DownloadError)
    /// A torrent's files are named (`published`'s news) and it seeds.
    case torrentSeeding(name: String, file: FileStamp?)
    /// A seeding torrent met its limit (or cannot seed): it is completed.
    case torrentSeeded
    case timer(TimerID)
    /// The periodic tick: speed samples, stall watch, checkpoints.
    case tick(now: Double)
    case pause
    case resume
    case change(DownloadChanges)
    /// Removal (`keepFile` false) or server shutdown: end everything, keep the state.
    case stop(keepFile: Bool)
    /// At start-up: the download was running when the server stopped.
    case interrupted
    /// A reader waits for byte `offset`, which is not on disk: it is fetched next.
    case wanted(Int64)
    /// The first answer of a download of kind `auto` is an HLS playlist: its stream answers the same request.
    case becamePlaylist
    /// An HLS download's playlist was read, or a piece of it written.
    case playlist(HLSInfo)
    /// A torrent's metadata is in and its files were checked, nothing asked for yet: what it holds.
    case torrentReady(TorrentInfo)
    /// A torrent's swarm and files now, and its download rate (bytes per second).
    case torrentProgress(TorrentInfo, rate: Double)
    /// Every wanted piece of the torrent is verified on disk.
    case torrentFinished
    /// The torrent cannot go on (its files' names, the quota, the disk, libtorrent's error).
    case torrentFailed(DownloadError)
}

/// What the runner does with a download's torrent in the BitTorrent session.
public enum TorrentStep: Equatable, Sendable {
    /// Add it (from its stored .torrent or resume data, else its magnet), asking for no piece yet.
    case start
    /// Its files passed the checks: fetch them.
    case release
    /// Take it out of the session and give its folder or file its final name from `base`; then `published`.
    case publish(base: String)
    /// Take it out of the session, saving its resume data (the files stay).
    case stop
    /// Take it out of the session and delete its files and staging folder (the download is removed).
    case remove
    /// Add it again from its named files `name` in the download's folder, to upload until a seeding limit is met.
    case seed(name: String)
    /// Take the seeding torrent out of the session and remove its staging folder; its files stay.
    case unseed
    /// A reader waits for byte `offset` of its one file fetched: its pieces first.
    case want(offset: Int64)
}

/// What the machine asks its runner to do, in order.
public enum MachineAction: Equatable, Sendable {
    case fetch(TransferID, FetchKind)
    /// The same from another source of the file (a mirror's URL).
    case fetchFrom(TransferID, FetchKind, url: String)
    /// Stop this transfer and forget it: nothing more is heard of it.
    case cancel(TransferID)
    /// The answer to the callback of transfer `id` in progress: stop it (it still ends, with `.aborted`).
    case abort(TransferID)
    /// Write the first `count` bytes of the chunk being received on `id` at `offset`.
    case write(TransferID, offset: Int64, count: Int)
    case openPartFile(PartFileRequest)
    case truncate(to: Int64)
    case reserve(Int64)
    /// Give back the disk blocks of ranges never written.
    case release([ByteRange])
    case measureFreeSpace
    /// Sync the part file off the loop; then `synced` with these segments.
    case checkpoint([Segment], generation: Int)
    /// Close the part file, syncing it first (then `synced`, final) when `sync` holds the segments to journal.
    case closeFile(sync: [Segment]?, generation: Int)
    /// Sync and (with an algorithm) hash the part file off the loop; then `verified`.
    case verify(DigestAlgorithm?)
    /// Give the part file its final name, derived from `base`; then `published` or `publishFailed`.
    case publish(base: String)
    /// Close the part file and remove it.
    case deletePartFile
    case schedule(TimerID, after: Double)
    case cancelTimer(TimerID)
    /// Store the journal (what a sync vouched for).
    case saveJournal([Segment])
    case log(Logger.Level, String, [String: String])
    case torrent(TorrentStep)
    /// The download no longer needs its slot (completed, failed, paused or stopped).
    case finished
}
