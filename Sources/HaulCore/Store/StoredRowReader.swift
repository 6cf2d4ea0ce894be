import HaulLoop

/// Makes downloads of the rows of the downloads' join with their segments (a row per segment, a download's rows
/// one after another): each is handed on as the first row of the next is read. One of the usual shape is packed
/// straight from its first row when `packing` (`StoredRowPacker`); any other has its fields filled in place and
/// wrapped once (a `Download` changed while another reference to its storage lives copies every field). A value of
/// its own, so reading a row checks no captured variable's exclusive access (2% of reading a million).
struct StoredRowReader {
    /// The download's columns come first; the segment's follow: `width`, `width + 1` and `width + 2`.
    private let width = DownloadColumn.all.count
    private let packing: Bool
    private var packer = StoredRowPacker()
    private var isPacking = false
    private var whole: (fields: DownloadFields, received: Int64)?
    private var currentID: [UInt8] = []
    private var values: [SQLValue] = []
    /// A few content types cover most files: one string each, shared by every download of that type.
    private var contentTypes: [String: String] = [:]

    init(packing: Bool) { self.packing = packing }

    /// Reads `row`; returns the download before it when the row begins another.
    mutating func read(_ row: SQLRawRow) throws -> StoredDownload? {
        var done: StoredDownload?
        if try begins(row) {
            done = finish()
            if packing, packer.start(row) {
                isPacking = true
            } else {
                values.removeAll(keepingCapacity: true)
                for column in 0..<width { values.append(row.value(column)) }
                var fields = try DownloadColumn.decode(values)
                if let type = fields.contentType {
                    if let shared = contentTypes[type] {
                        fields.contentType = shared
                    } else if contentTypes.count < 256 {
                        contentTypes[type] = type
                    }
                }
                whole = (fields, values[DownloadColumn.receivedPosition].int ?? 0)
            }
        }
        if let start = row.int(width), let received = row.int(width + 2) {
            let segment = Segment(start: start, end: row.int(width + 1), received: received)
            if isPacking { packer.journal.append(segment) } else { whole?.fields.journal.append(segment) }
        }
        return done
    }

    /// The download being read, once its last row was: what is left after the last row.
    mutating func finish() -> StoredDownload? {
        if isPacking {
            isPacking = false
            return .packed(packer.finish())
        }
        guard whole != nil else { return nil }
        if whole!.fields.journal.isEmpty, whole!.received > 0 {
            // A database from before segments recorded only a byte count: one segment from the start.
            whole!.fields.journal = [
                Segment(start: 0, end: whole!.fields.totalBytes.map { $0 - 1 }, received: whole!.received)
            ]
        }
        whole!.fields.segments = whole!.fields.journal
        // Moved out, not copied: a copy retains every string and array of the download once more.
        return .whole(Download(fields: whole.take()!.fields))
    }

    /// Whether `row` begins another download than the one being read.
    private mutating func begins(_ row: SQLRawRow) throws -> Bool {
        let reading = isPacking || whole != nil
        return try row.withText(DownloadColumn.idPosition) { id in
            guard let id else { throw DatabaseError("malformed download row: no id") }
            if reading && id.elementsEqual(currentID) { return false }
            currentID.removeAll(keepingCapacity: true)
            currentID.append(contentsOf: id)
            return true
        }
    }
}
