import FoundationEssentials
import HaulLoop

/// Short-lived signed tickets for the URLs a browser cannot send a header with: a file link and an EventSource.
/// A ticket names its expiry and is signed (HMAC-SHA256) over that and the one path it opens, so the master token
/// never travels in a URL, where access logs, proxies and browser history keep it. `POST /tickets` issues one to
/// a client that has the token.
///
/// The key comes from the token: every node with the same token accepts the tickets of the others (one name in
/// front of several nodes). Without a token nothing needs a ticket, and the key is random.
struct Tickets {
    private let key: [UInt8]
    /// How long a ticket opens its path: long enough to follow a link or open a stream, too short to be worth
    /// stealing from a log. An open stream or transfer goes on past it.
    static let lifetime = 60.0

    init(token: String?) {
        if let token {
            key = Digest.hmacSHA256(key: Array(token.utf8), message: Array("haul ticket v1".utf8))
        } else {
            var generator = SystemRandomNumberGenerator()
            key = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        }
    }

    /// Who a ticket was issued to: the server's token, or a scoped token (by id), whose view the ticket opens.
    enum Holder: Equatable {
        case server
        case token(String)
    }

    /// A ticket for `path` from `now` (Unix seconds) for `holder`, and when it expires.
    func issue(path: String, now: Double, for holder: Holder = .server) -> (ticket: String, expires: Double) {
        let expires = (now + Tickets.lifetime).rounded(.up)
        var generator = SystemRandomNumberGenerator()
        let nonce = String(generator.next() as UInt64, radix: 16)
        var head = "\(Int64(expires)).\(nonce)"
        if case .token(let id) = holder { head += "." + id }
        return (head + "." + signature(head, path), expires)
    }

    /// Whom `ticket` opens `path` for at `now` (signed for it, and not expired), nil for nobody.
    func admits(_ ticket: String, path: String, now: Double) -> Holder? {
        let parts = ticket.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 || parts.count == 4, let expires = Int64(parts[0]), parts[1].utf8.count <= 16,
            parts.count == 3 || (1...32).contains(parts[2].utf8.count)
        else { return nil }
        guard Double(expires) >= now, Double(expires) <= now + Tickets.lifetime + 1 else { return nil }
        let head = parts.dropLast().joined(separator: ".")
        let expected = Array(signature(head, path).utf8)
        guard AccessGate.equalInConstantTime(Array(parts.last!.utf8), expected) else { return nil }
        return parts.count == 4 ? .token(String(parts[2])) : .server
    }

    private func signature(_ head: String, _ path: String) -> String {
        Digest.hex(Digest.hmacSHA256(key: key, message: Array((head + " " + path).utf8)))
    }
}
