/// Who an operation is done for: the server's own token (or anyone, on a server without one), or a scoped token
/// made with `POST /tokens`. Its scope says which operations it may call (`Operation.scope`); this says which
/// downloads: a token with a root sees only the downloads it added, and a token below `manage` changes only its
/// own.
public struct Caller: Sendable {
    public let scope: Scope
    /// nil for the server's own token.
    public let token: AccessToken?

    public init(scope: Scope, token: AccessToken?) {
        self.scope = scope
        self.token = token
    }

    public init(_ token: AccessToken) { self.init(scope: token.scope, token: token) }

    /// The server's token: everything.
    public static let server = Caller(scope: .admin, token: nil)

    /// The token whose downloads alone this caller sees (one with a root), nil when it sees all.
    public var confinedTo: String? {
        guard let token, token.root != nil else { return nil }
        return token.id
    }

    public func sees(_ download: Download) -> Bool {
        guard let confinedTo else { return true }
        return download.owner == confinedTo
    }

    /// Whether it may pause, resume, change or remove `download`: managers any they see, others their own.
    public func mayChange(_ download: Download) -> Bool {
        guard let token else { return true }
        return sees(download) && (scope >= .manage || download.owner == token.id)
    }

    /// Whether answers show who added each download (`owner`): to managers and admins.
    public var seesOwners: Bool { scope >= .manage }

    /// For log lines of what it changed: the token's id and name, never its secret.
    public var logFields: [String: String] {
        guard let token else { return ["token": "server"] }
        return ["token.id": token.id, "token.name": token.name]
    }
}
