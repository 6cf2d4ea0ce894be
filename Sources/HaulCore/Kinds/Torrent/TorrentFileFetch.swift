import HaulLoop

/// A .torrent fetched by URL through the server's own transfers (the download's proxy, headers, cookies and the
/// address guard, as any of its requests): the body kept in memory, at most `limit` bytes, then handed to `done`.
final class TorrentFileFetch: FetchDelegate {
    private let limit: Int
    private var body: [UInt8] = []
    private var refusal: DownloadError?
    private let done: (Result<[UInt8], DownloadError>) -> Void

    init(limit: Int, done: @escaping (Result<[UInt8], DownloadError>) -> Void) {
        self.limit = limit
        self.done = done
    }

    func transfer(_ id: TransferID, responded response: TransferResponse) -> Bool {
        guard (200..<300).contains(response.status) else {
            refusal = DownloadError.http(response.status, response: response)
            return false
        }
        if let length = response.header("content-length").flatMap({ Int($0) }), length > limit {
            refusal = tooLarge
            return false
        }
        return true
    }

    func transfer(_ id: TransferID, received chunk: TransferChunk) -> ChunkDecision {
        guard body.count + chunk.count <= limit else {
            refusal = tooLarge
            return .abort
        }
        chunk.append(to: &body)
        return .consumed
    }

    func transfer(_ id: TransferID, ended result: TransferResult) {
        if let refusal { return done(.failure(refusal)) }
        guard result.failure == nil else { return done(.failure(DownloadError.transfer(result))) }
        done(.success(body))
    }

    private var tooLarge: DownloadError {
        DownloadError(.torrentUnsafe, "the .torrent is over \(limit >> 20) MiB: refused before it is read")
    }
}
