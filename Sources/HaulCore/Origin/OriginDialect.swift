import HaulLoop

/// How Haul speaks to one family of origins (HTTP and HTTPS; FTP, FTPS and SFTP): the schemes it owns, how
/// a fetch the download machine asks for becomes a request, and how the origin's answers become the machine's
/// verdicts. The machine and the runner know only this seam; a new protocol is a new dialect, listed in `Origins`.
public protocol OriginDialect: Sendable {
    /// The URL schemes it owns, lower case.
    var schemes: [String] { get }

    /// The request that fetches `kind` of `url`, with the download's own request headers, under `policy`.
    func request(_ kind: FetchKind, url: String, headers: [HeaderField], policy: OutboundPolicy) -> TransferRequest

    /// The first answer of a download (`FetchKind.probe`): size, validators, name and whether ranges work, or why
    /// the answer cannot be used.
    func probe(_ response: TransferResponse) -> ProbeOutcome

    /// The answer to a ranged fetch, checked against the range asked for and the version of the file last seen
    /// (`total` bytes, strong validator `etag`, modification time `lastModified`), before a byte of it is written.
    func checkRange(
        _ response: TransferResponse, start: Int64, end: Int64?, total: Int64?, etag: String?,
        lastModified: String?
    ) -> RangeReply

    /// The validators an answer carries: a strong tag, and a modification time, either of which may go back to
    /// the origin to ask for the same version.
    func validators(_ response: TransferResponse) -> (etag: String?, lastModified: String?)

    /// The error a failed answer is (the origin said no: `status` is the dialect's own reply code).
    func error(status: Int, response: TransferResponse?) -> DownloadError
}

/// The dialects Haul speaks, and which one owns a URL.
public enum Origins {
    public static let all: [any OriginDialect] = [HTTPDialect(), FileTransferDialect()]

    /// Every scheme some dialect owns, in the order listed: what URLs may use and redirects may reach.
    public static let schemes: [String] = all.flatMap(\.schemes)

    /// The dialect owning `url`'s scheme; nil when none does (validation refuses such a URL before it is stored).
    public static func dialect(for url: String) -> (any OriginDialect)? {
        guard let colon = url.utf8.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        let scheme = String(url[..<colon])
        return all.first { dialect in dialect.schemes.contains { ASCII.equalsIgnoringCase($0, scheme) } }
    }

    /// The dialect of a URL already stored: validated when it was added, so one owns it; HTTP otherwise, whose
    /// transfer then fails with `unsupported_scheme` as curl refuses it.
    static func dialect(forStored url: String) -> any OriginDialect {
        dialect(for: url) ?? all[0]
    }
}

/// Where outbound transfers are built: a download's fetches through their dialect, webhook attempts as plain HTTP
/// POSTs, each under one policy made here from the engine's configuration.
enum Outbound {
    /// The policy of a download's transfers (its probe, segments and mirrors'), to `url` (the download's or a
    /// mirror's).
    static func policy(
        _ config: EngineConfig, for download: Download, category: Category?, url: String
    )
        -> OutboundPolicy
    {
        // Only the schemes of the URL's own dialect: curl is never asked to speak another to this source.
        var policy = OutboundPolicy(
            schemes: Origins.dialect(forStored: url).schemes,
            addressPolicy: config.addressPolicy,
            userAgent: download.userAgent ?? config.userAgent,
            connectTimeout: config.connectTimeout)
        policy.verifyTLS = !download.insecure
        policy.netrcFile = config.netrcFile
        policy.sshKey = config.sshKey
        policy.sshKnownHosts = config.sshKnownHosts
        policy.proxy = proxy(config, for: download, category: category, url: url)
        return policy
    }

    /// The proxy of a download's transfers to `url`: the download's own choice, else its category's, else the
    /// settings', else the environment's (`--proxy-from-env`). One the operator named (every level but the
    /// download's own, unless it names the same) is trusted past the address policy; see `OutboundPolicy.Proxy`.
    static func proxy(
        _ config: EngineConfig, for download: Download, category: Category?, url: String
    )
        -> OutboundPolicy.Proxy?
    {
        // The level that names one, and whether the operator named it: a scoped token's (PATCH /settings, a
        // category's, aria2's all-proxy) is held to the address policy as a download's own is, or a manage token
        // could name a proxy on loopback and reach what --deny-private-networks keeps out.
        let (operators, operatorsTrusted) =
            category?.proxy.map { ($0, category!.proxyTrusted) }
            ?? (config.proxy, config.proxyTrusted)
        switch download.proxy ?? operators {
        case .direct?: return nil
        case .through(let server)?:
            let trusted =
                download.proxy == nil
                ? operatorsTrusted
                : (download.proxy == operators && operatorsTrusted)
                    || (download.proxy == config.proxy && config.proxyTrusted)
            return OutboundPolicy.Proxy(server: server, bypass: config.noProxy, trusted: trusted)
        case nil:
            guard !config.environmentProxies.isEmpty else { return nil }
            let scheme = url.prefix { $0 != ":" }.lowercased()
            guard let server = config.environmentProxies[scheme] ?? config.environmentProxies["*"] else { return nil }
            return OutboundPolicy.Proxy(server: server, bypass: config.noProxy, trusted: true)
        }
    }

    /// The policy of a webhook attempt: HTTP only, a time limit, and no redirect (a receiver answers where it is:
    /// a redirect would turn the POST into a GET elsewhere).
    static func webhookPolicy(_ config: EngineConfig, timeout: Double) -> OutboundPolicy {
        var policy = OutboundPolicy(
            schemes: HTTPDialect().schemes, addressPolicy: config.addressPolicy,
            userAgent: "haul/\(HaulVersion.current) webhook",
            connectTimeout: min(config.connectTimeout, timeout), timeout: timeout,
            maxRedirects: 0)
        policy.proxy = config.webhookProxy.map { OutboundPolicy.Proxy(server: $0, trusted: true) }
        return policy
    }

    /// The request fetching `kind` of a download's source `url`, with what it carries to its origin: the
    /// credentials only to the download's own URL (a mirror is another host), the cookie jar to every source
    /// (cookies go by their own domains).
    static func fetch(
        _ kind: FetchKind, url: String, of download: Download, cookieJar: CookieJar?,
        policy: OutboundPolicy
    ) -> TransferRequest {
        var request = Origins.dialect(forStored: url).request(
            kind, url: url, headers: download.headers,
            policy: policy)
        if url == download.url, download.username != nil || download.password != nil {
            request.credentials = (download.username ?? "", download.password ?? "")
        }
        request.cookieJar = cookieJar
        request.referer = download.referer
        // The pin is the download's server's: a mirror elsewhere is checked against the known hosts.
        if url == download.url { request.hostKey = download.hostKey }
        return request
    }

    /// A POST of `body` to `url` with `headers`.
    static func post(
        _ url: String, body: [UInt8], headers: [(String, String)], policy: OutboundPolicy
    )
        -> TransferRequest
    {
        var request = TransferRequest(url: url, policy: policy)
        request.profile = HTTPDialect.profile
        request.body = body
        request.headers = headers
        return request
    }
}
