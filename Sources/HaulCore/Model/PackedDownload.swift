import FoundationEssentials

/// An idle download's fields packed into one array of bytes: numbers as variable-length integers, strings as
/// their UTF-8 bytes behind a length, nil as one byte, and the seldom-set fields (`DownloadExtras`) kept by
/// reference. A paused download that never started takes about 100 bytes this way instead of its fields' 480 and
/// its URL's string of its own; a completed one about 250 instead of some 900 (its validators, type, final URL and
/// ranges each a string or an array of their own). `MachineBox` holds a download so while its machine is idle and
/// unpacks it (`download`) when asked; the packing is lossless, so what is read is what was packed.
struct PackedDownload: Equatable {
    private let bytes: [UInt8]
    private let extras: ExtrasBox

    /// Byte 0 is the state's index in `DownloadState.allCases`: read without unpacking the rest.
    static let states = DownloadState.allCases
    static let kinds = DownloadKind.allCases
    private static let mirrorStates: [Mirror.State] = [.pending, .active, .dropped]

    init(_ download: Download) {
        let f = download.storage.fields
        var w = PackWriter()
        w.bytes.reserveCapacity(256)
        w.byte(UInt8(Self.states.firstIndex(of: f.state)!))
        w.byte(UInt8(Self.kinds.firstIndex(of: f.kind)!))
        // The final URL is most often the URL itself: a bit then, not a second copy.
        let finalIsURL = f.finalURL != nil && f.finalURL == f.url
        w.byte(
            (f.insecure ? 1 : 0) | (f.sequential ? 2 : 0) | (f.firstLast ? 4 : 0) | (f.acceptsRanges ? 8 : 0)
                | (f.moved ? 16 : 0) | (f.moveSettled ? 32 : 0) | (f.hookPending ? 64 : 0) | (finalIsURL ? 128 : 0))
        // What walks of the list read comes first: the numbers a sort reads, then the texts a filter reads.
        w.int(f.sequence)
        w.int(Int64(f.priority))
        w.optional(f.totalBytes)
        w.optional(f.queueRank)
        w.segments(f.segments)
        w.string(f.id)
        w.string(f.url)
        w.string(f.requestedFilename)
        w.string(f.filename)
        w.string(f.category)
        w.string(f.owner)
        w.string(f.directory)
        if !finalIsURL { w.string(f.finalURL) }
        w.string(f.tags)
        w.string(f.etag)
        w.string(f.lastModified)
        w.string(f.contentType)
        w.string(f.node)
        w.string(f.ownerName)
        w.string(f.completedDirectory)
        w.int(Int64(f.connections))
        w.int(Int64(f.attempts))
        w.int(f.fence)
        w.optional(f.maxSpeed)
        w.date(f.createdAt)
        w.date(f.updatedAt)
        w.optionalDate(f.startedAt)
        w.optionalDate(f.completedAt)
        w.fileStamp(f.fileStamp)
        w.int(Int64(f.headers.count))
        for header in f.headers {
            w.string(header.name)
            w.string(header.value)
        }
        w.segments(f.journal)
        w.int(Int64(f.mirrors.count))
        for mirror in f.mirrors {
            w.string(mirror.url)
            w.byte(UInt8(Self.mirrorStates.firstIndex(of: mirror.state)!))
            w.string(mirror.reason)
            w.string(mirror.etag)
            w.string(mirror.lastModified)
            w.int(mirror.receivedBytes)
            w.int(Int64(mirror.errors))
        }
        // Copied to an array of its own size: the one written grew by doubling.
        let written = w.bytes
        bytes = [UInt8](unsafeUninitializedCapacity: written.count) { buffer, count in
            count = buffer.initialize(fromContentsOf: written)
        }
        extras = f.extras
    }

    /// Bytes a writer of this layout assembled (`StoredRowPacker`), with no extras.
    init(assembled: [UInt8]) {
        bytes = assembled
        extras = ExtrasBox()
    }

    /// The state, read from the first byte.
    var state: DownloadState { Self.states[Int(bytes[0])] }

    /// Flags read from the third byte.
    var hookPending: Bool { bytes[2] & 64 != 0 }
    var moveSettled: Bool { bytes[2] & 32 != 0 }

    /// Whether a completed directory is set, read past the texts before it.
    var hasCompletedDirectory: Bool {
        bytes.withUnsafeBufferPointer { buffer in
            var r = PackReader(buffer)
            r.at = 3
            r.passNumbers()
            // id, url, requested name, name, category, owner, directory, the final URL unless it is the URL, tags,
            // validators, type, node and owner's name.
            for _ in 0..<(buffer[2] & 0x80 != 0 ? 13 : 14) { _ = r.range() }
            return r.range() != nil
        }
    }

