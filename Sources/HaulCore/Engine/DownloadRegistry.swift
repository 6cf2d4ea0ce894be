import FoundationEssentials
import HaulLoop

/// Every download this node knows, as a machine, with the indexes and running totals kept in step: creation order
/// (for paging), counts by state and bytes received (for `/stats`), unfinished downloads by destination (for a
/// repeated POST) and the run queue. The one place a download is inserted, replaced or removed, so no caller
/// writes that bookkeeping out again.
final class DownloadRegistry {
    /// Every download's machine, boxed: reading one (a snapshot, a field) borrows it instead of copying the whole
    /// machine, and a step changes it in place.
    private(set) var machines: [String: MachineBox] = [:]
    /// Queued downloads, so scheduling never scans them all.
    var runQueue = RunQueue()
    /// Downloads per state and bytes received over all of them, kept as they change: `/stats` reads these instead
    /// of visiting every download (137 ms with 100,000 stored).
    private(set) var stateCounts: [DownloadState: Int] = [:]
    private(set) var receivedTotal: Int64 = 0
    /// Every download's sequence and machine in creation order, so a page of a long list costs its own length, not
    /// a sort of every download, and a walk of it (a search) reads each machine without looking its id up.
    private(set) var order: [(sequence: Int64, box: MachineBox)] = []
    /// Entries of `order` whose download is gone: left in place (readers pass over boxes marked `isRemoved`) and
    /// swept out once they are half of it, so removing thousands costs no memmove of the whole list each.
    private var departed = 0
    /// Unfinished downloads by destination (URL, directory, requested name), for answering a repeated POST: by the
    /// destination's hash, the download's own fields telling it from another of the same hash. No key string is
    /// built and kept for each (100 bytes a download, a fifth of the start-up's indexing); the few destinations
    /// whose hash another holds are in `collided`, by their whole key.
    private var destinations: [Int: String] = [:]
    private var collided: [String: String] = [:]
    /// The downloads of each token that added some (`Download.owner`): a token's totals and quota cost its own
    /// downloads, not every one.
    private(set) var owned: [String: Set<String>] = [:]
    /// What each such token's downloads hold against its quota (`heldBytes`), kept as they change like
    /// `receivedTotal`: the quota of a download of unknown size is checked against it on every chunk.
    private(set) var held: [String: Int64] = [:]
    /// The sequence number of the next download added here (one more than the highest inserted).
    private(set) var nextSequence: Int64 = 1
    /// Downloads loaded packed by state (the index of `PackedDownload.states`), counted into `stateCounts` once
    /// all are loaded: a dictionary keyed by the state hashed its name for each.
    private var loadedStates = PackedDownload.states.map { _ in 0 }
    /// Every download's id by its first two characters.
    private var byPrefix = IDPrefixIndex()
    /// Where a search may match, by trigram (`SearchIndex`; built after the start, see `indexForSearch`).
    var search = SearchIndex()
    /// Boxes inserted or read since the last packing, oldest first: a download just added is read again at once
    /// (its answer, its event, its write to the store), so it is packed only once `unpackedLimit` newer ones came
    /// after.
    private var unpacked: [MachineBox] = []
    static let unpackedLimit = 1_024

    /// The bytes a download holds against its token's quota: a finished file's size, an unfinished one's size once
    /// known (or the size its client said), else what it received; a failed one what it left on disk.
    static func heldBytes(_ download: Download) -> Int64 {
        if download.state == .failed { return download.receivedBytes }
        return max(download.totalBytes ?? download.expectedBytes ?? 0, download.receivedBytes)
    }

    private func hold(_ download: Download?, sign: Int64) {
        guard let download, let owner = download.owner else { return }
        let next = (held[owner] ?? 0) + sign * DownloadRegistry.heldBytes(download)
        held[owner] = next
        if next == 0, owned[owner] == nil { held.removeValue(forKey: owner) }
    }

    subscript(id: String) -> MachineBox? { machines[id] }

    /// The box of `id` for a client's read, unpacked: a download read once (a status polled, the page a dashboard
    /// shows) is likely read again soon, so it stays unpacked until `unpackedLimit` others were read or added after
    /// it, instead of being unpacked again for each read.
    func reading(_ id: String) -> MachineBox? {
        guard let box = machines[id] else { return nil }
        if box.isPacked {
            box.unpack()
            packLater(box)
        }
        return box
    }

    var count: Int { machines.count }

