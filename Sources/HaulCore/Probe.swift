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

    public init(finalURL: String, totalBytes: Int64?, acceptsRanges: Bool, etag: String? = nil,
                lastModified: String? = nil, contentType: String? = nil, contentDisposition: String? = nil) {
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

/// The decision after one probe request.
public enum ProbeOutcome: Equatable, Sendable {
    case result(ProbeResult)
    /// HEAD was refused or told too little: ask again with `GET` and `Range: bytes=0-0`.
    case tryRangedGet
    /// The server answered with an error status.
    case httpError(Int)
}

/// Interpreting probe replies: pure functions of the response, tested as tables.
public enum Probe {
    /// The reply to `HEAD`.
    public static func interpretHead(_ response: TransferResponse) -> ProbeOutcome {
        guard (200..<300).contains(response.status) else {
            // Some servers refuse HEAD (405, 501) and presigned URLs are signed for GET only (403): try GET.
            return .tryRangedGet
        }
        guard let length = response.header("content-length").flatMap({ Int64($0) }), length >= 0,
              response.header("accept-ranges")?.lowercased().contains("bytes") == true else {
            return .tryRangedGet
        }
        return .result(result(from: response, total: length, ranges: true))
    }

    /// The reply to `GET` with `Range: bytes=0-0`.
    public static func interpretRangedGet(_ response: TransferResponse) -> ProbeOutcome {
        switch response.status {
        case 206:
            let range = response.header("content-range").flatMap(ContentRange.init)
            guard let range, range.first == 0 else {
                // A 206 we cannot read: treat the server as not supporting ranges.
                return .result(result(from: response, total: nil, ranges: false))
            }
            return .result(result(from: response, total: range.complete, ranges: true))
        case 200..<300:
            let length = response.header("content-length").flatMap { Int64($0) }
            return .result(result(from: response, total: length.flatMap { $0 >= 0 ? $0 : nil }, ranges: false))
        case 416:
            // `bytes=0-0` is unsatisfiable only for an empty file.
            if let range = response.header("content-range").flatMap(ContentRange.init), range.complete == 0 {
                return .result(result(from: response, total: 0, ranges: false))
            }
            return .httpError(416)
        default:
            return .httpError(response.status)
        }
    }

    private static func result(from response: TransferResponse, total: Int64?, ranges: Bool) -> ProbeResult {
        ProbeResult(finalURL: response.effectiveURL, totalBytes: total, acceptsRanges: ranges,
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

import Foundation
