/// The rules every outbound connection obeys, whoever makes it (a download's segments and probes, a mirror's, a
/// webhook attempt): one value, set in one place per caller and applied to curl in one place (`Transfer`), so a
/// rule added here (a proxy, credentials) reaches every transfer at once instead of each caller's copy.
public struct OutboundPolicy: Sendable {
    /// Where connections go through. Only `none` for now; it is still set explicitly on every transfer, because
    /// left unset libcurl takes `http_proxy`, `https_proxy` and `all_proxy` from the server's environment.
    public enum Proxy: Sendable, Equatable {
        case none
    }

    /// The URL schemes curl may speak, for the first request and after every redirect: those of the origin
    /// dialects Haul knows (lower case).
    public var schemes: [String]
    /// When set, every address curl is about to connect to (after DNS, after each redirect) must pass it.
    public var addressPolicy: AddressPolicy?
    public var proxy: Proxy = .none
    /// Check the server's TLS certificate and name (off only when a download asks for it).
    public var verifyTLS = true
    public var userAgent: String
    public var connectTimeout: Double
    /// The whole transfer's time limit in seconds, nil for none (a download may take hours).
    public var timeout: Double?
    public var maxRedirects: Int

    public init(schemes: [String] = ["http", "https"], addressPolicy: AddressPolicy? = nil,
                userAgent: String = "haul/0.1", connectTimeout: Double = 30, timeout: Double? = nil,
                maxRedirects: Int = 10) {
        self.schemes = schemes
        self.addressPolicy = addressPolicy
        self.userAgent = userAgent
        self.connectTimeout = connectTimeout
        self.timeout = timeout
        self.maxRedirects = maxRedirects
    }
}
