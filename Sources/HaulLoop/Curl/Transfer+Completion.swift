internal import CCurl
import Glibc

/// How a transfer ends: the address check of each connection curl opens, and the result its multi reports, its
/// failure read as the profile says (the connection's, the origin's, a proxy's).
extension Transfer {
    /// curl's socket opener: the policy's check on the address about to be connected to.
    func openSocket(_ address: UnsafeMutablePointer<curl_sockaddr>) -> curl_socket_t {
        let family = address.pointee.family
        let raw = UnsafeRawPointer(address) + MemoryLayout<curl_sockaddr>.offset(of: \curl_sockaddr.addr)!
        var bytes: [UInt8] = []
        if family == AF_INET {
            let v4 = raw.loadUnaligned(as: sockaddr_in.self)
            bytes = withUnsafeBytes(of: v4.sin_addr) { Array($0) }
        } else if family == AF_INET6 {
            let v6 = raw.loadUnaligned(as: sockaddr_in6.self)
            bytes = withUnsafeBytes(of: v6.sin6_addr) { Array($0) }
        }
        if let policy = request.policy.addressPolicy, !policy.allows(bytes) {
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            inet_ntop(family, bytes, &text, socklen_t(text.count))
            let printed = text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            refusedAddress = (printed, AddressPolicy.reason(bytes) ?? "not allowed")
            return CURL_SOCKET_BAD
        }
        return socket(family, address.pointee.socktype, address.pointee.protocol)
    }

    func finish(code: CURLcode) {
        // A reply whose body never came (HEAD, an empty file, a connection cut right after the headers) still gets
        // its headers looked at, before its end; not a redirect that could not be followed (that failure is the
        // answer).
        let unfollowed = response.map { (300..<400).contains($0.status) } ?? true
        // One hop at a time, a redirect is looked at here too (its target is this hop's answer).
        if !responseDelivered, code == CURLE_OK || !unfollowed || (request.policy.checksEachHop && response != nil) {
            _ = deliverResponse()
        }
        // A file server's file now shorter than where the range starts (it changed while paused) refuses the RETR
        // after REST: told as HTTP tells a range past the end, 416 with the size, so the machine fetches the new
        // version from byte 0 instead of failing the download on the refusal.
        if profile.failures == .fileServer, !responseDelivered, !aborted, code != CURLE_OK, let size = replies.size,
            let start = request.range?.start, start >= size
        {
            response = TransferResponse(
                status: 416, headers: [("content-range", "bytes */\(size)")], effectiveURL: request.url)
            _ = deliverResponse()
        }
        if redirectTarget != nil, !aborted, code == CURLE_OK || code == CURLE_PARTIAL_FILE {
            if digestChallenged, let onDigestChallenge { return onDigestChallenge() }
            if let redirectTarget, let onRedirect { return onRedirect(redirectTarget) }
        }
        var failure: TransferFailure? = aborted ? .aborted : Transfer.classify(code)
        var message = String(cString: errorBuffer)
        if message.isEmpty, code != CURLE_OK { message = String(cString: curl_easy_strerror(code)) }
        if profile.failures == .fileServer, !aborted, code != CURLE_OK, let refusal = fileTransferFailure(code, message)
        {
            failure = refusal
            if replies.lastCode > 0 { message += " (the server said: \(replies.lastCode) \(replies.lastText))" }
        } else if profile.failures == .http, failure == .unsupportedScheme, !(300..<400).contains(headerParser.status) {
            // curl says "unsupported protocol" for a reply that is not HTTP at all (it reads it as HTTP/0.9); only
            // after a redirect is it about a scheme.
            failure = .badResponse
            message = "the reply is not HTTP (\(message))"
        } else if code == CURLE_OUT_OF_MEMORY {
            // curl 7.88 reports response headers beyond its limit as out of memory.
            message = "the response headers are larger than 100 KiB"
        }
        if failure != nil, !aborted, let refusedAddress {
            failure = .blockedAddress
            let what = proxy == nil ? "" : "the proxy at "
            message = "refused to connect to \(what)\(refusedAddress.address), a \(refusedAddress.reason) address"
        } else if failure != nil, !aborted, let proxyFailure = proxyFailure(code) {
            failure = proxyFailure
            if let shown = proxy?.shown { message += " (proxy \(shown))" }
        }
        onComplete?(TransferResult(failure: failure, message: message, response: response, bodyBytes: bodyBytes))
    }