    /// Room for `count` downloads (at start, before loading them).
    func reserve(_ count: Int) {
        machines.reserveCapacity(count)
        order.reserveCapacity(count)
        destinations.reserveCapacity(count)
    }

    /// Adds `box`, whose machine holds `download` (the caller's copy: reading it out of the box again would copy
    /// every field once more). At start-up downloads come in any order: `sortOrder` once after loading them all; and
    /// each is packed as it is loaded (`loading`), beside its box in memory, where a walk of the list finds both.
    func insert(_ box: MachineBox, holding download: Download, loading: Bool = false) {
        // The list grows: no page put up before holds it.
        box.changing()
        machines[download.id] = box
        nextSequence = max(nextSequence, download.sequence + 1)
        place(box, download.sequence, download.id)
        index(download, was: nil)
        if search.covers(download.sequence) { box.addSearchTexts(to: &search) }
        receivedTotal += download.receivedBytes
        hold(download, sign: 1)
        if loading { box.pack() } else { packLater(box) }
    }

    /// Adds a download loaded from the store packed (`StoredRowPacker`), indexed from its bytes as `insert` indexes
    /// a download: nothing unpacked, no string made but its id (and its owner's); counted by state once
    /// `finishLoading` is called. The start calls it only for one it has nothing else to do with
    /// (`Engine.onlyIndexed`).
    func insert(loaded packed: PackedDownload, settings: MachineSettings) {
        let box = MachineBox(packed: packed, settings: settings)
        packed.scan(texts: true) { scan, text in
            func string(_ range: Range<Int>) -> String {
                String(decoding: UnsafeBufferPointer(rebasing: text[range]), as: UTF8.self)
            }
            let id = string(scan.id)
            machines[id] = box
            nextSequence = max(nextSequence, scan.sequence + 1)
            place(box, scan.sequence, id)
            byPrefix.insert(id)
            loadedStates[scan.stateIndex] += 1
            receivedTotal += scan.receivedBytes
            if let owner = scan.owner.map(string) {
                owned[owner, default: []].insert(id)
                // As `heldBytes` (a packed row has no size its client said: that is an extra).
                let bytes =
                    scan.state == .failed ? scan.receivedBytes : max(scan.totalBytes ?? 0, scan.receivedBytes)
                held[owner, default: 0] += bytes
            }
            if scan.state == .queued {
                runQueue.push(
                    RunQueue.Entry(
                        priority: Int(scan.priority), order: scan.queueRank ?? scan.sequence &* QueueOrder.step,
                        sequence: scan.sequence, id: id))
            }
            if !scan.state.isFinished {
                let url = UnsafeBufferPointer(rebasing: text[scan.url])
                let directory = UnsafeBufferPointer(rebasing: text[scan.directory])
                let name = scan.requestedFilename.map { UnsafeBufferPointer(rebasing: text[$0]) }
                claimDestination(Self.hash(url, directory, name), for: id) {
                    (string(scan.url), string(scan.directory), scan.requestedFilename.map(string))
                }
            }
        }
    }

    /// Puts `box` in place of what is known of its download (another node changed it), or adds it.
    func replace(with box: MachineBox) {
        box.changing()
        let download = box.machine.download
        let replaced = machines.updateValue(box, forKey: download.id)
        let before = replaced?.machine.download
        if let replaced {
            replaced.isRemoved = true
            departed += 1
        }
        place(box, download.sequence, download.id)
        index(download, was: before)
        if search.covers(download.sequence) { box.addSearchTexts(to: &search) }
        receivedTotal += download.receivedBytes - (before?.receivedBytes ?? 0)
        hold(before, sign: -1)
        hold(download, sign: 1)
        packLater(box)
    }

    /// Packs `box` once `unpackedLimit` boxes were inserted or read after it (if its machine is idle then), and the
    /// older ones waiting with it. (Packing changes no machine: a box being changed is never here, as a machine's
    /// step is a value's own and calls nothing back.)
    private func packLater(_ box: MachineBox) {
        unpacked.append(box)
        guard unpacked.count == 2 * Self.unpackedLimit else { return }
        for old in unpacked[..<Self.unpackedLimit] where !old.isRemoved { old.pack() }
        unpacked.removeFirst(Self.unpackedLimit)
    }

    /// The runner of `id` ended: an idle download (completed, failed, paused) is packed later like one just added,
    /// a completed one without its run (`MachineBox.settleRun`).
    func runEnded(_ id: String, clock: Clock) {
        guard let box = machines[id], box.settleRun(clock: clock) else { return }
        packLater(box)
    }

