import HaulLoop

/// An expected digest, written `algorithm:hex` (`sha256:9f86d0...`).
public struct Checksum: Equatable, Sendable {
    public let algorithm: DigestAlgorithm
    /// Lower-case hex.
    public let hex: String

    /// nil unless `text` names a known algorithm and a hex digest of its exact length.
    public init?(_ text: String) {
        let parts = text.split(separator: ":", maxSplits: 1)
        guard parts.count == 2, let algorithm = DigestAlgorithm(rawValue: parts[0].lowercased()) else { return nil }
        let hex = parts[1].lowercased()
        guard hex.count == algorithm.hexLength, hex.allSatisfy(\.isHexDigit) else { return nil }
        self.algorithm = algorithm
        self.hex = hex
    }

    public var description: String { "\(algorithm.rawValue):\(hex)" }
}
