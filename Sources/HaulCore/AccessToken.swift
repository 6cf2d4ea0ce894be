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

    public init(id: String, name: String, scope: Scope, expiresAt: Date?, createdAt: Date) {
        self.id = id
        self.name = name
        self.scope = scope
        self.expiresAt = expiresAt
        self.createdAt = createdAt
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
        try db.run("INSERT INTO tokens (id, name, scope, hash, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                   [.text(token.id), .text(token.name), .text(token.scope.name), .text(hash),
                    token.expiresAt.map { .real($0.timeIntervalSince1970) } ?? .null,
                    .real(token.createdAt.timeIntervalSince1970)])
    }

    public func tokens() throws -> [AccessToken] {
        try db.query("SELECT id, name, scope, expires_at, created_at FROM tokens ORDER BY created_at, id")
            .compactMap(DownloadStore.token)
    }

    /// The token whose secret hashes to `hash`, nil for none.
    public func token(hash: String) throws -> AccessToken? {
        try db.query("SELECT id, name, scope, expires_at, created_at FROM tokens WHERE hash = ?", [.text(hash)])
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
                           createdAt: Date(timeIntervalSince1970: created))
    }
}

extension Engine {
    /// Makes a token; the secret is in the answer only.
    public func addToken(name: String, scope: Scope, expiresAt: Date?) throws(EngineError)
        -> (token: AccessToken, secret: String) {
        let token = AccessToken(id: Engine.newID(), name: name, scope: scope, expiresAt: expiresAt,
                                createdAt: clock.wallTime)
        let secret = AccessToken.newSecret()
        do {
            try store.insertToken(token, hash: AccessToken.hash(secret))
        } catch {
            throw .storage("\(error)")
        }
        log.info("token added", ["token.id": token.id, "token.name": name, "token.scope": scope.name])
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
}
