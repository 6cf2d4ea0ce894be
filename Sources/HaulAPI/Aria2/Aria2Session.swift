import FoundationEssentials
import HaulCore

/// What one aria2 session keeps beside the downloads: its id (`getSessionInfo`, one per process as aria2's), the
/// GIDs clients know the downloads by, and the downloads removed through it, which aria2 keeps as `removed`
/// results (their last status, newest last, at most `maxRemoved`, aria2's --max-download-result) until a purge.
final class Aria2Session {
    typealias Removed = (gid: String, owner: String?, status: [(String, JSONValue)])

    let id: String
    let gids = Aria2GIDs()
    private var removed: [Removed] = []
    static let maxRemoved = 1000

    init() {
        var generator = SystemRandomNumberGenerator()
        id = (0..<20).map { _ in
            let byte = UInt8.random(in: 0...255, using: &generator)
            return String(byte >> 4, radix: 16) + String(byte & 15, radix: 16)
        }.joined()
    }

    /// Keeps a download removed through this front, `status` its last.
    func keepRemoved(_ gid: String, owner: String?, status: [(String, JSONValue)]) {
        removed.append((gid, owner, status))
        if removed.count > Aria2Session.maxRemoved { removed.removeFirst(removed.count - Aria2Session.maxRemoved) }
    }

    /// The removed downloads `caller` sees (a token with a root sees only its own).
    func removed(seenBy caller: Caller) -> [Removed] {
        caller.confinedTo == nil ? removed : removed.filter { sees(caller, $0.owner) }
    }

    /// The last status of the removed download `gid` that `caller` sees.
    func removedStatus(_ gid: String, seenBy caller: Caller) -> [(String, JSONValue)]? {
        removed.last { $0.gid == gid && sees(caller, $0.owner) }?.status
    }

    /// Forgets the removed download `gid` that `caller` sees; false when there is none.
    func forgetRemoved(_ gid: String, by caller: Caller) -> Bool {
        guard let index = removed.lastIndex(where: { $0.gid == gid && sees(caller, $0.owner) }) else { return false }
        removed.remove(at: index)
        return true
    }

    /// Forgets every removed download `caller` sees.
    func purgeRemoved(by caller: Caller) { removed.removeAll { sees(caller, $0.owner) } }

    private func sees(_ caller: Caller, _ owner: String?) -> Bool { caller.confinedTo.map { $0 == owner } ?? true }
}
