internal import CCurl
import Glibc

/// One HTTP request on a curl easy handle, run by a `CurlMulti`. Single use: make a new one per attempt.
public final class Transfer {
    let easy: UnsafeMutableRawPointer
    public let request: TransferRequest
    /// Called once, when the final response's headers are complete and before any body byte is passed on.
    /// Return false to abort the transfer (it then ends with `.aborted`).
    public var onResponse: ((TransferResponse) -> Bool)?
    /// Called with each piece of the body, in order.
    public var onData: ((TransferChunk) -> ChunkDecision)?
    /// Called once when the transfer ends, unless it was removed from its multi first.
    public var onComplete: ((TransferResult) -> Void)?

    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
    private var headerParser = HeaderParser()
    private var response: TransferResponse?
    private var responseDelivered = false
    private var aborted = false
    /// The last address the policy refused, and why.
    private var refusedAddress: (address: String, reason: String)?
    public private(set) var bodyBytes: Int64 = 0

    public init(_ request: TransferRequest) throws {
        guard let easy = curl_easy_init() else { throw TransferError.curl("curl_easy_init failed") }
        self.easy = easy
        self.request = request
        errorBuffer.initialize(to: 0)
        try configure()
    }

    deinit {
        curl_easy_cleanup(easy)
        if let headerList { curl_slist_free_all(headerList) }
        errorBuffer.deallocate()
    }

