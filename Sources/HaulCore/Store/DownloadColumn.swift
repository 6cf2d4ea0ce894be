import FoundationEssentials
import HaulLoop

/// One column of the `downloads` table: its name, and how a download is written to it and read back from it. The
/// list below (and, for the per-download options, their rows in `DownloadOptions`) is the only place a field meets
/// its column, for writing and for reading alike, so a column cannot be written at one position and read from
/// another.
struct DownloadColumn: Sendable {
    let name: String
    /// A row without a value here is malformed.
    var required = false
    /// Nil for a column only claims write (`claimed_by`, `fence`): a save leaves it alone.
    let write: (@Sendable (Download) -> SQLValue)?
    /// Reads the column into the download's fields, not through `Download`'s copy-on-write accessors: decoding a
    /// row sets some sixty of them.
    let read: @Sendable (inout DownloadFields, SQLValue) -> Void

    /// The columns a save writes.
    static let written = all.filter { $0.write != nil }

    /// Where a row selected with `all`'s names holds the id and the journal's byte count: read by position, not by
    /// name (a name's lookup five times a row was a tenth of reading a million).
    static let idPosition = all.firstIndex { $0.name == "id" }!
    static let receivedPosition = all.firstIndex { $0.name == "received_bytes" }!

    /// Every column: the download's own, then the options' (`id` first: reading it makes the download).
    static let all: [DownloadColumn] = base + DownloadOptions.all.compactMap(\.storage)

