internal import CCurl
import Glibc

/// A URL's parts as libcurl reads them. Checks that decide where a transfer may go (the address guard, the
/// no-proxy list) read the URL with the parser curl itself uses, so the two can never disagree about its host.
public struct URLParts: Sendable, Equatable {
    /// Lower case.
    public var scheme: String
    /// Lower case; an IPv6 address without its brackets.
    public var host: String
    /// The port given, else the scheme's default (0 when curl knows none, as for socks5h).
    public var port: Int
    /// The port the URL names itself, nil for its scheme's default.
    public var givenPort: Int?
    /// The path, percent-decoded (nil when it decodes to something curl refuses, such as a NUL).
    public var decodedPath: String?

    public init?(_ url: String) {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, url, UInt32(CURLU_NON_SUPPORT_SCHEME)) == CURLUE_OK else {
            return nil
        }
        func part(_ what: CURLUPart, _ flags: Int32 = 0) -> String? {
            var pointer: UnsafeMutablePointer<CChar>?
            guard curl_url_get(handle, what, &pointer, UInt32(flags)) == CURLUE_OK, let pointer else { return nil }
            defer { curl_free(pointer) }
            return String(cString: pointer)
        }
        guard let scheme = part(CURLUPART_SCHEME), var host = part(CURLUPART_HOST), !host.isEmpty else {
            return nil
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        self.scheme = scheme.lowercased()
        self.host = host.lowercased()
        port = part(CURLUPART_PORT, CURLU_DEFAULT_PORT).flatMap { Int($0) } ?? 0
        givenPort = part(CURLUPART_PORT).flatMap { Int($0) }
        decodedPath = part(CURLUPART_PATH, CURLU_URLDECODE)
    }

    /// The host's address bytes (4 or 16) when the host is an IP literal.
    public var literalAddress: [UInt8]? { IPAddress.bytes(host) }
}

/// IP addresses as bytes, and names to addresses.
public enum IPAddress {
    /// The 4 or 16 bytes of a dotted IPv4 or a (bracketless) IPv6 address; nil for anything else.
    public static func bytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    /// The printed form of 4 or 16 address bytes.
    public static func text(_ bytes: [UInt8]) -> String {
        var printed = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        inet_ntop(bytes.count == 4 ? AF_INET : AF_INET6, bytes, &printed, socklen_t(printed.count))
        return printed.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// Every address `host` resolves to (getaddrinfo: it blocks, so never on the loop), or the resolver's words.
    public static func resolve(_ host: String) -> Result<[[UInt8]], ResolveError> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &list)
        guard status == 0 else { return .failure(ResolveError(message: String(cString: gai_strerror(status)))) }
        defer { freeaddrinfo(list) }
        var addresses: [[UInt8]] = []
        var next = list
        while let entry = next {
            if let address = entry.pointee.ai_addr {
                if entry.pointee.ai_family == AF_INET {
                    let v4 = UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in.self)
                    addresses.append(withUnsafeBytes(of: v4.sin_addr) { Array($0) })
                } else if entry.pointee.ai_family == AF_INET6 {
                    let v6 = UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in6.self)
                    addresses.append(withUnsafeBytes(of: v6.sin6_addr) { Array($0) })
                }
            }
            next = entry.pointee.ai_next
        }
        var seen = Set<[UInt8]>()
        return .success(addresses.filter { seen.insert($0).inserted })
    }

    public struct ResolveError: Error, Sendable {
        public let message: String
    }
}

