internal import CCurl
import Glibc

/// One request on a curl easy handle, run by a `CurlMulti`, spoken as its request's `TransferProfile` says (the
/// settings of its kind of origin, how its answers and failures are read). Single use: make a new one per attempt.
public final class Transfer {
    let easy: UnsafeMutableRawPointer
    public let request: TransferRequest
    var profile: TransferProfile { request.profile }
    /// Called once, when the final response's headers are complete and before any body byte is passed on.
    /// Return false to abort the transfer (it then ends with `.aborted`).
    public var onResponse: ((TransferResponse) -> Bool)?
    /// Called with each piece of the body, in order.
    public var onData: ((TransferChunk) -> ChunkDecision)?
    /// Called once when the transfer ends, unless it was removed from its multi first.
    public var onComplete: ((TransferResult) -> Void)?
    /// Called instead of `onComplete` when the policy has Haul follow redirects (`checksEachHop`) and the answer
    /// was one: the absolute URL it leads to, whose request is then a new transfer.
    var onRedirect: ((String) -> Void)?
    /// Called instead of `onComplete` when the origin answered Basic credentials with a 401 asking for Digest:
    /// the request is made again with `digestAuth`.
    var onDigestChallenge: (() -> Void)?
    var digestChallenged = false
    /// The proxy this transfer's connection goes through, nil for direct.
    let proxy: ProxyServer?
    /// `host:port:address` entries curl resolves names by instead of asking DNS (the addresses the policy checked).
    let pinned: [String]
    var pinList: UnsafeMutablePointer<curl_slist>?
    /// The URL a redirect answer led to, in `checksEachHop` mode: its body is dropped and nothing is delivered.
    var redirectTarget: String?

    var headerList: UnsafeMutablePointer<curl_slist>?
    /// Commands sent before the transfer (SIZE, REST): see `TransferProfile.Setting.sizeAndOffsetCommands`.
    var commandList: UnsafeMutablePointer<curl_slist>?
    let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
    var headerParser = HeaderParser()
    var replies = FileTransferReplies()
    var response: TransferResponse?
    var responseDelivered = false
    var aborted = false
    /// What the SFTP host key check found when it refused the server: its fingerprint, and whether a key was known
    /// (or pinned) for it that is another.
    var hostKeyRefusal: (fingerprint: String, mismatch: Bool)?
    /// The last address the policy refused, and why.
    var refusedAddress: (address: String, reason: String)?
    public private(set) var bodyBytes: Int64 = 0

    /// `proxy` is the one the request's policy has for its host, worked out by the caller; `pinned` the addresses
    /// names resolve to, checked already.
    init(_ request: TransferRequest, proxy: ProxyServer?, pinned: [String] = []) throws {
        guard let easy = curl_easy_init() else { throw TransferError.curl("curl_easy_init failed") }
        self.easy = easy
        self.request = request
        self.proxy = proxy
        self.pinned = pinned
        errorBuffer.initialize(to: 0)
        try configure()
    }

    /// A transfer of `request` through the proxy its policy has for the URL's host.
    public convenience init(_ request: TransferRequest) throws {
        let host = request.policy.proxy == nil ? "" : URLParts(request.url)?.host ?? ""
        try self.init(request, proxy: request.policy.proxy(forHost: host))
    }

    deinit {
        curl_easy_cleanup(easy)
        if let headerList { curl_slist_free_all(headerList) }
        if let pinList { curl_slist_free_all(pinList) }
        if let commandList { curl_slist_free_all(commandList) }
        errorBuffer.deallocate()
    }