    private static let base: [DownloadColumn] = [
        DownloadColumn(name: "id", required: true, write: { .text($0.id) }) { d, v in d.id = v.string ?? "" },
        DownloadColumn(name: "seq", required: true, write: { .integer($0.sequence) }) { d, v in
            d.sequence = v.int ?? 0
        },
        DownloadColumn(name: "url", required: true, write: { .text($0.url) }) { d, v in d.url = v.string ?? "" },
        DownloadColumn(name: "filename", write: { text($0.filename) }) { d, v in d.filename = v.string },
        DownloadColumn(name: "state", required: true, write: { .text($0.state.rawValue) }) { d, v in
            d.state = v.string.flatMap(DownloadState.init(rawValue:)) ?? .failed
        },
        DownloadColumn(name: "final_url", write: { text($0.finalURL) }) { d, v in d.finalURL = v.string },
        DownloadColumn(name: "total_bytes", write: { integer($0.totalBytes) }) { d, v in d.totalBytes = v.int },
        // What the journal vouches for; read back through the segments (or, from before them, as one segment:
        // `StoredRowReader.finish`).
        DownloadColumn(name: "received_bytes", write: { .integer($0.durableBytes) }) { _, _ in },
        DownloadColumn(name: "accepts_ranges", write: { .integer($0.acceptsRanges ? 1 : 0) }) { d, v in
            d.acceptsRanges = (v.int ?? 0) != 0
        },
        DownloadColumn(name: "etag", write: { text($0.etag) }) { d, v in d.etag = v.string },
        DownloadColumn(name: "last_modified", write: { text($0.lastModified) }) { d, v in d.lastModified = v.string },
        DownloadColumn(name: "content_type", write: { text($0.contentType) }) { d, v in d.contentType = v.string },
        DownloadColumn(name: "error_code", write: { text($0.error?.code.rawValue) }) { d, v in
            d.error = v.string.map { DownloadError(ErrorCode(rawValue: $0), d.error?.message ?? "") }
        },
        DownloadColumn(name: "error_message", write: { text($0.error?.message) }) { d, v in
            if d.error != nil { d.error?.message = v.string ?? "" }
        },
        DownloadColumn(name: "attempts", write: { .integer(Int64($0.attempts)) }) { d, v in
            d.attempts = Int(v.int ?? 0)
        },
        DownloadColumn(name: "created_at", required: true, write: { .real($0.createdAt.timeIntervalSince1970) }) {
            d, v in
            d.createdAt = date(v) ?? Date(timeIntervalSince1970: 0)
        },
        DownloadColumn(name: "updated_at", write: { .real($0.updatedAt.timeIntervalSince1970) }) { d, v in
            d.updatedAt = date(v) ?? d.createdAt
        },
        DownloadColumn(name: "started_at", write: { real($0.startedAt) }) { d, v in d.startedAt = date(v) },
        DownloadColumn(name: "completed_at", write: { real($0.completedAt) }) { d, v in d.completedAt = date(v) },
        DownloadColumn(name: "mirrors", write: { $0.mirrors.isEmpty ? .null : .text(Mirror.encode($0.mirrors)) }) {
            d, v in
            d.mirrors = Mirror.decode(v.string)
        },
        DownloadColumn(name: "file_stamp", write: { text($0.fileStamp?.text) }) { d, v in
            d.fileStamp = v.string.flatMap(FileStamp.init(text:))
        },
        DownloadColumn(name: "queue_rank", write: { integer($0.queueRank) }) { d, v in d.queueRank = v.int },
        DownloadColumn(name: "owner", write: { text($0.owner) }) { d, v in d.owner = v.string },
        DownloadColumn(name: "owner_name", write: { text($0.ownerName) }) { d, v in d.ownerName = v.string },
        DownloadColumn(name: "completed_directory", write: { text($0.completedDirectory) }) { d, v in
            d.completedDirectory = v.string
        },
        DownloadColumn(name: "hook_pending", write: { .integer($0.hookPending ? 1 : 0) }) { d, v in
            d.hookPending = (v.int ?? 0) != 0
        },
        DownloadColumn(name: "hook_status", write: { integer($0.hookStatus.map(Int64.init)) }) { d, v in
            d.hookStatus = v.int.map { Int($0) }
        },
        DownloadColumn(name: "hook_error", write: { text($0.hookError) }) { d, v in d.hookError = v.string },
        DownloadColumn(name: "hook_at", write: { real($0.hookAt) }) { d, v in d.hookAt = date(v) },
        // 0 where it was written, 1 moved (its marker perhaps still there), 2 moved and settled.
        DownloadColumn(name: "moved", write: { .integer($0.moved ? ($0.moveSettled ? 2 : 1) : 0) }) { d, v in
            d.moved = (v.int ?? 0) >= 1
            d.moveSettled = (v.int ?? 0) == 2
        },
        DownloadColumn(name: "move_error", write: { text($0.moveError) }) { d, v in d.moveError = v.string },
        DownloadColumn(name: "hls", write: { text($0.hls?.json.serialized()) }) { d, v in
            d.hls = v.string.flatMap { try? JSONValue.parse($0) }.flatMap(HLSInfo.init(json:))
        },
        DownloadColumn(name: "torrent", write: { text($0.torrent?.json.serialized()) }) { d, v in
            d.torrent = v.string.flatMap { try? JSONValue.parse($0) }.flatMap(TorrentInfo.init(json:))
        },
        DownloadColumn(name: "claimed_by", write: nil) { d, v in d.node = v.string },
        DownloadColumn(name: "fence", write: nil) { d, v in d.fence = v.int ?? 0 },
    ]

    /// A download's fields from a row selected with `all`'s names, in that order.
    static func decode(_ row: some RandomAccessCollection<SQLValue>) throws -> DownloadFields {
        guard row.count == all.count else { throw DatabaseError("malformed download row") }
        var download = DownloadFields(
            id: "", sequence: 0, url: "", headers: [], requestedFilename: nil, directory: "",
            state: .failed, connections: 1, priority: 0, maxSpeed: nil,
            createdAt: Date(timeIntervalSince1970: 0))
        // By position: a column taken out of the list for each value costs three retains and releases, sixty times.
        var position = row.startIndex
        for index in all.indices {
            if all[index].required, row[position] == .null {
                throw DatabaseError("malformed download row: no \(all[index].name)")
            }
            all[index].read(&download, row[position])
            position = row.index(after: position)
        }
        // Most downloads were not redirected, and most files kept the name asked for: each pair shares one string.
        if download.finalURL == download.url { download.finalURL = download.url }
        if download.filename == download.requestedFilename { download.filename = download.requestedFilename }
        return download
    }

    private static func date(_ value: SQLValue) -> Date? { value.double.map(Date.init(timeIntervalSince1970:)) }
}
