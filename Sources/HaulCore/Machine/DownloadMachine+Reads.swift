/// What a reader asks for is fetched first: a reader waiting at a byte no connection is about to bring gets one
/// there, started on a segment split off at that byte, or moved from the largest range left (as work stealing
/// takes from it).
extension DownloadMachine {
    /// A connection already this close before the byte asked (or as much as it brings in a second) gets there
    /// itself: nothing is moved for it.
    static let nearEnough: Int64 = 64 << 10

    mutating func wanted(_ offset: Int64) {
        if download.kind == .torrent {
            if phase == .torrenting, download.state == .downloading, offset >= 0 {
                emit(.torrent(.want(offset: offset)))
            }
            return
        }
        guard phase == .transferring, download.state == .downloading, download.resumable,
            let total = download.totalBytes, offset >= 0, offset < total,
            let index = download.segments.firstIndex(where: { $0.start <= offset && offset <= ($0.end ?? .max) })
        else { return }
        let segment = download.segments[index]
        guard offset >= segment.cursor else { return }  // on disk already
        if let busy = connections.first(where: { $0.segment == index }) {
            let near = max(DownloadMachine.nearEnough, Int64(rate(of: busy) ?? 0))
            if offset - segment.cursor <= near { return }
        }
        // The asked byte starts a segment of its own (unless it is where an idle one resumes).
        var urgent = index
        if offset > segment.cursor {
            updateSegments {
                $0[index].end = offset - 1
                $0.append(Segment(start: offset, end: segment.end))
            }
            urgent = download.segments.count - 1
        }
        if connections.count >= connectionsAllowed || hostBusy {
            // Every connection is busy: the one on the largest range left goes to the asked byte; its range waits
            // for the next connection free.
            let victim = connections.indices
                .filter { connections[$0].segment != urgent }
                .max { remaining(connections[$0]) < remaining(connections[$1]) }
            guard let victim else { return }
            drop(connections.remove(at: victim))
        }
        log(.info, "fetching byte \(offset) first: a reader waits for it")
        var connection = Connection(segment: urgent, state: .backoff(TimerID(0)))
        connection.source = chooseSource()
        connections.append(connection)
        launch(connections.count - 1)
    }

    private func remaining(_ connection: Connection) -> Int64 {
        download.segments.indices.contains(connection.segment)
            ? download.segments[connection.segment].remaining ?? 0 : 0
    }
}
