import HaulLoop

/// How an HLS download's stream answers (`HLSStream`): HTTP underneath, but the output's size is unknown until its
/// last piece is written, and it can still be resumed: from the byte the journal vouches for, with the playlist's
/// fingerprint as If-Range (a changed playlist answers from byte 0).
struct PlaylistDialect: OriginDialect {
    var schemes: [String] { HTTPDialect().schemes }

    func request(_ kind: FetchKind, url: String, headers: [HeaderField], policy: OutboundPolicy) -> TransferRequest {
        HTTPDialect().request(kind, url: url, headers: headers, policy: policy)
    }

    func probe(_ response: TransferResponse) -> ProbeOutcome {
        guard (200..<300).contains(response.status) else { return .httpError(response.status) }
        return .result(
            ProbeResult(
                finalURL: response.effectiveURL, totalBytes: nil,
                acceptsRanges: Probe.strongETag(response.header("etag")) != nil,
                etag: Probe.strongETag(response.header("etag")), contentType: response.header("content-type"),
                contentDisposition: response.header("content-disposition")))
    }

    func checkRange(
        _ response: TransferResponse, start: Int64, end: Int64?, total: Int64?, etag: String?, lastModified: String?
    ) -> RangeReply {
        RangeReply.check(response, start: start, end: end, total: total, etag: etag)
    }

    func validators(_ response: TransferResponse) -> (etag: String?, lastModified: String?) {
        (Probe.strongETag(response.header("etag")), nil)
    }

    func error(status: Int, response: TransferResponse?) -> DownloadError {
        HTTPDialect().error(status: status, response: response)
    }
}