    /// Packs every box waiting to be now, instead of after a thousand more: what a test calls to see them packed.
    func packWaiting() {
        for box in unpacked where !box.isRemoved { box.pack() }
        unpacked.removeAll()
    }

    /// Forgets download `id`; returns what it was.
    @discardableResult
    func remove(_ id: String) -> Download? {
        guard let box = machines.removeValue(forKey: id) else { return nil }
        let download = box.machine.download
        box.isRemoved = true
        departed += 1
        if departed > 256, departed * 2 > order.count {
            order.removeAll { $0.box.isRemoved }
            departed = 0
        }
        index(nil, was: download)
        receivedTotal -= download.receivedBytes
        hold(download, sign: -1)
        return download
    }

    /// A download's machine moved from `before`: its state, priority, place and bytes are indexed again.
    func changed(_ id: String, from before: Download) {
        guard let box = machines[id] else { return }
        let download = box.machine.download
        if search.covers(download.sequence), !download.searchesAlike(before) { box.addSearchTexts(to: &search) }
        receivedTotal += download.receivedBytes - before.receivedBytes
        if download.owner != nil || before.owner != nil {
            hold(before, sign: -1)
            hold(download, sign: 1)
        }
        if download.state != before.state || download.priority != before.priority
            || download.queueRank != before.queueRank
        {
            index(download, was: before)
        }
    }

    /// Bytes the machine of a download received moved by `delta`, and what it holds against its `owner`'s quota
    /// by `heldDelta` (the hot path: nothing else changed).
    func received(_ delta: Int64, heldDelta: Int64 = 0, owner: String? = nil) {
        receivedTotal += delta
        if let owner, heldDelta != 0 { held[owner, default: 0] += heldDelta }
    }

    /// Sorts creation order once, after loading every download at start, and counts the ones loaded packed.
    func finishLoading() {
        order.sort { $0.sequence < $1.sequence }
        for (index, count) in loadedStates.enumerated() where count > 0 {
            stateCounts[PackedDownload.states[index], default: 0] += count
        }
        loadedStates = loadedStates.map { _ in 0 }
    }

    /// The unfinished download that fetches `url` into `directory` under `name`, if one does.
    func download(fetching url: String, into directory: String, as name: String?) -> String? {
        if let id = destinations[Self.hash(url, directory, name)], leads(id, to: url, directory, name) { return id }
        return collided.isEmpty ? nil : collided[Self.destination(url, directory, name)]
    }

    private static func hash(_ url: String, _ directory: String, _ name: String?) -> Int {
        var (url, directory, name) = (url, directory, name)
        return url.withUTF8 { url in
            directory.withUTF8 { directory in
                guard name != nil else { return hash(url, directory, nil) }
                return name!.withUTF8 { hash(url, directory, $0) }
            }
        }
    }

    /// The hash of a destination by its texts' bytes: the same whether they are read from a download or from its
    /// packed bytes. FNV-1a, not the seeded `Hasher` (whose set-up was a third of it): a destination whose hash
    /// another holds goes to `collided` by its whole text, so hashes made to collide cost a lookup each, not more.
    private static func hash(
        _ url: UnsafeBufferPointer<UInt8>, _ directory: UnsafeBufferPointer<UInt8>, _ name: UnsafeBufferPointer<UInt8>?
    ) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func add(_ byte: UInt8) { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        // Each text ends with a byte no UTF-8 text holds ("ab" + "c" is not "a" + "bc"), nil with another.
        func add(_ text: UnsafeBufferPointer<UInt8>?) {
            guard let text else { return add(0xff) }
            for byte in text { add(byte) }
            add(0xfe)
        }
        add(url)
        add(directory)
        add(name)
        return Int(truncatingIfNeeded: hash)
    }

    /// Whether download `id` fetches `url` into `directory` under `name`.
    private func leads(_ id: String, to url: String, _ directory: String, _ name: String?) -> Bool {
        guard let download = machines[id]?.machine.download else { return false }
        return download.url == url && download.directory == directory && download.requestedFilename == name
    }

    /// The ids that start with `prefix`, found without a walk of every download; nil when `prefix` is shorter than
    /// the index's key (a walk it is, then).
    func ids(prefixed prefix: String) -> Set<String>? {
        byPrefix.ids(prefixed: prefix)
    }

