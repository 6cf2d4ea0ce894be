import HaulLoop

/// Mirrors: other sources of the same file. Source 0 is the download's `url`, source n its mirror n - 1. Each is
/// probed with a HEAD once the size is known; connections are spread over the sources that agree, each new one on
/// the source that promises it the most (its connections' rate over their count, the least used while rates are
/// unknown), so a connection freed by work stealing goes where it is fastest. Before a mirror's segments count, its
/// first bytes are fetched and compared with the first source's in the part file: one of the same size with other
/// bytes is dropped with the reason. A mirror that fails twice, or answers a range wrongly, is dropped with the
/// reason and its segment goes on elsewhere at once.
extension DownloadMachine {
    /// Probes the mirrors not probed yet; without ranges or a size nothing can be split over them.
    mutating func probeMirrors() {
        guard !download.mirrors.isEmpty else { return }
        guard download.resumable else {
            for index in download.mirrors.indices where download.mirrors[index].state != .dropped {
                dropMirror(index, "the file cannot be split: the first source gives no size, validator or ranges")
            }
            return
        }
        for index in download.mirrors.indices
        where download.mirrors[index].state == .pending
            && !mirrorProbes.values.contains(index)
        {
            let id = newTransfer()
            mirrorProbes[id] = index
            emit(.fetchFrom(id, .head, url: download.mirrors[index].url))
        }
    }

    /// A mirror's HEAD answered: it agrees on the size and serves ranges, or it is dropped.
    mutating func mirrorResponded(_ index: Int, _ response: TransferResponse) {
        guard download.mirrors.indices.contains(index), download.mirrors[index].state == .pending else { return }
        let length = response.header("content-length").flatMap { Int64($0) }
        if !(200..<300).contains(response.status) {
            return dropMirror(index, "its HEAD answered HTTP \(response.status)")
        }
        if let total = download.totalBytes, length != total {
            return dropMirror(
                index,
                "its size \(length.map(String.init) ?? "unknown") differs from the "
                    + "\(total) bytes of \(Redact.url(download.url))")
        }
        guard response.header("accept-ranges").map({ $0.lowercased().contains("bytes") }) == true else {
            return dropMirror(index, "it serves no byte ranges")
        }
        // The checksum asked for, when the mirror announces its digest: another file of the same size is dropped
        // here, not found out when the whole file fails its check.
        if let checksum = download.checksum.flatMap(Checksum.init), let digest = checksum.announced(by: response),
            digest != checksum.hex
        {
            return dropMirror(index, "its \(checksum.algorithm.rawValue) \(digest) is not the checksum asked for")
        }
        (download.mirrors[index].etag, download.mirrors[index].lastModified) = mirrorOrigin(index).validators(response)
        // The same size is not the same file: its first bytes are compared with the first source's before any of
        // its segments count.
        mirrorsAwaitingCheck.insert(index)
        startMirrorChecks()
    }

    /// The bytes a mirror's first bytes are compared with: the file's first 64 KiB (less for a smaller file or
    /// first segment), which the first source fetches first.
    var mirrorCheckRange: ByteRange? {
        guard let total = download.totalBytes, let first = download.segments.first, first.start == 0 else { return nil }
        let length = min(64 * 1024, total, first.end.map { $0 + 1 } ?? total)
        return length > 0 ? ByteRange(0, length - 1) : nil
    }

    /// Fetches the first bytes of the mirrors waiting, once the first source's are in the part file.
    mutating func startMirrorChecks() {
        guard let range = mirrorCheckRange, let first = download.segments.first,
            first.received >= range.last + 1
        else { return }
        for index in mirrorsAwaitingCheck.sorted() where download.mirrors[index].state == .pending {
            let id = newTransfer()
            mirrorChecks[id] = (index, range)
            emit(
                .fetchFrom(
                    id,
                    .compare(
                        start: range.first, end: range.last,
                        ifRange: download.mirrors[index].validator),
                    url: download.mirrors[index].url))
        }
        mirrorsAwaitingCheck.removeAll()
    }

