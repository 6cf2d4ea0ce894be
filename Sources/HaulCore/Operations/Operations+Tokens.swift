import FoundationEssentials
import HaulLoop

/// The operations on tokens (`/tokens`, the admin's), and what the access gate looks up.
extension Operations {
    public func tokens() throws(EngineError) -> [AccessToken] { try engine.tenancy.tokens() }

    /// Makes a token; the secret is in the answer only.
    public func addToken(_ token: AccessToken) throws(EngineError) -> (token: AccessToken, secret: String) {
        try engine.tenancy.addToken(token)
    }

    public func removeToken(_ id: String) throws(EngineError) { try engine.tenancy.removeToken(id) }

    /// What the downloads the token `id` added hold against its quota.
    public func usage(ofToken id: String) -> Int64 { engine.tenancy.usage(of: id) }

    /// The token a presented secret is, if it is one and has not expired (read from the store each time).
    public func token(forSecret secret: String) -> AccessToken? { engine.tenancy.token(forSecret: secret) }

    /// The token with this id (a stream's ticket names it): nil once removed or expired.
    public func token(id: String) -> AccessToken? { engine.tenancy.token(id: id) }
}