    /// The position in `order` of the first download with a sequence above `sequence` (binary search).
    func firstIndex(after sequence: Int64) -> Int {
        var low = 0, high = order.count
        while low < high {
            let middle = (low + high) / 2
            if order[middle].sequence <= sequence { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Puts `box` in creation order: new downloads take ever larger numbers (and come in that order at start-up),
    /// so most are appended without a search. Another node's may arrive after a later one of this node's, and one
    /// removed and back (another node's download read again), or read again in a new box, takes its old entry.
    private func place(_ box: MachineBox, _ sequence: Int64, _ id: String) {
        guard let last = order.last, last.sequence >= sequence else {
            return order.append((sequence, box))
        }
        let position = firstIndex(after: sequence - 1)
        if position < order.count, order[position].sequence == sequence, order[position].box.id == id {
            if order[position].box.isRemoved { departed = max(0, departed - 1) }
            order[position].box = box
        } else {
            order.insert((sequence, box), at: position)
        }
    }

    /// Keeps the run queue, counts and `destinations` in step with a download's state, priority and place (`nil`:
    /// added or removed).
    private func index(_ now: Download?, was: Download?) {
        if was == nil, let now {
            byPrefix.insert(now.id)
        } else if now == nil, let was {
            byPrefix.remove(was.id)
        }
        if was?.owner != now?.owner {
            if let owner = was?.owner, let id = was?.id {
                owned[owner]?.remove(id)
                if owned[owner]?.isEmpty == true { owned.removeValue(forKey: owner) }
            }
            if let owner = now?.owner, let id = now?.id { owned[owner, default: []].insert(id) }
        }
        if let was {
            stateCounts[was.state, default: 0] -= 1
            if !was.state.isFinished {
                let hash = Self.hash(was.url, was.directory, was.requestedFilename)
                if destinations[hash] == was.id {
                    destinations.removeValue(forKey: hash)
                } else if !collided.isEmpty {
                    let key = Self.destination(was.url, was.directory, was.requestedFilename)
                    if collided[key] == was.id { collided.removeValue(forKey: key) }
                }
            }
        }
        if let now {
            stateCounts[now.state, default: 0] += 1
            // Leaving the queue needs nothing here: the entry no longer stands when it comes up.
            if now.state == .queued,
                was?.state != .queued || was?.priority != now.priority || was?.queueRank != now.queueRank
            {
                runQueue.push(RunQueue.Entry(now))
            }
            if !now.state.isFinished {
                claimDestination(Self.hash(now.url, now.directory, now.requestedFilename), for: now.id) {
                    (now.url, now.directory, now.requestedFilename)
                }
            }
        }
    }

    /// Notes `id` as the download that fetches to the destination of `hash`, unless another of the same
    /// destination holds it; one of another destination with the same hash leaves this one to `collided`. `key`
    /// tells the destination (made only when the hash is held).
    private func claimDestination(_ hash: Int, for id: String, key: () -> (String, String, String?)) {
        guard let holder = destinations[hash] else {
            destinations[hash] = id
            return
        }
        guard holder != id else { return }
        let (url, directory, name) = key()
        if !leads(holder, to: url, directory, name) {
            let key = Self.destination(url, directory, name)
            if collided[key] == nil { collided[key] = id }
        }
    }

    /// Counters over all downloads, in one pass that copies none of them (`/stats` with 10,000 downloads must not
    /// build 10,000 snapshots); speeds and connections are the `running` downloads'.
    func totals(running: some Sequence<String>) -> EngineTotals {
        var totals = EngineTotals()
        totals.downloads = machines.count
        totals.byState = stateCounts.filter { $0.value != 0 }
        totals.receivedBytes = receivedTotal
        assert(
            totals.byState == Dictionary(grouping: machines.values) { $0.state }.mapValues(\.count)
                && receivedTotal == machines.values.reduce(0) { $0 + $1.download.receivedBytes },
            "the running totals drifted from the downloads")
        for id in running {
            guard let box = machines[id] else { continue }
            totals.speed += box.machine.speed
            totals.activeConnections += box.machine.activeConnections
            if let torrent = box.machine.download.torrent {
                totals.torrentPeers += torrent.peers
                totals.uploadSpeed += torrent.uploadSpeed
                totals.uploadedBytes += torrent.uploaded
            }
        }
        return totals
    }

    /// The key of a destination: a batch naming one twice is told apart with it, as the registry tells stored ones.
    static func destination(_ url: String, _ directory: String, _ name: String?) -> String {
        url + "\u{0}" + directory + "\u{0}" + (name ?? "")
    }
}