    /// The answer to a mirror's check: its own version's exact range, or the mirror is dropped.
    mutating func mirrorCheckResponded(_ id: TransferID, _ response: TransferResponse) {
        guard let (index, range) = mirrorChecks[id] else { return emit(.abort(id)) }
        let reply = mirrorOrigin(index).checkRange(
            response, start: range.first, end: range.last,
            total: download.totalBytes, etag: download.mirrors[index].etag,
            lastModified: download.mirrors[index].lastModified)
        guard case .accept = reply else {
            mirrorChecks.removeValue(forKey: id)
            dropMirror(
                index,
                "it answered the check of its first bytes with HTTP \(response.status), Content-Range: "
                    + (response.header("content-range") ?? "none"))
            emit(.abort(id))
            return fill()
        }
    }

    /// A mirror's first bytes were compared: the same as the first source's, and it takes segments; others, and it
    /// is dropped with the byte where they differ.
    mutating func mirrorCompared(_ id: TransferID, checked: Int64, differsAt: Int64?, _ result: TransferResult) {
        guard let (index, range) = mirrorChecks.removeValue(forKey: id) else { return }
        defer { fill() }
        guard download.mirrors.indices.contains(index), download.mirrors[index].state == .pending else { return }
        if let differsAt {
            return dropMirror(
                index,
                "its bytes differ from those of \(Redact.url(download.url)) at byte \(differsAt): "
                    + "another file of the same size")
        }
        guard result.failure == nil, checked == range.last - range.first + 1 else {
            return dropMirror(
                index,
                "the check of its first bytes ended after \(checked) bytes"
                    + (result.message.isEmpty ? "" : ": \(result.message)"))
        }
        download.mirrors[index].state = .active
        log(.info, "mirror agrees", ["mirror": Redact.url(download.mirrors[index].url)])
    }

    /// A mirror's HEAD answered: it agrees on the size and serves ranges, or it is dropped; either way its share
    /// of the connections is opened now.
    mutating func mirrorProbeAnswered(_ id: TransferID, _ response: TransferResponse) {
        guard let index = mirrorProbes.removeValue(forKey: id) else { return }
        mirrorResponded(index, response)
        fill()
    }

    /// A mirror's HEAD ended without an answer (an answered one was settled at its headers).
    mutating func mirrorProbeEnded(_ id: TransferID, _ result: TransferResult) {
        guard let index = mirrorProbes.removeValue(forKey: id) else { return }
        if download.mirrors.indices.contains(index), download.mirrors[index].state == .pending {
            dropMirror(index, result.message.isEmpty ? "no answer to its HEAD" : result.message)
        }
        fill()
    }

    mutating func dropMirror(_ index: Int, _ reason: String) {
        guard download.mirrors.indices.contains(index), download.mirrors[index].state != .dropped else { return }
        download.mirrors[index].state = .dropped
        download.mirrors[index].reason = reason
        log(.warning, "mirror dropped: \(reason)", ["mirror": Redact.url(download.mirrors[index].url)])
    }

    /// Connections to open now: while mirrors are being probed, the share of the sources known to agree, so the
    /// mirrors that answer still get connections of their own (`fill` runs again at each answer).
    var connectionsAllowed: Int {
        let deciding = mirrorProbes.count + mirrorChecks.count + mirrorsAwaitingCheck.count
        guard deciding > 0 else { return plannedConnections }
        let known = usableSources.count
        return max(1, plannedConnections * known / (known + deciding))
    }

    /// The sources a new connection may use: the download's URL and the mirrors that agree.
    var usableSources: [Int] {
        [0] + download.mirrors.indices.filter { download.mirrors[$0].state == .active }.map { $0 + 1 }
    }

