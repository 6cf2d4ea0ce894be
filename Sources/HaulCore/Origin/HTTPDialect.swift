import HaulLoop

/// HTTP and HTTPS: ranges with `Range` and `If-Range`, the probe a GET of `bytes=0-`, validators the strong ETag
/// and Last-Modified (RFC 9110).
public struct HTTPDialect: OriginDialect {
    public init() {}

    public var schemes: [String] { ["http", "https"] }

    /// HTTP/2 where TLS offers it (a download's segments then share a connection), credentials as HTTP
    /// authentication, answers read as header lines, and redirects within HTTP.
    static let profile = TransferProfile(
        answers: .headerLines, settings: [.http2(waitOn: ["https"]), .httpAuthentication],
        failures: .http, redirects: ["http", "https"])

    public func request(
        _ kind: FetchKind, url: String, headers: [HeaderField], policy: OutboundPolicy
    )
        -> TransferRequest
    {
        var request = TransferRequest(url: url, policy: policy)
        request.profile = HTTPDialect.profile
        request.headers = headers.map { ($0.name, $0.value) }
        switch kind {
        case .probe: request.range = (0, nil)
        case .head: request.method = .head
        case .range(let start, let end, let ifRange):
            request.range = (start, end)
            request.ifRange = ifRange
        case .whole: break
        case .compare(let start, let end, let ifRange):
            request.range = (start, end)
            request.ifRange = ifRange
        }
        return request
    }

    public func probe(_ response: TransferResponse) -> ProbeOutcome {
        Probe.interpretFirstResponse(response)
    }

    /// `If-Range` carried the validator: a changed file answers 200 with its new body, which `check` tells.
    public func checkRange(
        _ response: TransferResponse, start: Int64, end: Int64?, total: Int64?, etag: String?,
        lastModified: String?
    ) -> RangeReply {
        RangeReply.check(response, start: start, end: end, total: total, etag: etag)
    }

    public func validators(_ response: TransferResponse) -> (etag: String?, lastModified: String?) {
        (Probe.strongETag(response.header("etag")), Probe.lastModified(response.header("last-modified")))
    }

    public func error(status: Int, response: TransferResponse?) -> DownloadError {
        // Only a proxy asks for proxy credentials (an http origin's request goes to it in absolute form).
        if status == 407 || response?.proxyRefusedCredentials == true {
            return DownloadError(.proxyAuthFailed, "the proxy refused its credentials (HTTP \(status))")
        }
        if status == 401, response?.sentCredentials == true {
            return DownloadError(.authFailed, "the server refused the credentials given (HTTP 401)")
        }
        return DownloadError.http(status, response: response)
    }
}