    /// The id, read from the bytes after the numbers.
    var id: String {
        bytes.withUnsafeBufferPointer { buffer in
            var r = PackReader(buffer)
            r.at = 3
            r.passNumbers()
            return r.string()!
        }
    }

    /// The download as it was packed.
    var download: Download {
        bytes.withUnsafeBufferPointer { buffer in
            var r = PackReader(buffer)
            let state = Self.states[Int(r.byte())]
            let kind = Self.kinds[Int(r.byte())]
            let flags = r.byte()
            let sequence = r.int()
            let priority = Int(r.int())
            let totalBytes = r.optional()
            let queueRank = r.optional()
            let segments = r.segments()
            let id = r.string()!
            let url = r.string()!
            let requestedFilename = r.string()
            var f = DownloadFields(
                id: id, sequence: sequence, url: url, headers: [], requestedFilename: requestedFilename,
                directory: "", state: state, connections: 0, priority: priority, maxSpeed: nil,
                createdAt: Date(timeIntervalSinceReferenceDate: 0))
            f.kind = kind
            f.insecure = flags & 1 != 0
            f.sequential = flags & 2 != 0
            f.firstLast = flags & 4 != 0
            f.acceptsRanges = flags & 8 != 0
            f.moved = flags & 16 != 0
            f.moveSettled = flags & 32 != 0
            f.hookPending = flags & 64 != 0
            f.totalBytes = totalBytes
            f.queueRank = queueRank
            f.segments = segments
            f.filename = r.string()
            f.category = r.string()
            f.owner = r.string()
            f.directory = r.string()!
            f.finalURL = flags & 0x80 != 0 ? url : r.string()
            f.tags = r.string()
            f.etag = r.string()
            f.lastModified = r.string()
            f.contentType = r.string()
            f.node = r.string()
            f.ownerName = r.string()
            f.completedDirectory = r.string()
            f.connections = Int(r.int())
            f.attempts = Int(r.int())
            f.fence = r.int()
            f.maxSpeed = r.optional()
            f.createdAt = r.date()
            f.updatedAt = r.date()
            f.startedAt = r.optionalDate()
            f.completedAt = r.optionalDate()
            if r.byte() == 1 {
                let device = r.unsigned()
                let inode = r.unsigned()
                f.fileStamp = FileStamp(device: device, inode: inode, size: r.int())
            }
            let headers = Int(r.int())
            if headers > 0 {
                f.headers.reserveCapacity(headers)
                for _ in 0..<headers {
                    let name = r.string()!
                    f.headers.append(HeaderField(name: name, value: r.string()!))
                }
            }
            f.journal = r.segments()
            let mirrors = Int(r.int())
            for _ in 0..<mirrors {
                var mirror = Mirror(url: r.string()!)
                mirror.state = Self.mirrorStates[Int(r.byte())]
                mirror.reason = r.string()
                mirror.etag = r.string()
                mirror.lastModified = r.string()
                mirror.receivedBytes = r.int()
                mirror.errors = Int(r.int())
                f.mirrors.append(mirror)
            }
            f.extras = extras
            return Download(fields: f)
        }
    }

    /// What a walk of the list reads (a filter, a sort key), read from the bytes without a copy of any: the texts
    /// as ranges of `text`.
    struct Scan {
        var state: DownloadState
        /// The state's index in `states`.
        var stateIndex: Int
        var kind: DownloadKind
        var id = 0..<0, url = 0..<0
        var requestedFilename: Range<Int>?, filename: Range<Int>?, category: Range<Int>?, owner: Range<Int>?
        var directory = 0..<0
        var sequence: Int64 = 0, priority: Int64 = 0
        var totalBytes: Int64?, queueRank: Int64?
        var receivedBytes: Int64 = 0
    }