    /// The source for a new connection: the highest rate per connection over its connections once this one joins,
    /// by the rates its running connections show (the best known rate for a source none has measured yet), fewest
    /// connections on a tie.
    func chooseSource(excluding excluded: Int? = nil) -> Int {
        let sources = usableSources.filter { $0 != excluded }
        guard sources.count > 1 else { return sources.first ?? 0 }
        var rates: [Int: (sum: Double, known: Int, count: Int)] = [:]
        for connection in connections where connection.transfer != nil {
            var entry = rates[connection.source] ?? (0, 0, 0)
            entry.count += 1
            if let rate = rate(of: connection) {
                entry.sum += rate
                entry.known += 1
            }
            rates[connection.source] = entry
        }
        let best = rates.values.compactMap { $0.known > 0 ? $0.sum / Double($0.known) : nil }.max() ?? 1
        func score(_ source: Int) -> Double {
            let entry = rates[source] ?? (0, 0, 0)
            let perConnection = entry.known > 0 ? entry.sum / Double(entry.known) : best
            // Connections spread in proportion to the sources' rates: a source five times faster takes about
            // five times the connections (round robin while no rate is known).
            return perConnection / Double(entry.count + 1)
        }
        return sources.max { a, b in
            let (sa, sb) = (score(a), score(b))
            if sa != sb { return sa < sb }
            return (rates[a]?.count ?? 0) > (rates[b]?.count ?? 0)
        } ?? 0
    }

    /// A mirror's answer to a range: the exact range, of the version its probe saw, or the mirror is dropped (a
    /// mirror's changed file or ignored Range is its own problem, never a restart of the download).
    mutating func mirrorRangeResponded(
        _ index: Int, _ requested: (start: Int64, end: Int64?),
        _ response: TransferResponse
    ) {
        let mirror = connections[index].source - 1
        let known = download.mirrors.indices.contains(mirror)
        let dialect = mirrorOrigin(mirror)
        switch dialect.checkRange(
            response, start: requested.start, end: requested.end, total: download.totalBytes,
            etag: known ? download.mirrors[mirror].etag : nil,
            lastModified: known ? download.mirrors[mirror].lastModified : nil)
        {
        case .accept:
            return
        case .httpError(let status) where status != 416:
            stop(index, .failed(dialect.error(status: status, response: response)))
        default:
            stop(
                index,
                .failed(
                    DownloadError(
                        .rangeMismatch,
                        "the mirror answered another range or version "
                            + "(HTTP \(response.status), Content-Range: \(response.header("content-range") ?? "none"))")
                ))
        }
    }

    /// A mirror's connection failed: the mirror counts it (dropped at the second, or at once when it is not worth
    /// retrying), and the segment goes on from the best source left, at once.
    mutating func mirrorConnectionFailed(_ index: Int, _ error: DownloadError) {
        let mirror = connections[index].source - 1
        guard download.mirrors.indices.contains(mirror) else { return }
        download.mirrors[mirror].errors += 1
        if download.mirrors[mirror].errors >= 2 || !error.retryable {
            dropMirror(mirror, error.message)
        } else {
            log(
                .warning, "mirror failed, its segment goes on elsewhere: \(error.message)",
                ["mirror": Redact.url(download.mirrors[mirror].url)])
        }
        connections[index].source = chooseSource(excluding: connections[index].source)
        launch(index)
    }

    /// Notes bytes a mirror wrote: a connection's writes follow each other, so they extend a recent range.
    mutating func noteMirrorWrite(_ range: ByteRange) {
        for index in mirrorWritten.indices.reversed().prefix(8) where mirrorWritten[index].last + 1 == range.first {
            mirrorWritten[index].last = range.last
            return
        }
        mirrorWritten.append(range)
    }

    /// Whether bytes of the part file may be a mirror's: written from one in this run, or by an active one before
    /// a restart (whose ranges this run does not know).
    var mirrorBytesInDoubt: Bool {
        !mirrorWritten.isEmpty || download.mirrors.contains { $0.receivedBytes > 0 && $0.state != .dropped }
    }

    /// Bytes per second from each mirror now (for the resource).
    public var mirrorSpeeds: [Double] {
        download.mirrors.indices.map { index in
            connections.filter { $0.source == index + 1 }.compactMap { rate(of: $0) }.reduce(0, +)
        }
    }
}