    func configure() throws {
        let me = Unmanaged.passUnretained(self).toOpaque()
        var results: [CURLcode] = []
        results.append(haul_easy_setopt_string(easy, CURLOPT_URL, profile.curlURL ?? request.url))
        results.append(haul_easy_setopt_ptr(easy, CURLOPT_PRIVATE, me))
        results.append(haul_easy_setopt_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer))
        results.append(haul_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1))
        let policy = request.policy
        let schemes = policy.schemes.joined(separator: ",")
        results.append(haul_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, schemes))
        // Only to the schemes an answer of this kind may lead to (an FTP server's has no redirects).
        let redirects = policy.schemes.filter(profile.redirects.contains).joined(separator: ",")
        if !redirects.isEmpty {
            results.append(haul_easy_setopt_string(easy, CURLOPT_REDIR_PROTOCOLS_STR, redirects))
        }
        results.append(haul_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, policy.checksEachHop ? 0 : 1))
        // The proxy is always named, and none means none: left unset, libcurl reads http_proxy, https_proxy and
        // all_proxy from the server's environment on its own, and the address guard would then check the proxy's
        // address instead of the origin's.
        if policy.checksEachHop {
            // One hop per transfer: the proxy of this hop's host, or none.
            results.append(haul_easy_setopt_string(easy, CURLOPT_PROXY, proxy?.url ?? ""))
        } else if let configured = policy.proxy {
            // curl follows the redirects and picks per hop by the same no-proxy list.
            results.append(haul_easy_setopt_string(easy, CURLOPT_PROXY, configured.server.url))
            results.append(haul_easy_setopt_string(easy, CURLOPT_NOPROXY, configured.bypass.curlList))
        } else {
            results.append(haul_easy_setopt_string(easy, CURLOPT_PROXY, ""))
        }
        for entry in pinned { pinList = curl_slist_append(pinList, entry) }
        if let pinList { results.append(haul_easy_setopt_slist(easy, CURLOPT_RESOLVE, pinList)) }
        // The address curl connects to is checked unless it is a proxy the operator named: the origin's own, or a
        // proxy a download named.
        if policy.addressPolicy != nil, proxy == nil || policy.proxy?.trusted != true {
            results.append(haul_easy_setopt_ptr(easy, CURLOPT_OPENSOCKETDATA, me))
            results.append(
                haul_easy_setopt_opensocketfn(easy) { clientp, _, address in
                    guard let clientp, let address else { return CURL_SOCKET_BAD }
                    let transfer = Unmanaged<Transfer>.fromOpaque(clientp).takeUnretainedValue()
                    return transfer.openSocket(address)
                })
        }
        results.append(haul_easy_setopt_long(easy, CURLOPT_MAXREDIRS, policy.maxRedirects))
        for setting in profile.settings { results += try apply(setting) }
        // A CONNECT's own answer is not the origin's: only the tunnelled response's headers are read.
        if proxy != nil { results.append(haul_easy_setopt_long(easy, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)) }
        if !policy.verifyTLS {
            results.append(haul_easy_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, 0))
            results.append(haul_easy_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, 0))
        }
        results.append(haul_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(policy.connectTimeout * 1000)))
        results.append(haul_easy_setopt_long(easy, CURLOPT_TCP_KEEPALIVE, 1))
        // About 100 KiB per read matches the curl CLI's throughput; curl's 16 KiB default is up to 30% slower.
        results.append(haul_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, 100 * 1024))
        results.append(haul_easy_setopt_string(easy, CURLOPT_USERAGENT, policy.userAgent))
        if let referer = request.referer { results.append(haul_easy_setopt_string(easy, CURLOPT_REFERER, referer)) }
        if let credentials = request.credentials {
            // The origin's login (as HTTP authentication, a file server's login or an SSH one).
            results.append(haul_easy_setopt_string(easy, CURLOPT_USERNAME, credentials.user))
            results.append(haul_easy_setopt_string(easy, CURLOPT_PASSWORD, credentials.password))
            if profile.has(.httpAuthentication) {
                // CURLAUTH_BASIC 1, CURLAUTH_DIGEST 2: the macros are casts Swift cannot import.
                results.append(haul_easy_setopt_long(easy, CURLOPT_HTTPAUTH, request.digestAuth ? 2 : 1))
            }
        } else if let netrc = policy.netrcFile {
            results.append(haul_easy_setopt_long(easy, CURLOPT_NETRC, Int(CURL_NETRC_OPTIONAL.rawValue)))
            results.append(haul_easy_setopt_string(easy, CURLOPT_NETRC_FILE, netrc))
            results.append(haul_easy_setopt_long(easy, CURLOPT_HTTPAUTH, 1 | 2))
        }
        if let jar = request.cookieJar {
            results.append(haul_easy_setopt_ptr(easy, CURLOPT_SHARE, jar.share))
            results.append(haul_easy_setopt_string(easy, CURLOPT_COOKIEFILE, ""))
        }
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
            results.append(
                body.withUnsafeBytes {
                    haul_easy_setopt_ptr(
                        easy, CURLOPT_COPYPOSTFIELDS,
                        UnsafeMutableRawPointer(mutating: $0.baseAddress))
                })
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
        results.append(
            haul_easy_setopt_writefn(easy, CURLOPT_HEADERFUNCTION) { data, size, count, userdata in
                let this = Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue()
                let length = size * count
                let line = UnsafeRawBufferPointer(start: data, count: length)
                if this.profile.answers == .headerLines { this.headerLine(line) } else { this.replies.feed(line) }
                return length
            })
        results.append(haul_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, me))
        results.append(
            haul_easy_setopt_writefn(easy, CURLOPT_WRITEFUNCTION) { data, size, count, userdata in
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
        replies = FileTransferReplies()
    }

    /// A transfer its multi runs now and then whatever its sockets say (`CurlMulti.armSweep`).
    var needsSweeps: Bool { profile.has(.sweeps) }

    /// An FTP or SFTP answer as a dialect reads HTTP's: 200 and the size for the whole file (or a request without a
    /// body), 206 and `Content-Range` for a range (its total from SIZE, or from where an open-ended range ends),
    /// `Last-Modified` from the file's modification time, `Accept-Ranges` when the size is known (a server that
    /// then refuses REST fails the range with `rangesRefused`).
    func fileTransferResponse() -> TransferResponse {
        var length: curl_off_t = -1
        haul_easy_getinfo_off_t(easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length)
        var modified: curl_off_t = -1
        haul_easy_getinfo_off_t(easy, CURLINFO_FILETIME_T, &modified)
        let made = replies.headers
        var total = replies.size
        if total == nil, request.method == .head {
            total = made.last { $0.name == "content-length" }.flatMap { Int64($0.value) }
        }
        if total == nil, request.method != .head, request.range?.end == nil, length >= 0 {
            total = (request.range?.start ?? 0) + Int64(length)
        }
        var headers: [(name: String, value: String)] = []
        if modified >= 0 {
            headers.append(("last-modified", HTTPDate.format(secondsSince1970: Int64(modified))))
        } else if let stated = made.last(where: { $0.name == "last-modified" }) {
            headers.append(stated)
        }
        if total != nil { headers.append(("accept-ranges", "bytes")) }
        var status = 200
        if let range = request.range, request.method != .head {
            status = 206
            let last = range.end ?? total.map { $0 - 1 }
            headers.append(
                (
                    "content-range",
                    "bytes \(range.start)-\(last.map(String.init) ?? "*")/"
                        + (total.map(String.init) ?? "*")
                ))
            if length >= 0 { headers.append(("content-length", String(length))) }
        } else if let total {
            headers.append(("content-length", String(total)))
        }
        return TransferResponse(status: status, headers: headers, effectiveURL: request.url)
    }

    // MARK: callbacks from curl

    func headerLine(_ raw: UnsafeRawBufferPointer) {
        if headerParser.feed(raw) {
            var answer = TransferResponse(
                status: headerParser.status, headers: headerParser.headers,
                effectiveURL: effectiveURL())
            if let proxy, proxy.speaksHTTP {
                answer.proxyRefusedCredentials =
                    answer.status == 407
                    || (answer.status == 401 && proxy.hasCredentials && answer.header("via") == nil)
            }
            // Credentials go only to the first URL's host: a 401 from another is that host's own.
            answer.sentCredentials =
                request.policy.netrcFile != nil
                || (request.credentials != nil
                    && (answer.effectiveURL == request.url
                        || URLParts(answer.effectiveURL)?.host == URLParts(request.url)?.host))
            response = answer
        }
    }

    func body(_ bytes: UnsafeRawBufferPointer) -> ChunkDecision {
        guard deliverResponse() else { return .abort }
        if redirectTarget != nil { return .consumed }
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
    func deliverResponse() -> Bool {
        if responseDelivered { return !aborted }
        responseDelivered = true
        let final =
            response
            ?? (profile.answers == .headerLines
                ? TransferResponse(status: responseCode(), headers: headerParser.headers, effectiveURL: effectiveURL())
                : fileTransferResponse())
        response = final
        if final.status == 401, request.credentials != nil, !request.digestAuth, onDigestChallenge != nil,
            final.headers.contains(where: {
                $0.name == "www-authenticate" && ASCII.hasPrefixIgnoringCase($0.value, "digest")
            })
        {
            digestChallenged = true
            redirectTarget = final.effectiveURL
            return true
        }
        if request.policy.checksEachHop, [301, 302, 303, 307, 308].contains(final.status) {
            var pointer: UnsafeMutablePointer<CChar>?
            haul_easy_getinfo_string(easy, CURLINFO_REDIRECT_URL, &pointer)
            if let pointer {
                redirectTarget = String(cString: pointer)
                return true
            }
        }
        if let onResponse, !onResponse(final) {
            aborted = true
            return false
        }
        return true
    }

    func responseCode() -> Int {
        var code = 0
        haul_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &code)
        return code
    }

    func effectiveURL() -> String {
        var pointer: UnsafeMutablePointer<CChar>?
        haul_easy_getinfo_string(easy, CURLINFO_EFFECTIVE_URL, &pointer)
        return pointer.map { String(cString: $0) } ?? request.url
    }
}
