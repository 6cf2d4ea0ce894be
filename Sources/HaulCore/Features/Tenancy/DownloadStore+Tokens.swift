import FoundationEssentials
import HaulLoop

extension DownloadStore {
    public func insertToken(_ token: AccessToken, hash: String) throws {
        try db.run(
            "INSERT INTO tokens (id, name, scope, hash, expires_at, created_at, root, quota_bytes, max_active) "
                + "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                .text(token.id), .text(token.name), .text(token.scope.name), .text(hash),
                token.expiresAt.map { .real($0.timeIntervalSince1970) } ?? .null,
                .real(token.createdAt.timeIntervalSince1970), token.root.map { .text($0) } ?? .null,
                token.quotaBytes.map { .integer($0) } ?? .null,
                token.maxActive.map { .integer(Int64($0)) } ?? .null,
            ])
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
            let created = row["created_at"].double
        else { return nil }
        return AccessToken(
            id: id, name: name, scope: scope,
            expiresAt: row["expires_at"].double.map(Date.init(timeIntervalSince1970:)),
            createdAt: Date(timeIntervalSince1970: created), root: row["root"].string,
            quotaBytes: row["quota_bytes"].int, maxActive: row["max_active"].int.map { Int($0) })
    }
}
