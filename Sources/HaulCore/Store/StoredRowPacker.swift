import FoundationEssentials
import HaulLoop

/// Packs a stored download's row straight into `PackedDownload`'s bytes, read in place: no `String` for each text,
/// no fields built to be packed and thrown away (a million rows at start-up). Only rows of the usual shape are
/// packed so: every text valid UTF-8 (read whole, one that is not is repaired), no header, mirror or seldom-set
/// field (those are `DownloadExtras`, kept by reference); any other row is read whole (`DownloadColumn.decode`), as
/// is one whose column this reader does not know holds a value, so a column added later is never passed over. The
/// bytes are the ones `PackedDownload` packs of the download read whole (`StoredRowPackerTests`).
struct StoredRowPacker {
    private var head = PackWriter()
    private var middle = PackWriter()
    /// The segments of the download being read, from the rows of the join.
    var journal: [Segment] = []
    /// The journal's byte count, for a database from before segments (as `StoredRowReader.finish` reads it whole).
    private var received: Int64 = 0
    private var totalBytes: Int64?
    /// Where the packed bytes are written.
    private var chunk = PackedChunk(capacity: PackedChunk.size)
    /// The columns' positions, found once for the reading: a static's each read (its once token) was 3% of it.
    private let c = Columns()

    /// Starts packing the download of `row`; false (nothing kept) when the row is not of the usual shape.
    mutating func start(_ row: SQLRawRow) -> Bool {
        // A local reference: a property of `self` walked while `self` changes would be copied each time.
        let c = self.c
        head.bytes.removeAll(keepingCapacity: true)
        middle.bytes.removeAll(keepingCapacity: true)
        journal.removeAll(keepingCapacity: true)
        for column in c.required where row.isNull(column) { return false }
        for column in c.unread where !row.isNull(column) { return false }
        let headersEmpty = row.withText(c.headers) { text in
            guard let text else { return true }
            return text.count == 2 && text[0] == UInt8(ascii: "[") && text[1] == UInt8(ascii: "]")
        }
        guard headersEmpty, let state = row.withText(c.state, c.stateIndex) else { return false }
        let kind = row.withText(c.kind, c.kindIndex)
        let finalIsURL = row.withText(c.url) { url in
            row.withText(c.finalURL) { final in final != nil && url != nil && final!.elementsEqual(url!) }
        }
        let moved = row.int(c.moved) ?? 0
        head.byte(state)
        head.byte(kind)
        head.byte(
            (Self.flag(row, c.insecure) ? 1 : 0) | (Self.flag(row, c.sequential) ? 2 : 0)
                | (Self.flag(row, c.firstLast) ? 4 : 0) | (Self.flag(row, c.acceptsRanges) ? 8 : 0)
                | (moved >= 1 ? 16 : 0) | (moved == 2 ? 32 : 0) | (Self.flag(row, c.hookPending) ? 64 : 0)
                | (finalIsURL ? 128 : 0))
        head.int(row.int(c.sequence) ?? 0)
        head.int(Int64(Int(row.int(c.priority) ?? 0)))
        totalBytes = row.int(c.totalBytes)
        head.optional(totalBytes)
        head.optional(row.int(c.queueRank))
        received = row.int(c.received) ?? 0
        for column in c.leadingTexts { guard text(row, column) else { return false } }
        guard text(row, c.directory, orEmpty: true) else { return false }
        if !finalIsURL { guard text(row, c.finalURL) else { return false } }
        for column in c.trailingTexts { guard text(row, column) else { return false } }
        middle.int(Int64(Int(row.int(c.connections) ?? 1)))
        middle.int(Int64(Int(row.int(c.attempts) ?? 0)))
        middle.int(row.int(c.fence) ?? 0)
        middle.optional(row.int(c.maxSpeed))
        let created = Date(timeIntervalSince1970: row.double(c.createdAt) ?? 0)
        middle.date(created)
        middle.date(row.double(c.updatedAt).map(Date.init(timeIntervalSince1970:)) ?? created)
        middle.optionalDate(row.double(c.startedAt).map(Date.init(timeIntervalSince1970:)))
        middle.optionalDate(row.double(c.completedAt).map(Date.init(timeIntervalSince1970:)))
        let stamp = row.withText(c.fileStamp) { text in
            text.flatMap { FileStamp(text: String(decoding: $0, as: UTF8.self)) }
        }
        middle.fileStamp(stamp)
        middle.int(0)  // no headers
        return true
    }

