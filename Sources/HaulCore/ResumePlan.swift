/// How to continue a download that already has bytes in its part file.
public struct ResumePlan: Equatable, Sendable {
    /// First byte to request; 0 means from the beginning.
    public var offset: Int64
    /// Sent as `If-Range` when `offset > 0`.
    public var ifRange: String?

    public init(offset: Int64, ifRange: String?) {
        self.offset = offset
        self.ifRange = ifRange
    }

    public static let fromStart = ResumePlan(offset: 0, ifRange: nil)

    /// Continues from the bytes both the journal and the part file vouch for, guarded by `If-Range`; starts over
    /// when the server cannot serve ranges, the size is unknown, no validator can prove the file unchanged, or
    /// the journal claims more than the file holds.
    public static func decide(journaled: Int64, partFileSize: Int64?, total: Int64?, acceptsRanges: Bool,
                              validator: String?) -> ResumePlan {
        guard acceptsRanges, let total, let validator, let partFileSize, journaled > 0 else { return .fromStart }
        let offset = min(journaled, partFileSize)
        guard offset > 0, offset <= total else { return .fromStart }
        return ResumePlan(offset: offset, ifRange: validator)
    }
}
