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

    public init(
        id: String, name: String, scope: Scope, expiresAt: Date?, createdAt: Date, root: String? = nil,
        quotaBytes: Int64? = nil, maxActive: Int? = nil
    ) {
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
