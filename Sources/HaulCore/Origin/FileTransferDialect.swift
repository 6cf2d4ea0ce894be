import HaulLoop

/// FTP, FTPS and SFTP: a file fetched whole or from an offset (REST; an SFTP read at an offset), its version told by
/// its size and modification time, which have no If-Range to guard a range with: every range's answer is checked
/// against both before a byte of it is written, so a file that changed while paused or between two segments is
/// fetched again from byte 0, as a changed ETag is. The transfer layer makes an FTP or SFTP answer into an HTTP-like
/// one (200 with Content-Length for the file, 206 with Content-Range for a range, Last-Modified from MDTM or the
/// stat), which the HTTP probe reads as it is.
public struct FileTransferDialect: OriginDialect {
    public init() {}

    public var schemes: [String] { ["ftp", "ftps", "sftp"] }

    /// How `url` is fetched: its modification time asked for; SFTP as an SSH login with the host key checked;
    /// FTP passive to the control connection's address, with SIZE and REST sent by Haul (but for a HEAD), and for
    /// ftps:// looked at now and then whatever its sockets say. ftps:// on port 990 is TLS from the first byte
    /// (implicit, as curl speaks ftps:// itself); on another port AUTH TLS on the control connection, required
    /// (explicit: curl is given ftp://).
    static func profile(_ url: String, head: Bool) -> TransferProfile {
        var profile = TransferProfile(answers: .fileServerReplies, settings: [.fileTime], failures: .fileServer)
        let parts = URLParts(url)
        guard parts?.scheme != "sftp" else {
            profile.settings.append(.ssh)
            return profile
        }
        profile.settings.append(.passiveToControlAddress)
        if !head { profile.settings.append(.sizeAndOffsetCommands) }
        if parts?.scheme == "ftps" {
            profile.settings.append(.sweeps)
            if parts?.givenPort != 990 {
                profile.settings.append(.requireTLS)
                profile.curlURL = "ftp" + url.dropFirst(4)
            }
        }
        return profile
    }

    public func request(
        _ kind: FetchKind, url: String, headers: [HeaderField], policy: OutboundPolicy
    )
        -> TransferRequest
    {
        // Headers are HTTP's: an FTP or SFTP server gets none.
        var request = TransferRequest(url: url, policy: policy)
        request.profile = FileTransferDialect.profile(url, head: kind == .head)
        switch kind {
        case .probe, .whole: break
        case .head: request.method = .head
        case .range(let start, let end, _):
            // From byte 0 to the end is the whole file: no REST for a server that may not have it.
            if start > 0 || end != nil { request.range = (start, end) }
        case .compare(let start, let end, _):
            request.range = (start, end)
        }
        return request
    }

    public func probe(_ response: TransferResponse) -> ProbeOutcome {
        Probe.interpretFirstResponse(response)
    }

    public func checkRange(
        _ response: TransferResponse, start: Int64, end: Int64?, total: Int64?, etag: String?,
        lastModified: String?
    ) -> RangeReply {
        // A range from byte 0 to the end is fetched as the whole file: its answer is the file's.
        if start == 0, end == nil, response.status == 200 {
            let length = response.header("content-length").flatMap { Int64($0) }
            if let total, let length, length != total { return .changed }
            return changed(response, lastModified) ? .changed : .accept
        }
        let reply = RangeReply.check(response, start: start, end: end, total: total, etag: nil)
        if reply == .accept, changed(response, lastModified) { return .changed }
        return reply
    }

    /// Whether the answer's modification time is another than the one the download's bytes are of.
    private func changed(_ response: TransferResponse, _ lastModified: String?) -> Bool {
        guard let lastModified, let now = Probe.lastModified(response.header("last-modified")) else { return false }
        return now != lastModified
    }

    public func validators(_ response: TransferResponse) -> (etag: String?, lastModified: String?) {
        (nil, Probe.lastModified(response.header("last-modified")))
    }

    public func error(status: Int, response: TransferResponse?) -> DownloadError {
        DownloadError(.ftp(status), "the server refused the file (\(status))", retryable: (400..<500).contains(status))
    }
}
