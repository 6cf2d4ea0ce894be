internal import CCurl
import Glibc

/// One request on a curl easy handle, run by a `CurlMulti`: HTTP(S), FTP(S) or SFTP. Single use: make a new one per
/// attempt.
public final class Transfer {
    /// How a scheme's answers are read: HTTP's headers as they come; FTP's and SFTP's made into one of what curl
    /// reports once the data flows (size, modification time), so that a dialect reads every answer alike.
    enum Family { case http, ftp, sftp }

    let easy: UnsafeMutableRawPointer
    public let request: TransferRequest
    let family: Family
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
    private var digestChallenged = false
    /// The proxy this transfer's connection goes through, nil for direct.
    let proxy: ProxyServer?
    /// `host:port:address` entries curl resolves names by instead of asking DNS (the addresses the policy checked).
    private let pinned: [String]
    private var pinList: UnsafeMutablePointer<curl_slist>?
    /// The URL a redirect answer led to, in `checksEachHop` mode: its body is dropped and nothing is delivered.
    private var redirectTarget: String?

    private var headerList: UnsafeMutablePointer<curl_slist>?
    /// FTP commands sent before RETR (SIZE, REST): see `configureFTPSize`.
    private var commandList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
    private var headerParser = HeaderParser()
    private var replies = FileTransferReplies()
    private var response: TransferResponse?
    private var responseDelivered = false
    private var aborted = false
    /// What the SFTP host key check found when it refused the server: its fingerprint, and whether a key was known
    /// (or pinned) for it that is another.
    private var hostKeyRefusal: (fingerprint: String, mismatch: Bool)?
    /// The last address the policy refused, and why.
    private var refusedAddress: (address: String, reason: String)?
    public private(set) var bodyBytes: Int64 = 0

