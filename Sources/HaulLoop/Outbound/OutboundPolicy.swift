/// The rules every outbound connection obeys, whoever makes it (a download's segments and probes, a mirror's, a
/// webhook attempt): one value, set in one place per caller and applied to curl in one place (`Transfer`), so a
/// rule added here (a proxy, credentials) reaches every transfer at once instead of each caller's copy.
public struct OutboundPolicy: Sendable {
    /// The proxy transfers go through, and the hosts reached directly even so.
    public struct Proxy: Sendable, Equatable {
        public var server: ProxyServer
        public var bypass: NoProxy
        /// Named by the operator (a flag, the config file, the settings, a category): its own address is not held
        /// to the address policy. A proxy a download names for itself is, like any address it names.
        public var trusted: Bool

        public init(server: ProxyServer, bypass: NoProxy = NoProxy(), trusted: Bool) {
            self.server = server
            self.bypass = bypass
            self.trusted = trusted
        }
    }

    /// The URL schemes curl may speak, for the first request and after every redirect: those of the origin
    /// dialects Haul knows (lower case).
    public var schemes: [String]
    /// When set, every address curl is about to connect to (after DNS, after each redirect) must pass it.
    public var addressPolicy: AddressPolicy?
    /// nil: every connection goes directly to the origin. Either way the proxy is set on every transfer, because
    /// left unset libcurl takes `http_proxy`, `https_proxy` and `all_proxy` from the server's environment.
    public var proxy: Proxy?
    /// Check the server's TLS certificate and name (off only when a download asks for it).
    public var verifyTLS = true
    public var userAgent: String
    /// A .netrc file whose entries give origins credentials (`--netrc-file`), for requests that carry none.
    public var netrcFile: String?
    /// The private key SFTP logs in with (`--ssh-key`; its `.pub` beside it is used when there is one).
    public var sshKey: String?
    /// The OpenSSH known_hosts file SFTP servers' host keys are checked against (`--ssh-known-hosts`); with none,
    /// only a download's own `host_key` lets a server in.
    public var sshKnownHosts: String?
    public var connectTimeout: Double
    /// The whole transfer's time limit in seconds, nil for none (a download may take hours).
    public var timeout: Double?
    public var maxRedirects: Int

    public init(
        schemes: [String] = ["http", "https"], addressPolicy: AddressPolicy? = nil,
        userAgent: String = "haul/0.1", connectTimeout: Double = 30, timeout: Double? = nil,
        maxRedirects: Int = 10
    ) {
        self.schemes = schemes
        self.addressPolicy = addressPolicy
        self.userAgent = userAgent
        self.connectTimeout = connectTimeout
        self.timeout = timeout
        self.maxRedirects = maxRedirects
    }

    /// The proxy a request to `host` goes through: nil when there is none or the host is on its no-proxy list.
    public func proxy(forHost host: String) -> ProxyServer? {
        guard let proxy, !proxy.bypass.covers(host) else { return nil }
        return proxy.server
    }

    /// Whether redirects are followed by Haul, one hop at a time, instead of by curl: through a proxy under the
    /// address policy, where curl's socket opener only ever sees the proxy's address, each hop's origin is
    /// checked before the request for it goes out.
    public var checksEachHop: Bool { addressPolicy != nil && proxy != nil }
}