    private func configure() throws {
        let me = Unmanaged.passUnretained(self).toOpaque()
        var results: [CURLcode] = []
        results.append(haul_easy_setopt_string(easy, CURLOPT_URL, request.url))
        results.append(haul_easy_setopt_ptr(easy, CURLOPT_PRIVATE, me))
        results.append(haul_easy_setopt_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer))
        results.append(haul_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1))
        let policy = request.policy
        let schemes = policy.schemes.joined(separator: ",")
        results.append(haul_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, schemes))
        results.append(haul_easy_setopt_string(easy, CURLOPT_REDIR_PROTOCOLS_STR, schemes))
        results.append(haul_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 1))
        // The proxy is always named, and none means none: left unset, libcurl reads http_proxy, https_proxy and
        // all_proxy from the server's environment on its own, and the address guard would then check the proxy's
        // address instead of the origin's.
        switch policy.proxy {
        case .none: results.append(haul_easy_setopt_string(easy, CURLOPT_PROXY, ""))
        }
        if policy.addressPolicy != nil {
            results.append(haul_easy_setopt_ptr(easy, CURLOPT_OPENSOCKETDATA, me))
            results.append(haul_easy_setopt_opensocketfn(easy) { clientp, _, address in
                guard let clientp, let address else { return CURL_SOCKET_BAD }
                let transfer = Unmanaged<Transfer>.fromOpaque(clientp).takeUnretainedValue()
                return transfer.openSocket(address)
            })
        }
        results.append(haul_easy_setopt_long(easy, CURLOPT_MAXREDIRS, policy.maxRedirects))
        // HTTP/2 where a TLS origin offers it (ALPN), 1.1 elsewhere: a download's segments are then streams of one
        // connection (the multi multiplexes). Over TLS a transfer that starts while the host's first connection is
        // still being made waits to learn whether it can share it, instead of opening one of its own.
        results.append(haul_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS)))
        if ASCII.hasPrefixIgnoringCase(request.url, "https:") {
            results.append(haul_easy_setopt_long(easy, CURLOPT_PIPEWAIT, 1))
        }
        if !policy.verifyTLS {
            results.append(haul_easy_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, 0))
            results.append(haul_easy_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, 0))
        }
        results.append(haul_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(policy.connectTimeout * 1000)))
        results.append(haul_easy_setopt_long(easy, CURLOPT_TCP_KEEPALIVE, 1))
        // About 100 KiB per read matches the curl CLI's throughput; curl's 16 KiB default is up to 30% slower.
        results.append(haul_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, 100 * 1024))
        results.append(haul_easy_setopt_string(easy, CURLOPT_USERAGENT, policy.userAgent))
        // The bytes of the file as stored: a content coding would make sizes and ranges mean something else.
        headerList = curl_slist_append(headerList, "Accept-Encoding: identity")
        // A POST body goes with the request: curl would otherwise ask "Expect: 100-continue" for one over 1 KiB and
        // wait a second for a receiver that never answers it.
        if request.body != nil { headerList = curl_slist_append(headerList, "Expect:") }
        if request.method == .head {
            results.append(haul_easy_setopt_long(easy, CURLOPT_NOBODY, 1))
        }
        if let body = request.body {
            // The size first: COPYPOSTFIELDS copies that many bytes, NULs included.
            results.append(haul_easy_setopt_long(easy, CURLOPT_POSTFIELDSIZE, body.count))
            results.append(body.withUnsafeBytes { haul_easy_setopt_ptr(easy, CURLOPT_COPYPOSTFIELDS,
                                                                       UnsafeMutableRawPointer(mutating: $0.baseAddress)) })
        }
        if let timeout = policy.timeout {
            results.append(haul_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(timeout * 1000)))
        }
        if let range = request.range {
            let spec = range.end.map { "\(range.start)-\($0)" } ?? "\(range.start)-"
            results.append(haul_easy_setopt_string(easy, CURLOPT_RANGE, spec))
        }
        var fields = request.headers
        if let ifRange = request.ifRange { fields.append(("If-Range", ifRange)) }
        // Every header that reaches curl passes the field grammar here, whoever built the request: a CR or LF in a
        // value would end this request and start another one on the same connection.
        var tail = headerList
        for (name, value) in fields {
            guard let line = HTTPField.line(name: name, value: value) else { throw TransferError.invalidHeader(name) }
            // Appending to the last node keeps this linear; curl_slist_append walks the list it is given.
            let grown = curl_slist_append(tail, line)
            guard grown != nil else { throw TransferError.outOfMemory }
            tail = tail?.pointee.next ?? grown
            if headerList == nil { headerList = grown }
        }
        if let headerList {
            results.append(haul_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList))
        }
        results.append(haul_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, me))
        results.append(haul_easy_setopt_writefn(easy, CURLOPT_HEADERFUNCTION) { data, size, count, userdata in
            let this = Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue()
            let length = size * count
            this.headerLine(UnsafeRawBufferPointer(start: data, count: length))
            return length
        })
        results.append(haul_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, me))
        results.append(haul_easy_setopt_writefn(easy, CURLOPT_WRITEFUNCTION) { data, size, count, userdata in
            let this = Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue()
            let length = size * count
            switch this.body(UnsafeRawBufferPointer(start: data, count: length)) {
            case .consumed: return length
            case .pause: return Int(CURL_WRITEFUNC_PAUSE)
            case .abort: return 0
            }
        })
        if let failed = results.first(where: { $0 != CURLE_OK }) {
            throw TransferError.curl("curl_easy_setopt: \(String(cString: curl_easy_strerror(failed)))")
        }
    }

    func prepareToStart() {
        headerParser = HeaderParser()
    }

    // MARK: callbacks from curl

    private func headerLine(_ raw: UnsafeRawBufferPointer) {
        if headerParser.feed(raw) {
            response = TransferResponse(status: headerParser.status, headers: headerParser.headers,
                                        effectiveURL: effectiveURL())
        }
    }

    private func body(_ bytes: UnsafeRawBufferPointer) -> ChunkDecision {
        guard deliverResponse() else { return .abort }
        let decision = onData?(TransferChunk(bytes: bytes)) ?? .consumed
        switch decision {
        case .consumed: bodyBytes += Int64(bytes.count)
        case .abort: aborted = true
        case .pause: break
        }
        return decision
    }

    /// Continues a transfer held by `.pause`. Not from inside one of this transfer's callbacks; the held bytes
    /// may be offered to `onData` before this returns.
    public func resume() {
        // CURLPAUSE_CONT: 0, nothing held in either direction.
        curl_easy_pause(easy, 0)
    }

    /// Hands the final response to `onResponse` exactly once; false if it asked to abort.
    private func deliverResponse() -> Bool {
        if responseDelivered { return !aborted }
        responseDelivered = true
        let final = response ?? TransferResponse(status: responseCode(), headers: headerParser.headers,
                                                 effectiveURL: effectiveURL())
        response = final
        if let onResponse, !onResponse(final) {
            aborted = true
            return false
        }
        return true
    }

    private func responseCode() -> Int {
        var code = 0
        haul_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &code)
        return code
    }

    private func effectiveURL() -> String {
        var pointer: UnsafeMutablePointer<CChar>?
        haul_easy_getinfo_string(easy, CURLINFO_EFFECTIVE_URL, &pointer)
        return pointer.map { String(cString: $0) } ?? request.url
    }

    // MARK: completion (called by CurlMulti, outside curl's callbacks)

    /// curl's socket opener: the policy's check on the address about to be connected to.
    private func openSocket(_ address: UnsafeMutablePointer<curl_sockaddr>) -> curl_socket_t {
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
        if !responseDelivered, code == CURLE_OK || !unfollowed { _ = deliverResponse() }
        var failure: TransferFailure? = aborted ? .aborted : Transfer.classify(code)
        var message = String(cString: errorBuffer)
        if message.isEmpty, code != CURLE_OK { message = String(cString: curl_easy_strerror(code)) }
        if failure == .unsupportedScheme, !(300..<400).contains(headerParser.status) {
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
            message = "refused to connect to \(refusedAddress.address), a \(refusedAddress.reason) address"
        }
        onComplete?(TransferResult(failure: failure, message: message, response: response, bodyBytes: bodyBytes))
    }

    static func classify(_ code: CURLcode) -> TransferFailure? {
        switch code {
        case CURLE_OK: return nil
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: return .dns
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
