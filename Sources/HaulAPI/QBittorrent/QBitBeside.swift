import HaulCore
import HaulLoop

/// qBittorrent's `torrents/info` answered on the API's own loop (`API.readsBeside`), as REST's pages of the list
/// are: the engine puts up its answer to the server's own caller when every torrent it lists rests (the board's
/// pages, all taken down at any change), under the request target; a later GET of that very target is answered
/// from it when it comes from the server's own caller: a session the server's token logged in (its `SID`), its
/// token as a bearer, or anyone on a server without a token.
enum QBitBeside {
    /// Whether `target` is `torrents/info` by GET, with or without a query, within a length worth looking up.
    static func isInfoTarget(_ target: String) -> Bool {
        let bytes = target.utf8
        let path = "/api/v2/torrents/info".utf8
        guard bytes.count <= 1024, bytes.starts(with: path) else { return false }
        return bytes.count == path.count || bytes.dropFirst(path.count).first == UInt8(ascii: "?")
    }
}

/// The sessions the server's own token logged in, by `SID`, with when each was last used: written on the engine's
/// loop (`QBittorrentAPI`), read on the API's own loop under the lock, so a session's call is answered beside only
/// while the session stands (not logged out, not timed out, not evicted).
final class QBitServerSessions: @unchecked Sendable {
    private let lock = Lock()
    private var lastUsed: [String: Double] = [:]

    func used(_ sid: String, at now: Double) { lock.withLock { lastUsed[sid] = now } }

    func end(_ sid: String) { _ = lock.withLock { lastUsed.removeValue(forKey: sid) } }

    /// Keeps only the sessions `stands` says still stand.
    func keep(where stands: (String) -> Bool) { lock.withLock { lastUsed = lastUsed.filter { stands($0.key) } } }

    /// Whether `sid` is a session of the server's token that has not timed out by `now`.
    func stands(_ sid: String, now: Double) -> Bool {
        lock.withLock { lastUsed[sid].map { now - $0 <= QBittorrentAPI.sessionTimeout } ?? false }
    }
}