    /// The download packed, once every row of its journal was read: its bytes in `chunk`.
    mutating func finish() -> PackedRow {
        if journal.isEmpty, received > 0 {
            journal = [Segment(start: 0, end: totalBytes.map { $0 - 1 }, received: received)]
        }
        var segments = PackWriter()
        segments.segments(journal)
        // Head, segments, texts and the rest, the journal (the same segments), no mirrors.
        let count = head.bytes.count + 2 * segments.bytes.count + middle.bytes.count + 1
        if chunk.used + count > chunk.capacity { chunk = PackedChunk(capacity: max(PackedChunk.size, count)) }
        let offset = chunk.used
        var at = chunk.start + offset
        func put(_ bytes: [UInt8]) {
            bytes.withUnsafeBufferPointer { bytes in
                guard let base = bytes.baseAddress else { return }
                at.initialize(from: base, count: bytes.count)
            }
            at += bytes.count
        }
        put(head.bytes)
        put(segments.bytes)
        put(middle.bytes)
        put(segments.bytes)
        at.initialize(to: 0)
        chunk.used = offset + count
        return PackedRow(chunk: chunk, offset: offset, count: count)
    }

    /// Writes the column's text (nil as nil, or as "" when `orEmpty`); false when it is not valid UTF-8, which a
    /// `String` would hold repaired. (No NUL is among its bytes: SQLite's text is read up to the first, PostgreSQL's
    /// holds none.)
    private mutating func text(_ row: SQLRawRow, _ column: Int, orEmpty: Bool = false) -> Bool {
        row.withText(column) { text in
            guard let text else {
                middle.string(orEmpty ? "" : nil)
                return true
            }
            guard Self.isASCII(text) || Self.isUTF8(text) else { return false }
            middle.unsigned(UInt64(text.count) + 1)
            middle.bytes.append(contentsOf: text)
            return true
        }
    }

    /// Whether the bytes are valid UTF-8: what a `String` made of them holds unchanged.
    private static func isUTF8(_ text: UnsafeBufferPointer<UInt8>) -> Bool {
        var string = String(decoding: text, as: UTF8.self)
        return string.withUTF8 { $0.elementsEqual(text) }
    }

