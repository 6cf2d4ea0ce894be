import HaulLoop

/// Where in creation order a search (`q=`, a text in the name or the URL, without case) may match: for each
/// trigram (three bytes, ASCII letters folded to lower case), the blocks of 64 sequence numbers holding a download
/// whose texts have it. A search of three bytes or more reads only the blocks that have all of its trigrams,
/// instead of walking every download from the cursor; each download there is still matched as before, so a block
/// is only ever a candidate, never an answer.
///
/// Only ever grows: a text that changes adds its new trigrams and keeps the old ones (a stale trigram costs a block
/// read, never a match missed), and a removed download leaves its block behind. A download whose texts the bytes
/// alone cannot tell (a byte beyond ASCII, whose lowercasing Unicode decides; a URL with credentials, searched as
/// shown without them; a torrent named by its metadata) puts its block with every search. Confined to the engine's
/// thread, with the registry.
struct SearchIndex {
    /// Sequence numbers per block: 64 downloads added one after another share one entry per trigram they have.
    static let blockShift: Int64 = 6

    /// Blocks by trigram, ascending.
    private var postings: [UInt32: [UInt32]] = [:]
    /// Blocks holding a download no trigram can speak for, ascending: candidates for every search.
    private var everywhere: [UInt32] = []
    /// Downloads up to this sequence number are indexed; nil once every download is. Built after the start, a
    /// slice a turn (`DownloadRegistry.indexForSearch`), so a million loaded cost the start-up nothing.
    private(set) var indexedThrough: Int64? = 0
    /// The index gave up: a sequence number past what a block's number holds. Searches walk, as before it.
    private var abandoned = false

    /// Whether a download of `sequence` is in the index's part built so far (it is then added as it changes).
    func covers(_ sequence: Int64) -> Bool {
        guard !abandoned else { return false }
        guard let through = indexedThrough else { return true }
        return sequence <= through
    }

    var isComplete: Bool { indexedThrough == nil && !abandoned }

    /// The build reached `sequence` (or the end of the list, nil).
    mutating func indexed(through sequence: Int64?) { indexedThrough = sequence }

    static func block(of sequence: Int64) -> Int64 { sequence >> blockShift }

    /// Adds the texts of the download numbered `sequence`: its name (nil without one) and its URL, or, when
    /// `opaque`, its block as a candidate for every search.
    mutating func add(
        _ sequence: Int64, name: UnsafeBufferPointer<UInt8>?, url: UnsafeBufferPointer<UInt8>, opaque: Bool
    ) {
        guard !abandoned else { return }
        let wide = SearchIndex.block(of: sequence)
        guard wide >= 0, wide <= Int64(UInt32.max) else {
            abandoned = true
            postings = [:]
            everywhere = []
            return
        }
        let block = UInt32(wide)
        if opaque || url.contains(where: { $0 >= 0x80 }) || name?.contains(where: { $0 >= 0x80 }) == true {
            return SearchIndex.insert(block, into: &everywhere)
        }
        if let name { add(block, name) }
        add(block, url)
    }

    private mutating func add(_ block: UInt32, _ text: UnsafeBufferPointer<UInt8>) {
        guard text.count >= 3 else { return }
        var key = UInt32(ASCII.lower(text[0])) << 8 | UInt32(ASCII.lower(text[1]))
        for index in 2..<text.count {
            key = (key << 8 | UInt32(ASCII.lower(text[index]))) & 0xff_ffff
            // Most are appended (downloads come in creation order) or there already (the block's neighbours).
            if let last = postings[key]?.last, last >= block {
                if last == block { continue }
                SearchIndex.insert(block, into: &postings[key]!)
            } else {
                postings[key, default: []].append(block)
            }
        }
    }

    /// The blocks a search for `needle` (lowercased, as the filter holds it) may match in, ascending; nil when the
    /// index cannot tell (not built yet, a needle under three bytes or beyond ASCII): the caller walks instead.
    func blocks(for needle: String) -> [UInt32]? {
        guard isComplete else { return nil }
        let bytes = Array(needle.utf8)
        guard bytes.count >= 3, !bytes.contains(where: { $0 >= 0x80 }) else { return nil }
        var lists: [[UInt32]] = []
        var key = UInt32(ASCII.lower(bytes[0])) << 8 | UInt32(ASCII.lower(bytes[1]))
        var seen: Set<UInt32> = []
        for byte in bytes[2...] {
            key = (key << 8 | UInt32(ASCII.lower(byte))) & 0xff_ffff
            guard seen.insert(key).inserted else { continue }
            guard let list = postings[key] else { return everywhere }
            lists.append(list)
        }
        lists.sort { $0.count < $1.count }
        let found = lists[0].filter { block in lists.dropFirst().allSatisfy { SearchIndex.contains($0, block) } }
        return everywhere.isEmpty ? found : SearchIndex.union(found, everywhere)
    }

    /// Trigram postings held, for the tests and the notes on memory.
    var postingCount: Int { postings.values.reduce(0) { $0 + $1.count } }

    /// The position of the first element of `sorted` not below `value`.
    static func lowerBound(_ sorted: [UInt32], _ value: UInt32) -> Int {
        var low = 0, high = sorted.count
        while low < high {
            let middle = (low + high) / 2
            if sorted[middle] < value { low = middle + 1 } else { high = middle }
        }
        return low
    }

    private static func contains(_ sorted: [UInt32], _ value: UInt32) -> Bool {
        let position = lowerBound(sorted, value)
        return position < sorted.count && sorted[position] == value
    }

    private static func insert(_ value: UInt32, into sorted: inout [UInt32]) {
        if let last = sorted.last, last < value { return sorted.append(value) }
        let position = lowerBound(sorted, value)
        if position < sorted.count, sorted[position] == value { return }
        sorted.insert(value, at: position)
    }

    private static func union(_ a: [UInt32], _ b: [UInt32]) -> [UInt32] {
        var merged: [UInt32] = []
        merged.reserveCapacity(a.count + b.count)
        var (i, j) = (0, 0)
        while i < a.count || j < b.count {
            if j == b.count || (i < a.count && a[i] < b[j]) {
                merged.append(a[i])
                i += 1
            } else {
                if i < a.count, a[i] == b[j] { i += 1 }
                merged.append(b[j])
                j += 1
            }
        }
        return merged
    }
}

extension Download {
    /// Whether a search reads the same texts in both (`matches(search:)`): no new trigram to index.
    func searchesAlike(_ other: Download) -> Bool {
        self.filename == other.filename && self.requestedFilename == other.requestedFilename
            && self.url == other.url && self.kind == other.kind
    }
}
