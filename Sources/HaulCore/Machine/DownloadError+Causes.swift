import HaulLoop

/// The stable code and message for each way a transfer or a file operation fails.
extension DownloadError {
    /// The origin answered `status`; 408, 429 and 5xx are worth another attempt, after Retry-After if it says so.
    static func http(_ status: Int, response: TransferResponse? = nil) -> DownloadError {
        let retryable = status == 408 || status == 429 || (500..<600).contains(status)
        var error = DownloadError(.http(status), "the server answered HTTP \(status)", retryable: retryable)
        error.retryAfter = response?.header("retry-after").flatMap { RetryAfter.seconds($0) }
        return error
    }

    static func file(_ error: FileError) -> DownloadError {
        if error.isNoSpace { return DownloadError(.diskFull, "no space left on device writing \(error.shownPath)") }
        return DownloadError(.writeFailed, error.description)
    }

    static func transfer(_ result: TransferResult) -> DownloadError {
        let detail = result.message.isEmpty ? "" : ": \(result.message)"
        switch result.failure {
        case .dns?: return DownloadError(.dnsFailed, "cannot resolve the host\(detail)", retryable: true)
        case .connect?: return DownloadError(.connectFailed, "cannot connect\(detail)", retryable: true)
        case .timeout?: return DownloadError(.timeout, "the server stopped responding\(detail)", retryable: true)
        case .tls?: return DownloadError(.tlsFailed, "TLS failed\(detail)")
        case .tooManyRedirects?: return DownloadError(.tooManyRedirects, "more than 10 redirects\(detail)")
        case .blockedAddress?:
            return DownloadError(.blockedAddress, "\(result.message); this server denies private networks")
        case .badResponse?: return DownloadError(.badResponse, "the server's response is not usable HTTP\(detail)")
        case .unsupportedScheme?:
            return DownloadError(.unsupportedScheme, "a redirect leads only to http or https\(detail)")
        case .cutOff?:
            return DownloadError(.connectionCut, "the server closed the connection early\(detail)", retryable: true)
        case .proxyUnreachable?:
            return DownloadError(.proxyUnreachable, "cannot reach the proxy\(detail)", retryable: true)
        case .proxyAuthFailed?:
            return DownloadError(.proxyAuthFailed, "the proxy refused its credentials\(detail)")
        case .proxyRefused(let retryable)?:
            return DownloadError(.proxyRefused, "the proxy would not reach the server\(detail)", retryable: retryable)
        case .loginFailed?: return DownloadError(.loginFailed, "the server refused the login\(detail)")
        case .refused(let code)?:
            // 4xx replies are transient in FTP (450: the file is busy); 5xx are permanent (550: not there, denied).
            return DownloadError(
                .ftp(code), "the server refused the file (\(code))\(detail)",
                retryable: (400..<500).contains(code))
        case .rangesRefused?:
            return DownloadError(
                .rangeMismatch, "the server cannot start a transfer at an offset\(detail)",
                retryable: true)
        case .hostKeyUnknown(let fingerprint)?:
            return DownloadError(
                .hostKeyUnknown,
                "the server's host key \(fingerprint) is not known: add it to "
                    + "--ssh-known-hosts, or give it as the download's host_key once it is checked")
        case .hostKeyMismatch(let fingerprint)?:
            return DownloadError(.hostKeyMismatch, "the server's host key \(fingerprint) is not the one known for it")
        case .tooManyConnections?:
            return DownloadError(.connectionCut, "the server has no session to spare\(detail)", retryable: true)
        case .source(let code, let retryable)?:
            return DownloadError(ErrorCode(rawValue: code), result.message, retryable: retryable)
        case .network?, .other?: return DownloadError(.networkError, "transfer failed\(detail)", retryable: true)
        case .aborted?, nil: return DownloadError(.internalError, "transfer stopped\(detail)")
        }
    }
}
