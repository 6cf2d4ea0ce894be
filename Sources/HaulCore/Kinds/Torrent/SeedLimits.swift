/// When a torrent whose files are complete stops seeding: once it uploaded `ratio` times the size of the files it
/// fetched, or after `seconds` of seeding, whichever comes first. A limit of 0 leaves that measure out; with both
/// 0 the torrent does not seed at all (the server's default): it is completed as soon as its files are named.
public struct SeedLimits: Sendable, Equatable {
    public var ratio: Double
    public var seconds: Int64

    public init(ratio: Double = 0, seconds: Int64 = 0) {
        self.ratio = ratio
        self.seconds = seconds
    }

    /// Whether a finished torrent seeds at all.
    public var seeds: Bool { ratio > 0 || seconds > 0 }

    /// Each measure from the download's own limit, else its category's, else the server's.
    public static func of(_ download: Download, category: Category?, server: SeedLimits) -> SeedLimits {
        SeedLimits(
            ratio: download.seedRatio ?? category?.seedRatio ?? server.ratio,
            seconds: download.seedTime ?? category?.seedTime ?? server.seconds)
    }

    /// Whether seeding stops, having uploaded `uploaded` bytes of files of `size` bytes and seeded `seeding`
    /// seconds.
    func met(uploaded: Int64, size: Int64, seeding: Int64) -> Bool {
        guard seeds else { return true }
        if ratio > 0, Double(uploaded) >= ratio * Double(max(size, 1)) { return true }
        return seconds > 0 && seeding >= seconds
    }
}
