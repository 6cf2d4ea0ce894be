import HaulLoop

/// Hears what an HLS download's playlist holds, and each piece written.
protocol HLSObserver: AnyObject {
    func playlistProgress(_ info: HLSInfo)
}

/// The transfers of HLS downloads: each is one stream of output bytes made of many requests (playlists, keys,
/// segments) on the real fetcher, which the download's runner starts, holds, resumes and cancels as it does a plain
/// transfer. Requests of a stream carry negative ids, which the machines' (positive) never meet.
final class HLSTransfers {
    let fetcher: Fetcher
    let turns: TurnQueue
    private var streams: [TransferID: HLSStream] = [:]
    private var counter = 0
    /// The per-host connection cap each request of a stream holds a connection of (the engine's).
    weak var bandwidth: Bandwidth?

    init(fetcher: Fetcher, turns: TurnQueue) {
        self.fetcher = fetcher
        self.turns = turns
    }

    /// Starts the stream `id` asks for: `request` fetches the playlist (its range and If-Range say where the
    /// output is to begin, and for which version).
    func start(
        _ id: TransferID, _ request: TransferRequest, delegate: FetchDelegate, variant: String?, connections: Int,
        index: HLSIndex, observer: HLSObserver?
    ) {
        let stream = HLSStream(
            id: id, owner: self, request: request, delegate: delegate, variant: variant,
            window: max(1, connections), index: index, observer: observer)
        streams[id] = stream
        stream.start()
    }

    func cancel(_ id: TransferID) { streams.removeValue(forKey: id)?.cancel() }

    func resume(_ id: TransferID) { streams[id]?.resume() }

    func isStream(_ id: TransferID) -> Bool { streams[id] != nil }

    func newRequestID() -> TransferID {
        counter += 1
        return TransferID(-counter)
    }

    /// A connection of some host was given back: streams waiting for one try again.
    func connectionFreed() {
        for stream in streams.values { stream.pumpSoon() }
    }

    /// One of `host`'s connections for a request of a stream; false when the cap is reached.
    func acquire(_ host: String) -> Bool { bandwidth?.acquireConnection(to: host) ?? true }

    func release(_ host: String) { bandwidth?.releaseConnection(to: host) }

    /// The stream `id` ended (its delegate has heard it).
    func ended(_ id: TransferID) { streams.removeValue(forKey: id) }
}