    /// Whether no byte has its high bit set, eight bytes at a time.
    private static func isASCII(_ text: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let start = text.baseAddress else { return true }
        let raw = UnsafeRawPointer(start)
        var at = 0
        while at + 8 <= text.count {
            if raw.loadUnaligned(fromByteOffset: at, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { return false }
            at += 8
        }
        while at < text.count {
            if text[at] >= 0x80 { return false }
            at += 1
        }
        return true
    }

    private static func flag(_ row: SQLRawRow, _ column: Int) -> Bool { (row.int(column) ?? 0) != 0 }

    /// Where each column read is in a row selected with `DownloadColumn.all`'s names, and the names of the states
    /// and kinds as bytes.
    private final class Columns {
        let id = at("id"), sequence = at("seq"), url = at("url"), state = at("state")
        let finalURL = at("final_url"), totalBytes = at("total_bytes"), received = at("received_bytes")
        let acceptsRanges = at("accepts_ranges"), attempts = at("attempts")
        let createdAt = at("created_at"), updatedAt = at("updated_at"), startedAt = at("started_at")
        let completedAt = at("completed_at"), fileStamp = at("file_stamp"), queueRank = at("queue_rank")
        let hookPending = at("hook_pending"), moved = at("moved"), fence = at("fence")
        let directory = at("directory"), connections = at("connections"), priority = at("priority")
        let maxSpeed = at("max_speed"), headers = at("headers"), insecure = at("insecure")
        let sequential = at("sequential"), firstLast = at("first_last"), kind = at("kind")
        /// A row without one of these is malformed: read whole, it throws.
        let required = DownloadColumn.all.indices.filter { DownloadColumn.all[$0].required }
        /// The texts before the directory, and after it and the final URL, in the packed order.
        let leadingTexts = ["id", "url", "requested_filename", "filename", "category", "owner"].map(at)
        let trailingTexts = [
            "tags", "etag", "last_modified", "content_type", "claimed_by", "owner_name", "completed_directory",
        ].map(at)
        /// Every column not read above: a value in one sends the row the whole way.
        let unread: [Int]
        private let states = PackedDownload.states.map { Array($0.rawValue.utf8) }
        private let kinds = PackedDownload.kinds.map { Array($0.rawValue.utf8) }
        private let failed = PackedDownload.states.firstIndex(of: .failed)!
        private let auto = PackedDownload.kinds.firstIndex(of: .auto)!

        init() {
            let read = Set(
                [
                    id, sequence, url, state, finalURL, totalBytes, received, acceptsRanges, attempts, createdAt,
                    updatedAt, startedAt, completedAt, fileStamp, queueRank, hookPending, moved, fence, directory,
                    connections, priority, maxSpeed, headers, insecure, sequential, firstLast, kind,
                ] + leadingTexts + trailingTexts)
            unread = DownloadColumn.all.indices.filter { !read.contains($0) }
        }

        /// The state's index in `PackedDownload.states`, an unknown one failed (as `DownloadColumn` reads it).
        func stateIndex(_ text: UnsafeBufferPointer<UInt8>?) -> UInt8? {
            guard let text else { return nil }
            return UInt8(states.firstIndex { $0.elementsEqual(text) } ?? failed)
        }

        /// The kind's index in `PackedDownload.kinds`, an unknown or missing one auto.
        func kindIndex(_ text: UnsafeBufferPointer<UInt8>?) -> UInt8 {
            UInt8(text.flatMap { text in kinds.firstIndex { $0.elementsEqual(text) } } ?? auto)
        }

        private static func at(_ name: String) -> Int { DownloadColumn.all.firstIndex { $0.name == name }! }
    }
}

/// A stored download as the store reads it at start-up: packed straight from its row, or read whole.
enum StoredDownload {
    case packed(PackedRow)
    case whole(Download)

    var download: Download {
        switch self {
        case .packed(let row): row.packed.download
        case .whole(let download): download
        }
    }
}

/// A download packed by the reading thread, in a chunk it shares with the downloads packed before and after it.
struct PackedRow {
    let chunk: PackedChunk
    let offset: Int
    let count: Int

    /// The download packed, its bytes copied into an array of their own where this is called: on the engine's
    /// thread, beside the download's box (bytes allocated on the reading thread lay apart from their boxes, and a
    /// walk of the list reading both, a sorted page of a million, took 0.60-0.65 s instead of 0.45-0.47).
    var packed: PackedDownload {
        PackedDownload(assembled: Array(UnsafeBufferPointer(start: chunk.start + offset, count: count)))
    }
}

/// Memory the reading thread writes packed downloads into, one after another: one allocation for many, instead of
/// one each on that thread. The reader writes only past what it handed on (`used` is its alone), and the hand-over
/// orders its writes before the reads of them; the chunk is freed with the last row that refers to it.
final class PackedChunk: @unchecked Sendable {
    static let size = 1 << 16
    let start: UnsafeMutablePointer<UInt8>
    let capacity: Int
    var used = 0

    init(capacity: Int) {
        start = .allocate(capacity: capacity)
        self.capacity = capacity
    }

    deinit { start.deallocate() }
}
