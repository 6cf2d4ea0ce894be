import HaulLoop

/// What the probe learned about a remote file.
public struct ProbeResult: Equatable, Sendable {
    public var finalURL: String
    /// nil when the server does not say.
    public var totalBytes: Int64?
    public var acceptsRanges: Bool
    /// Only a strong ETag: a weak one cannot guard a byte range.
    public var etag: String?
    public var lastModified: String?
    public var contentType: String?
    public var contentDisposition: String?

    public init(
        finalURL: String, totalBytes: Int64?, acceptsRanges: Bool, etag: String? = nil,
        lastModified: String? = nil, contentType: String? = nil, contentDisposition: String? = nil
    ) {
        self.finalURL = finalURL
        self.totalBytes = totalBytes
        self.acceptsRanges = acceptsRanges
        self.etag = etag
        self.lastModified = lastModified
        self.contentType = contentType
        self.contentDisposition = contentDisposition
    }

    /// Resuming needs ranges, a known size and a validator for If-Range; without them a restart is the only
    /// safe way to continue.
    public var resumable: Bool { acceptsRanges && totalBytes != nil && (etag != nil || lastModified != nil) }

    /// The validator to send in `If-Range`: the strong ETag, else Last-Modified.
    public var validator: String? { etag ?? lastModified }
}

/// The decision after the first request's headers.
public enum ProbeOutcome: Equatable, Sendable {
    case result(ProbeResult)
    /// The server answered with an error status.
    case httpError(Int)
    /// A 206 for a range other than the one asked for (from byte 0): its body is not the start of the file.
    case wrongRange
}

/// Interpreting the first reply: a pure function of the response, tested as a table.
public enum Probe {
    /// The headers of the download's first request, a GET with `Range: bytes=0-` (the whole file, asked as a
    /// range): they settle size, validators, name and range support before a body byte is written, and the body
    /// that follows is the start of the file either way.
    public static func interpretFirstResponse(_ response: TransferResponse) -> ProbeOutcome {
        switch response.status {
        case 206:
            // Its body is written from byte 0 at once: only a Content-Range that says so will do.
            guard let range = response.header("content-range").flatMap(ContentRange.init), range.first == 0 else {
                return .wrongRange
            }
            return .result(result(from: response, total: range.complete, ranges: true))
        case 200..<300:
            // The whole file as a plain answer. A server may answer `bytes=0-` so and still serve ranges, as long as
            // it says it does.
            let length = response.header("content-length").flatMap { Int64($0) }.flatMap { $0 >= 0 ? $0 : nil }
            let ranges =
                response.status == 200 && length != nil
                && response.header("accept-ranges")?.lowercased().contains("bytes") == true
            return .result(result(from: response, total: length, ranges: ranges))
        case 416:
            // `bytes=0-` is unsatisfiable only for an empty file.
            if let range = response.header("content-range").flatMap(ContentRange.init), range.complete == 0 {
                return .result(result(from: response, total: 0, ranges: false))
            }
            return .httpError(416)
        default:
            return .httpError(response.status)
        }
    }

    private static func result(from response: TransferResponse, total: Int64?, ranges: Bool) -> ProbeResult {
        ProbeResult(
            finalURL: response.effectiveURL, totalBytes: total, acceptsRanges: ranges,
            etag: strongETag(response.header("etag")),
            lastModified: lastModified(response.header("last-modified")),
            contentType: response.header("content-type"),
            contentDisposition: response.header("content-disposition"))
    }

    /// The ETag if it is strong (`"abc"`), nil for weak (`W/"abc"`) or malformed ones. It goes back to the origin
    /// as `If-Range`, so only RFC 9110's `opaque-tag` passes: no control byte can ride along.
    public static func strongETag(_ value: String?) -> String? {
        guard let value = value.map(HTTPField.trimmed) else { return nil }
        let bytes = Array(value.utf8)
        guard bytes.count >= 2, bytes.first == 0x22, bytes.last == 0x22,
            bytes.dropFirst().dropLast().allSatisfy({ $0 == 0x21 || (0x23...0x7E).contains($0) || $0 >= 0x80 })
        else { return nil }
        return value
    }

    /// Last-Modified, which may also go back as `If-Range`: nil unless it is a valid field value.
    public static func lastModified(_ value: String?) -> String? {
        guard let value = value.map(HTTPField.trimmed), !value.isEmpty, HTTPField.isValue(value) else { return nil }
        return value
    }
}
