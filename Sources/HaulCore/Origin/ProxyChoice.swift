import HaulLoop

/// Where a download's connections go, as a download, a category or the settings name it: directly (`"none"`), or
/// through a proxy. A level that names nothing leaves it to the next: the download's, else its category's, else the
/// settings' (`--proxy`), else, with `--proxy-from-env`, the environment's proxy for the URL's scheme.
public enum ProxyChoice: Sendable, Equatable {
    case direct
    case through(ProxyServer)

    /// `"none"` or a proxy URL, or what is wrong with it.
    public static func parse(_ text: String) -> Result<ProxyChoice, ProxyProblem> {
        if ASCII.equalsIgnoringCase(text, "none") { return .success(.direct) }
        return ProxyServer.parse(text).map { .through($0) }
    }

    /// As the store keeps it: `"none"` or the URL, its password included (the store holds secrets, as it holds a
    /// download's headers).
    public var stored: String {
        switch self {
        case .direct: return "none"
        case .through(let server): return server.url
        }
    }

    /// As it is shown: `"none"` or the URL with its password as `***`.
    public var shown: String {
        switch self {
        case .direct: return "none"
        case .through(let server): return server.shown
        }
    }

    /// The choice a stored text holds; nil for none or one no longer readable.
    static func stored(_ text: String?) -> ProxyChoice? {
        guard let text, case .success(let choice) = parse(text) else { return nil }
        return choice
    }
}