    /// What an FTP or SFTP failure was on the server's side: a login refused, a file not there or not allowed (its
    /// reply code), REST refused, too many sessions; nil when it was the connection's (classified as HTTP's are).
    func fileTransferFailure(_ code: CURLcode, _ message: String) -> TransferFailure? {
        // 421: the server has no session to spare (too many from this address), whatever curl made of it. An SSH
        // server says so by closing the connection before its banner (sshd's MaxStartups, PerSourceMaxStartups).
        if replies.lastCode == 421 { return .tooManyConnections }
        if code == CURLE_FAILED_INIT || code == CURLE_SSH, message.contains("getting banner") {
            return .tooManyConnections
        }
        if let refusal = hostKeyRefusal {
            return refusal.mismatch
                ? .hostKeyMismatch(fingerprint: refusal.fingerprint)
                : .hostKeyUnknown(fingerprint: refusal.fingerprint)
        }
        switch code {
        case CURLE_LOGIN_DENIED: return .loginFailed
        case CURLE_REMOTE_FILE_NOT_FOUND, CURLE_REMOTE_ACCESS_DENIED, CURLE_FTP_COULDNT_RETR_FILE:
            return .refused(code: replies.lastCode >= 400 ? replies.lastCode : 550)
        // (A refused command before RETR is REST: Haul's SIZE may fail.)
        case CURLE_FTP_COULDNT_USE_REST, CURLE_BAD_DOWNLOAD_RESUME, CURLE_QUOTE_ERROR: return .rangesRefused
        case CURLE_USE_SSL_FAILED: return .tls
        case CURLE_FTP_CANT_GET_HOST: return .connect
        case CURLE_WEIRD_SERVER_REPLY, CURLE_FTP_WEIRD_PASV_REPLY, CURLE_FTP_WEIRD_227_FORMAT,
            CURLE_FTP_COULDNT_SET_TYPE, CURLE_FTP_WEIRD_PASS_REPLY:
            return replies.lastCode >= 500 ? .refused(code: replies.lastCode) : .badResponse
        default: return nil
        }
    }

    /// What a failure through a proxy was on the proxy's side: unreachable, refusing the credentials, or refusing the
    /// origin (a CONNECT answered with an error, a SOCKS reply that is not a success); nil when it was not.
    func proxyFailure(_ code: CURLcode) -> TransferFailure? {
        if code == CURLE_COULDNT_RESOLVE_PROXY { return .proxyUnreachable }
        guard proxy != nil else { return nil }
        if code == CURLE_COULDNT_CONNECT { return .proxyUnreachable }
        var connectCode = 0
        haul_easy_getinfo_long(easy, CURLINFO_HTTP_CONNECTCODE, &connectCode)
        if connectCode == 407 || connectCode == 401 { return .proxyAuthFailed }
        if connectCode >= 400 { return .proxyRefused(retryable: connectCode >= 500) }
        guard code == CURLE_PROXY else { return nil }
        var detail = 0
        haul_easy_getinfo_long(easy, CURLINFO_PROXY_ERROR, &detail)
        switch CURLproxycode(UInt32(detail)) {
        case CURLPX_USER_REJECTED, CURLPX_NO_AUTH, CURLPX_RECV_AUTH, CURLPX_SEND_AUTH, CURLPX_LONG_USER,
            CURLPX_LONG_PASSWD:
            return .proxyAuthFailed
        case CURLPX_REPLY_NOT_ALLOWED, CURLPX_REPLY_CONNECTION_REFUSED, CURLPX_REPLY_COMMAND_NOT_SUPPORTED,
            CURLPX_REPLY_ADDRESS_TYPE_NOT_SUPPORTED, CURLPX_LONG_HOSTNAME, CURLPX_BAD_VERSION, CURLPX_UNKNOWN_MODE:
            return .proxyRefused(retryable: false)
        default:
            // General failure, host or network unreachable, TTL expired, a reply cut short: may pass.
            return .proxyRefused(retryable: true)
        }
    }

    static func classify(_ code: CURLcode) -> TransferFailure? {
        switch code {
        case CURLE_OK: return nil
        case CURLE_COULDNT_RESOLVE_HOST: return .dns
        case CURLE_COULDNT_RESOLVE_PROXY: return .proxyUnreachable
        case CURLE_COULDNT_CONNECT: return .connect
        case CURLE_OPERATION_TIMEDOUT: return .timeout
        case CURLE_TOO_MANY_REDIRECTS: return .tooManyRedirects
        case CURLE_UNSUPPORTED_PROTOCOL: return .unsupportedScheme
        // curl 7.88 reports response headers beyond its 100 KiB limit as out of memory.
        case CURLE_WEIRD_SERVER_REPLY, CURLE_OUT_OF_MEMORY, CURLE_BAD_CONTENT_ENCODING: return .badResponse
        case CURLE_PARTIAL_FILE, CURLE_GOT_NOTHING: return .cutOff
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED,
            CURLE_SSL_SHUTDOWN_FAILED, CURLE_SSL_CRL_BADFILE, CURLE_SSL_ISSUER_ERROR,
            CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CLIENTCERT:
            return .tls
        case CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_HTTP2, CURLE_HTTP2_STREAM: return .network
        case CURLE_WRITE_ERROR, CURLE_ABORTED_BY_CALLBACK: return .aborted
        default: return .other
        }
    }
}