    /// Calls `body` with the scan of the fields (the texts too when `texts`) and the bytes its ranges are in.
    func scan<Result>(texts: Bool, _ body: (Scan, UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        bytes.withUnsafeBufferPointer { buffer in
            var r = PackReader(buffer)
            let state = Int(r.byte())
            var scan = Scan(state: Self.states[state], stateIndex: state, kind: Self.kinds[Int(r.byte())])
            r.at += 1  // the flags
            scan.sequence = r.int()
            scan.priority = r.int()
            scan.totalBytes = r.optional()
            scan.queueRank = r.optional()
            for _ in 0..<r.int() {
                _ = r.int()
                scan.receivedBytes += r.int()
                _ = r.optional()
            }
            if texts {
                scan.id = r.range()!
                scan.url = r.range()!
                scan.requestedFilename = r.range()
                scan.filename = r.range()
                scan.category = r.range()
                scan.owner = r.range()
                scan.directory = r.range()!
            }
            return body(scan, buffer)
        }
    }

    /// Whether the download's file is `name` in `directory`, told from its bytes (by their bytes: two names a
    /// file system tells apart are two names).
    func names(_ name: String, in directory: String) -> Bool {
        scan(texts: true) { scan, text in
            guard let filename = scan.filename else { return false }
            var (name, directory) = (name, directory)
            return name.withUTF8 { $0.elementsEqual(text[filename]) }
                && directory.withUTF8 { $0.elementsEqual(text[scan.directory]) }
        }
    }

    /// Whether `filter` matches the download, told from its bytes; nil where only the download unpacked can tell
    /// (a torrent named by its metadata, a URL with credentials to hide, text beyond ASCII).
    func matches(_ filter: DownloadFilter) -> Bool? {
        scan(texts: true) { scan, text in
            func equal(_ range: Range<Int>?, _ value: String) -> Bool {
                guard let range else { return false }
                var value = value
                return value.withUTF8 { $0.elementsEqual(text[range]) }
            }
            if let states = filter.states, !states.contains(scan.state) { return false }
            if let kinds = filter.kinds, !kinds.contains(scan.kind) { return false }
            if let category = filter.category, !equal(scan.category, category) { return false }
            if let owner = filter.owner, !equal(scan.owner, owner) { return false }
            if filter.ids != nil || filter.idPrefix != nil {
                let id = String(decoding: UnsafeBufferPointer(rebasing: text[scan.id]), as: UTF8.self)
                if let ids = filter.ids, !ids.contains(id) { return false }
                if let prefix = filter.idPrefix, !id.hasPrefix(prefix) { return false }
            }
            guard var search = filter.search, !search.isEmpty else { return true }
            return search.withUTF8 { needle -> Bool? in
                if let name = scan.filename ?? scan.requestedFilename {
                    guard let found = String.asciiContains(UnsafeBufferPointer(rebasing: text[name]), needle) else {
                        return nil
                    }
                    if found { return true }
                } else if scan.kind == .torrent {
                    return nil
                }
                let url = UnsafeBufferPointer(rebasing: text[scan.url])
                if url.contains(UInt8(ascii: "@")) { return nil }
                return String.asciiContains(url, needle)
            }
        }
    }

    /// Bytes held (the array's own; the extras are shared with the download packed).
    var packedSize: Int { bytes.count }
}

/// Reads back what `PackWriter` wrote, in the same order.
private struct PackReader {
    let buffer: UnsafeBufferPointer<UInt8>
    var at = 0

    init(_ buffer: UnsafeBufferPointer<UInt8>) { self.buffer = buffer }

    mutating func byte() -> UInt8 {
        defer { at += 1 }
        return buffer[at]
    }

    mutating func unsigned() -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let next = byte()
            value |= UInt64(next & 0x7f) << shift
            if next < 0x80 { return value }
            shift += 7
        }
    }

    mutating func int() -> Int64 {
        let raw = unsigned()
        return Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
    }

    mutating func optional() -> Int64? { byte() == 0 ? nil : int() }

    mutating func date() -> Date {
        var bits: UInt64 = 0
        for shift in stride(from: 0, to: 64, by: 8) { bits |= UInt64(byte()) << UInt64(shift) }
        return Date(timeIntervalSinceReferenceDate: Double(bitPattern: bits))
    }

    mutating func optionalDate() -> Date? { byte() == 0 ? nil : date() }

    /// Passes over what comes before the texts: the numbers and the segments.
    mutating func passNumbers() {
        _ = int()
        _ = int()
        _ = optional()
        _ = optional()
        for _ in 0..<int() {
            _ = int()
            _ = int()
            _ = optional()
        }
    }

    /// Where a string's bytes are, passed over; nil for nil.
    mutating func range() -> Range<Int>? {
        let length = unsigned()
        guard length > 0 else { return nil }
        defer { at += Int(length - 1) }
        return at..<at + Int(length - 1)
    }

    mutating func string() -> String? {
        let length = unsigned()
        guard length > 0 else { return nil }
        let count = Int(length - 1)
        defer { at += count }
        return String(decoding: UnsafeBufferPointer(rebasing: buffer[at..<at + count]), as: UTF8.self)
    }

    mutating func segments() -> [Segment] {
        let count = Int(int())
        guard count > 0 else { return [] }
        var segments: [Segment] = []
        segments.reserveCapacity(count)
        for _ in 0..<count {
            let start = int()
            let received = int()
            segments.append(Segment(start: start, end: optional(), received: received))
        }
        return segments
    }
}