/// A proxy server, as an operator or a client names it: `socks5h://alice:secret@proxy.lan:1080`.
public struct ProxyServer: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        /// HTTP to the proxy: absolute-form requests for http origins, CONNECT tunnels for https ones.
        case http
        /// The same over TLS to the proxy.
        case https
        /// SOCKS4: Haul resolves the origin's name and sends the address.
        case socks4
        /// SOCKS4a: the proxy resolves the name.
        case socks4a
        /// SOCKS5: Haul resolves the origin's name and sends the address.
        case socks5
        /// SOCKS5 with the name sent to the proxy, which resolves it.
        case socks5h
    }

    /// As given: what curl is handed (user information included).
    public let url: String
    public let kind: Kind
    /// Whether the proxy answers in HTTP (a CONNECT's reply): one that refuses credentials says 407.
    var speaksHTTP: Bool { kind == .http || kind == .https }
    /// The proxy's host, lower case, without IPv6 brackets.
    public let host: String

    /// Whether the URL carries credentials for the proxy.
    public var hasCredentials: Bool {
        url.split(separator: "/", maxSplits: 3).dropFirst().first?.contains("@") ?? false
    }

    /// Whether the proxy, not Haul, turns the origin's name into an address.
    public var resolvesNames: Bool { kind != .socks4 && kind != .socks5 }

    /// The URL with its password replaced by `***`: how it is shown anywhere (resource, settings, logs).
    public var shown: String { URLPassword.redacted(url) }

    /// The proxy `text` names, or what is wrong with it.
    public static func parse(_ text: String) -> Result<ProxyServer, ProxyProblem> {
        let schemes = Kind.allCases.map(\.rawValue).joined(separator: ", ")
        guard text.utf8.count <= 2048, !text.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F }) else {
            return .failure(ProxyProblem("must be a proxy URL without spaces or control characters"))
        }
        guard let separator = text.firstRange(of: "://"),
            let kind = Kind(rawValue: text[..<separator.lowerBound].lowercased())
        else {
            return .failure(ProxyProblem("must be a proxy URL of \(schemes), or \"none\""))
        }
        let rest = text[separator.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard rest.dropFirst(authority.count).allSatisfy({ $0 == "/" }) else {
            return .failure(ProxyProblem("must name only the proxy (scheme://[user:password@]host:port), no path"))
        }
        guard let parts = URLParts(text), !parts.host.isEmpty else {
            return .failure(ProxyProblem("must name the proxy's host"))
        }
        let written = authority.split(separator: "@").last.map(String.init) ?? ""
        if let colon = written.lastIndex(of: ":"), !written.hasSuffix("]") {
            let port = written[written.index(after: colon)...]
            guard let number = Int(port), (1...65535).contains(number) else {
                return .failure(ProxyProblem("the proxy's port must be from 1 to 65535"))
            }
        }
        return .success(ProxyServer(url: text, kind: kind, host: parts.host))
    }
}

public struct ProxyProblem: Error, Sendable, Equatable {
    public let message: String
    public init(_ message: String) { self.message = message }
}

/// Hosts reached directly even when a proxy is set (`--no-proxy`): `*` for all, a name that covers itself and
/// its subdomains (`example.com`, `.example.com`), an IP address, or a network (`10.0.0.0/8`, `fd00::/8`) that
/// covers the URLs written with an address in it (as curl reads its own no-proxy list: names are not resolved).
public struct NoProxy: Sendable, Equatable {
    enum Entry: Sendable, Equatable {
        case all
        case domain(String)
        case network([UInt8], Int)
    }

    var entries: [Entry] = []
    /// The entries as given, comma-separated: what curl's own no-proxy option takes (it reads networks since 7.86).
    public private(set) var curlList = ""

    public init() {}

    /// The list, or the first entry that is none of the above.
    public static func parse(_ list: [String]) -> Result<NoProxy, ProxyProblem> {
        var noProxy = NoProxy()
        for raw in list {
            let text = trimmed(raw).lowercased()
            if text.isEmpty { continue }
            noProxy.curlList += (noProxy.curlList.isEmpty ? "" : ",") + text
            if text == "*" {
                noProxy.entries.append(.all)
            } else if let network = AddressPolicy.network(
                text.hasPrefix("[")
                    ? String(text.dropFirst().dropLast())
                    : text)
            {
                noProxy.entries.append(.network(network.bytes, network.prefix))
            } else {
                var name = Substring(text)
                if name.hasPrefix("*.") {
                    name = name.dropFirst(2)
                } else if name.hasPrefix(".") {
                    name = name.dropFirst()
                }
                guard !name.isEmpty, name.utf8.allSatisfy({ ASCII.isLetterOrDigit($0) || "-._".utf8.contains($0) })
                else { return .failure(ProxyProblem("takes host names, IP addresses or networks, not '\(raw)'")) }
                noProxy.entries.append(.domain(String(name)))
            }
        }
        return .success(noProxy)
    }

    public var isEmpty: Bool { entries.isEmpty }

    /// Whether `host` (lower case, no brackets) is reached directly.
    public func covers(_ host: String) -> Bool {
        let address = IPAddress.bytes(host)
        return entries.contains { entry in
            switch entry {
            case .all: return true
            case .domain(let name): return host == name || host.hasSuffix("." + name)
            case .network(let bytes, let prefix):
                guard let address else { return false }
                return AddressPolicy.matches(address, bytes, prefix)
            }
        }
    }
}

/// `text` without the spaces and tabs around it.
private func trimmed(_ text: String) -> String {
    var view = Substring(text)
    while view.first == " " || view.first == "\t" { view = view.dropFirst() }
    while view.last == " " || view.last == "\t" { view = view.dropLast() }
    return String(view)
}

/// Passwords in URLs, as they are shown.
public enum URLPassword {
    /// `url` with the password of its user information replaced by `***` (a user name alone stays).
    public static func redacted(_ url: String) -> String {
        guard let separator = url.firstRange(of: "://") else { return url }
        let rest = url[separator.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard let at = authority.lastIndex(of: "@") else { return url }
        let userinfo = authority[..<at]
        guard let colon = userinfo.firstIndex(of: ":") else { return url }
        return String(url[..<separator.upperBound]) + userinfo[..<colon] + ":***"
            + url[at...]
    }
}
