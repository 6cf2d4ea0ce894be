import FoundationEssentials
import HaulLoop

/// A token a client holds instead of the server's own (`--token`, the admin's): a name, a scope, an optional
/// expiry. The secret (`haul_` and 32 random bytes in hex) is shown once when it is made; the store keeps only its
/// SHA-256, looked up on each request, so a token removed on one node is refused by every node at its next request.
public struct AccessToken: Sendable, Equatable {
    public var id: String
    public var name: String
    public var scope: Scope
    public var expiresAt: Date?
    public var createdAt: Date
    /// A folder under the download root: the token's downloads land under it, and it sees only its own downloads.
    public var root: String?
    /// The most bytes its downloads may hold together, finished and in flight.
    public var quotaBytes: Int64?
    /// The most of its downloads that run at once (others' go on meanwhile).
    public var maxActive: Int?

    public init(id: String, name: String, scope: Scope, expiresAt: Date?, createdAt: Date, root: String? = nil,
                quotaBytes: Int64? = nil, maxActive: Int? = nil) {
        self.id = id
        self.name = name
        self.scope = scope
        self.expiresAt = expiresAt
        self.createdAt = createdAt
        self.root = root
        self.quotaBytes = quotaBytes
        self.maxActive = maxActive
    }

    public func isExpired(at now: Date) -> Bool { expiresAt.map { $0 <= now } ?? false }

    public static func newSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        return "haul_" + Digest.hex((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// What the store keeps of a secret.
    public static func hash(_ secret: String) -> String { Digest.hex(Digest.sha256(Array(secret.utf8))) }

    /// A token's name: 1 to 64 printable characters.
    public static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64 && name.utf8.allSatisfy { $0 >= 0x20 && $0 != 0x7F }
    }
}

extension Scope {
    public init?(name: String) {
        guard let scope = Scope.allCases.first(where: { $0.name == name }) else { return nil }
        self = scope
    }
}

extension DownloadStore {
    public func insertToken(_ token: AccessToken, hash: String) throws {
        try db.run("INSERT INTO tokens (id, name, scope, hash, expires_at, created_at, root, quota_bytes, max_active) "
                   + "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   [.text(token.id), .text(token.name), .text(token.scope.name), .text(hash),
                    token.expiresAt.map { .real($0.timeIntervalSince1970) } ?? .null,
                    .real(token.createdAt.timeIntervalSince1970), token.root.map { .text($0) } ?? .null,
                    token.quotaBytes.map { .integer($0) } ?? .null,
                    token.maxActive.map { .integer(Int64($0)) } ?? .null])
    }

    private static let tokenColumns = "id, name, scope, expires_at, created_at, root, quota_bytes, max_active"

    public func tokens() throws -> [AccessToken] {
        try db.query("SELECT \(Self.tokenColumns) FROM tokens ORDER BY created_at, id").compactMap(DownloadStore.token)
    }

    /// The token whose secret hashes to `hash`, nil for none.
    public func token(hash: String) throws -> AccessToken? {
        try db.query("SELECT \(Self.tokenColumns) FROM tokens WHERE hash = ?", [.text(hash)])
            .compactMap(DownloadStore.token).first
    }

    /// The token with this id, nil for none (removed).
    public func token(id: String) throws -> AccessToken? {
        try db.query("SELECT \(Self.tokenColumns) FROM tokens WHERE id = ?", [.text(id)])
            .compactMap(DownloadStore.token).first
    }

    /// Removes a token; false when there was none.
    public func deleteToken(id: String) throws -> Bool {
        !(try db.query("DELETE FROM tokens WHERE id = ? RETURNING id", [.text(id)])).isEmpty
    }

    private static func token(_ row: SQLRow) -> AccessToken? {
        guard let id = row["id"].string, let name = row["name"].string,
              let scope = row["scope"].string.flatMap(Scope.init(name:)),
              let created = row["created_at"].double else { return nil }
        return AccessToken(id: id, name: name, scope: scope,
                           expiresAt: row["expires_at"].double.map(Date.init(timeIntervalSince1970:)),
                           createdAt: Date(timeIntervalSince1970: created), root: row["root"].string,
                           quotaBytes: row["quota_bytes"].int, maxActive: row["max_active"].int.map { Int($0) })
    }
}

extension Engine {
    /// Makes a token; the secret is in the answer only.
    public func addToken(_ token: AccessToken) throws(EngineError) -> (token: AccessToken, secret: String) {
        var token = token
        token.id = Engine.newID()
        token.createdAt = clock.wallTime
        let secret = AccessToken.newSecret()
        do {
            try store.insertToken(token, hash: AccessToken.hash(secret))
        } catch {
            throw .storage("\(error)")
        }
        log.info("token added", ["token.id": token.id, "token.name": token.name, "token.scope": token.scope.name])
        return (token, secret)
    }

    public func tokens() throws(EngineError) -> [AccessToken] {
        do {
            return try store.tokens()
        } catch {
            throw .storage("\(error)")
        }
    }

    public func removeToken(_ id: String) throws(EngineError) {
        let found: Bool
        do {
            found = try store.deleteToken(id: id)
        } catch {
            throw .storage("\(error)")
        }
        guard found else { throw .missing("no token with id '\(id)'") }
        log.info("token removed", ["token.id": id])
    }

    /// The token a presented secret is, if it is one and has not expired; read from the store each time, so a
    /// removal on any node counts at once. A store that cannot be read admits nobody.
    public func token(forSecret secret: String) -> AccessToken? {
        guard secret.hasPrefix("haul_"), let token = try? store.token(hash: AccessToken.hash(secret)),
              !token.isExpired(at: clock.wallTime) else { return nil }
        return token
    }

    /// The token with this id as a ticket names it: nil when it was removed or expired since.
    public func token(id: String) -> AccessToken? {
        guard let token = try? store.token(id: id), !token.isExpired(at: clock.wallTime) else { return nil }
        return token
    }

    /// The limits of the token that owns downloads (`quota_bytes`, `max_active`), read from the store once and
    /// kept: a token's limits never change once it is made. A token removed before this node read it has none.
    public func ownerToken(_ owner: String) -> AccessToken? {
        if let known = ownerTokens[owner] { return known }
        guard let token = try? store.token(id: owner) else { return nil }
        ownerTokens[owner] = token
        return token
    }
}