    /// `proxy` is the one the request's policy has for its host, worked out by the caller; `pinned` the addresses
    /// names resolve to, checked already.
    init(_ request: TransferRequest, proxy: ProxyServer?, pinned: [String] = []) throws {
        guard let easy = curl_easy_init() else { throw TransferError.curl("curl_easy_init failed") }
        self.easy = easy
        self.request = request
        family = Transfer.family(of: request.url)
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

    static func family(of url: String) -> Family {
        if ASCII.hasPrefixIgnoringCase(url, "ftp:") || ASCII.hasPrefixIgnoringCase(url, "ftps:") { return .ftp }
        if ASCII.hasPrefixIgnoringCase(url, "sftp:") { return .sftp }
        return .http
    }

    private func configure() throws {
        let me = Unmanaged.passUnretained(self).toOpaque()
        var results: [CURLcode] = []
        results.append(haul_easy_setopt_string(easy, CURLOPT_URL, curlURL))
        results.append(haul_easy_setopt_ptr(easy, CURLOPT_PRIVATE, me))
        results.append(haul_easy_setopt_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer))
        results.append(haul_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1))
        let policy = request.policy
        let schemes = policy.schemes.joined(separator: ",")
        results.append(haul_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, schemes))
        // An HTTP answer may redirect only to HTTP: an FTP server's answer is read otherwise (and FTP has none).
        let redirects = policy.schemes.filter { $0 == "http" || $0 == "https" }.joined(separator: ",")
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
            results.append(haul_easy_setopt_opensocketfn(easy) { clientp, _, address in
                guard let clientp, let address else { return CURL_SOCKET_BAD }
                let transfer = Unmanaged<Transfer>.fromOpaque(clientp).takeUnretainedValue()
                return transfer.openSocket(address)
            })
        }
        results.append(haul_easy_setopt_long(easy, CURLOPT_MAXREDIRS, policy.maxRedirects))
        if family != .http {
            // The file's modification time (MDTM, the SFTP stat), which with its size tells one version from another.
            results.append(haul_easy_setopt_long(easy, CURLOPT_FILETIME, 1))
        }
        if family == .sftp {
            // A password (from the URL or `password`) or the operator's key; never a key a client names.
            results.append(haul_easy_setopt_long(easy, CURLOPT_SSH_AUTH_TYPES, 1 | 2 | 8))
            if let key = policy.sshKey {
                results.append(haul_easy_setopt_string(easy, CURLOPT_SSH_PRIVATE_KEYFILE, key))
                if access(key + ".pub", R_OK) == 0 {
                    results.append(haul_easy_setopt_string(easy, CURLOPT_SSH_PUBLIC_KEYFILE, key + ".pub"))
                }
            }
            // The host key is always checked: against the known hosts (none: every key unknown) or the download's
            // pin, in the callback, which says which of the two failed.
            results.append(haul_easy_setopt_string(easy, CURLOPT_SSH_KNOWNHOSTS, policy.sshKnownHosts ?? "/dev/null"))
            if request.hostKey != nil {
                // The key is checked when a session is made: a pinned download makes its own (a session to the host
                // checked against the known hosts is no proof of the pin) and leaves it to no other download (whose
                // host key the pin proves nothing about).
                results.append(haul_easy_setopt_long(easy, CURLOPT_FRESH_CONNECT, 1))
                results.append(haul_easy_setopt_long(easy, CURLOPT_FORBID_REUSE, 1))
            }
            results.append(haul_easy_setopt_ptr(easy, CURLOPT_SSH_KEYDATA, me))
            results.append(haul_easy_setopt_sshkeyfn(easy) { _, known, found, match, clientp in
                guard let clientp, let found else { return Int32(CURLKHSTAT_REJECT.rawValue) }
                let transfer = Unmanaged<Transfer>.fromOpaque(clientp).takeUnretainedValue()
                return transfer.checkHostKey(found.pointee, known: known != nil, match: match)
            })
        }
        if family == .ftp {
            // Passive only (curl's default, no CURLOPT_FTPPORT), and the data connection goes to the control
            // connection's address, never to one a PASV reply names: a hostile server could point it at an internal
            // host, which the address policy would then be asked about instead of the server it trusted.
            results.append(haul_easy_setopt_long(easy, CURLOPT_FTP_SKIP_PASV_IP, 1))
            results.append(haul_easy_setopt_long(easy, CURLOPT_FTP_USE_EPSV, 1))
            // ftps:// but not on port 990: AUTH TLS on the control connection, required (explicit FTPS); on 990 TLS
            // from the first byte (implicit), as curl does for ftps:// itself. CURLUSESSL_ALL is 3.
            if explicitTLS {
                results.append(haul_easy_setopt_long(easy, CURLOPT_USE_SSL, 3))
                // AUTH TLS first (curl's default asks AUTH SSL first, an old name some servers refuse).
                results.append(haul_easy_setopt_long(easy, CURLOPT_FTPSSLAUTH, Int(CURLFTPAUTH_TLS.rawValue)))
            }
            if request.method != .head { results += try configureFTPSize() }
        }
        // A CONNECT's own answer is not the origin's: only the tunnelled response's headers are read.
        if proxy != nil { results.append(haul_easy_setopt_long(easy, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)) }
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
        if let referer = request.referer { results.append(haul_easy_setopt_string(easy, CURLOPT_REFERER, referer)) }
        if let credentials = request.credentials {
            // The origin's login: an HTTP server's, or an FTP or SFTP server's.
            results.append(haul_easy_setopt_string(easy, CURLOPT_USERNAME, credentials.user))
            results.append(haul_easy_setopt_string(easy, CURLOPT_PASSWORD, credentials.password))
            if family == .http {
                // Basic at once, as curl and aria2 send it (a server may answer 404 rather than 401 to a request
                // without); Digest when a 401 asked for it (CURLAUTH_BASIC 1, CURLAUTH_DIGEST 2: the macros are
                // casts Swift cannot import).
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
            let line = UnsafeRawBufferPointer(start: data, count: length)
            if this.family == .http { this.headerLine(line) } else { this.replies.feed(line) }
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

    /// curl stops reading an FTP file where SIZE said it ends: a server whose data runs past its size would leave a
    /// file cut short that looks whole. So curl is told to ignore the size (it then sends neither SIZE nor REST)
    /// and Haul sends both before RETR: SIZE allowed to fail (the size is then unknown), whose reply the replies
    /// read, and REST for a range. The body runs to where the server ends it (or the range's end), and the machine
    /// fails one longer than the size (`size_mismatch`), as it does an HTTP body past its Content-Length.
    private func configureFTPSize() throws -> [CURLcode] {
        // The file's name as curl takes it from the URL (its last segment, decoded, after a CWD to each folder).
        guard let path = URLParts(request.url)?.decodedPath, let slash = path.lastIndex(of: "/"),
              case let name = path[path.index(after: slash)...], !name.isEmpty,
              !name.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
            throw TransferError.curl("the URL names no file an FTP server could be asked for")
        }
        commandList = curl_slist_append(nil, "*SIZE \(name)")
        if let start = request.range?.start, start > 0 {
            commandList = curl_slist_append(commandList, "REST \(start)")
        }
        guard commandList != nil else { throw TransferError.outOfMemory }
        return [haul_easy_setopt_long(easy, CURLOPT_IGNORE_CONTENT_LENGTH, 1),
                haul_easy_setopt_slist(easy, CURLOPT_PREQUOTE, commandList)]
    }

    func prepareToStart() {
        headerParser = HeaderParser()
        replies = FileTransferReplies()
    }

    /// The SFTP server's host key: the download's pin when it has one, else the known hosts' verdict.
    private func checkHostKey(_ found: curl_khkey, known: Bool, match: curl_khmatch) -> Int32 {
        let raw: [UInt8]
        if found.len > 0, let key = found.key {
            raw = Array(UnsafeRawBufferPointer(start: key, count: found.len))
        } else {
            raw = found.key.flatMap { Base64.decode(String(cString: $0)) } ?? []
        }
        let fingerprint = SSHHostKey.fingerprint(raw)
        let accepted: Bool
        if let pin = request.hostKey {
            accepted = SSHHostKey.normalized(pin) == fingerprint
            if !accepted { hostKeyRefusal = (fingerprint, true) }
        } else {
            accepted = match == CURLKHMATCH_OK
            if !accepted { hostKeyRefusal = (fingerprint, match == CURLKHMATCH_MISMATCH) }
        }
        return Int32((accepted ? CURLKHSTAT_FINE : CURLKHSTAT_REJECT).rawValue)
    }

    /// An FTPS transfer: its multi runs it now and then whatever its sockets say (`CurlMulti.armSweep`).
    var needsSweeps: Bool { family == .ftp && ASCII.hasPrefixIgnoringCase(request.url, "ftps:") }

    /// ftps:// on a port other than 990: explicit FTPS, which curl speaks as ftp:// with AUTH TLS required.
    private var explicitTLS: Bool {
        family == .ftp && ASCII.hasPrefixIgnoringCase(request.url, "ftps:") && URLParts(request.url)?.givenPort != 990
    }

    /// The URL as curl is given it: explicit FTPS as ftp:// (its TLS set apart).
    private var curlURL: String {
        explicitTLS ? "ftp" + request.url.dropFirst(4) : request.url
    }

    /// An FTP or SFTP answer as a dialect reads HTTP's: 200 and the size for the whole file (or a request without a
    /// body), 206 and `Content-Range` for a range (its total from SIZE, or from where an open-ended range ends),
    /// `Last-Modified` from the file's modification time, `Accept-Ranges` when the size is known (a server that
    /// then refuses REST fails the range with `rangesRefused`).
    private func fileTransferResponse() -> TransferResponse {
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
            headers.append(("content-range", "bytes \(range.start)-\(last.map(String.init) ?? "*")/"
                            + (total.map(String.init) ?? "*")))
            if length >= 0 { headers.append(("content-length", String(length))) }
        } else if let total {
            headers.append(("content-length", String(total)))
        }
        return TransferResponse(status: status, headers: headers, effectiveURL: request.url)
    }

    // MARK: callbacks from curl

    private func headerLine(_ raw: UnsafeRawBufferPointer) {
        if headerParser.feed(raw) {
            var answer = TransferResponse(status: headerParser.status, headers: headerParser.headers,
                                          effectiveURL: effectiveURL())
            if let proxy, proxy.kind == .http || proxy.kind == .https {
                answer.proxyRefusedCredentials = answer.status == 407
                    || (answer.status == 401 && proxy.hasCredentials && answer.header("via") == nil)
            }
            // Credentials go only to the first URL's host: a 401 from another is that host's own.
            answer.sentCredentials = request.policy.netrcFile != nil
                || (request.credentials != nil && (answer.effectiveURL == request.url
                    || URLParts(answer.effectiveURL)?.host == URLParts(request.url)?.host))
            response = answer
        }
    }

    private func body(_ bytes: UnsafeRawBufferPointer) -> ChunkDecision {
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
    private func deliverResponse() -> Bool {
        if responseDelivered { return !aborted }
        responseDelivered = true
        let final = response ?? (family == .http
            ? TransferResponse(status: responseCode(), headers: headerParser.headers, effectiveURL: effectiveURL())
            : fileTransferResponse())
        response = final
        if final.status == 401, request.credentials != nil, !request.digestAuth, onDigestChallenge != nil,
           final.headers.contains(where: { $0.name == "www-authenticate" && ASCII.hasPrefixIgnoringCase($0.value, "digest") }) {
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
        // One hop at a time, a redirect is looked at here too (its target is this hop's answer).
        if !responseDelivered, code == CURLE_OK || !unfollowed || (request.policy.checksEachHop && response != nil) {
            _ = deliverResponse()
        }
        if redirectTarget != nil, !aborted, code == CURLE_OK || code == CURLE_PARTIAL_FILE {
            if digestChallenged, let onDigestChallenge { return onDigestChallenge() }
            if let redirectTarget, let onRedirect { return onRedirect(redirectTarget) }
        }
        var failure: TransferFailure? = aborted ? .aborted : Transfer.classify(code)
        var message = String(cString: errorBuffer)
        if message.isEmpty, code != CURLE_OK { message = String(cString: curl_easy_strerror(code)) }
        if family != .http, !aborted, code != CURLE_OK, let refusal = fileTransferFailure(code, message) {
            failure = refusal
            if replies.lastCode > 0 { message += " (the server said: \(replies.lastCode) \(replies.lastText))" }
        } else if family == .http, failure == .unsupportedScheme, !(300..<400).contains(headerParser.status) {
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
    private func fileTransferFailure(_ code: CURLcode, _ message: String) -> TransferFailure? {
        // 421: the server has no session to spare (too many from this address), whatever curl made of it. An SSH
        // server says so by closing the connection before its banner (sshd's MaxStartups, PerSourceMaxStartups).
        if replies.lastCode == 421 { return .tooManyConnections }
        if family == .sftp, code == CURLE_FAILED_INIT || code == CURLE_SSH, message.contains("getting banner") {
            return .tooManyConnections
        }
        if let refusal = hostKeyRefusal {
            return refusal.mismatch ? .hostKeyMismatch(fingerprint: refusal.fingerprint)
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
    private func proxyFailure(_ code: CURLcode) -> TransferFailure? {
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
