import HaulLoop

/// The verdict on the reply to a ranged request, made before its first byte is written.
public enum RangeReply: Equatable, Sendable {
    /// 206 with the range asked for, from the same version of the file: write at the requested offset.
    case accept
    /// 200 with the whole body: the server ignored Range, or If-Range found the file changed. Start over at 0.
    case restartWithBody
    /// 206 from a different version of the file (size or ETag changed): discard and start over.
    case changed
    /// 206 for a range other than the one asked for.
    case mismatch
    case httpError(Int)
}

extension RangeReply {
    /// Checks `response` to a request for bytes `start...` (to `end` inclusive, or to the end of the file), for a
    /// file last seen with `total` bytes and ETag `etag`.
    public static func check(
        _ response: TransferResponse, start: Int64, end: Int64?, total: Int64?,
        etag: String?
    ) -> RangeReply {
        switch response.status {
        case 206:
            guard let range = response.header("content-range").flatMap(ContentRange.init),
                let first = range.first, let last = range.last
            else { return .mismatch }
            if let total, let complete = range.complete, complete != total { return .changed }
            if let etag, let now = Probe.strongETag(response.header("etag")), now != etag { return .changed }
            guard first == start else { return .mismatch }
            if let end {
                guard last == end else { return .mismatch }
            } else if let total {
                guard last == total - 1 else { return .mismatch }
            }
            return .accept
        case 200:
            return .restartWithBody
        default:
            return .httpError(response.status)
        }
    }
}
