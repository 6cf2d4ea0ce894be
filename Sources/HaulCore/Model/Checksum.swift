import FoundationEssentials
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

    /// The digest of this algorithm an answer announces, as lower-case hex: `Repr-Digest: sha-256=:BASE64:` (RFC
    /// 9530) or `Digest: SHA-256=BASE64` (RFC 3230); nil when it announces none.
    public func announced(by response: TransferResponse) -> String? {
        let names: [DigestAlgorithm: [String]] = [.sha256: ["sha-256"], .sha1: ["sha", "sha-1"], .md5: ["md5"]]
        for header in ["repr-digest", "digest"] {
            guard let value = response.header(header) else { continue }
            for member in value.split(separator: ",") {
                let pair = member.split(separator: "=", maxSplits: 1).map { String($0).trimmingSpaces() }
                guard pair.count == 2, names[algorithm]?.contains(pair[0].lowercased()) == true else { continue }
                let encoded = pair[1].trimming { $0 == ":" }
                guard let bytes = Data(base64Encoded: encoded) else { continue }
                return Digest.hex(Array(bytes))
            }
        }
        return nil
    }
}
