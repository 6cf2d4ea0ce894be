import HaulLoop

/// `HOST:PORT` as `--listen` and `HAUL_LISTEN` take it; an IPv6 host may be bracketed (`[::1]:8080`).
struct ListenAddress: Equatable {
    var host: String
    var port: UInt16

    init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            return nil
        }
        self.init(host: text[..<colon].trimming { $0 == "[" || $0 == "]" }, port: port)
    }

    /// Where a client on the same machine reaches a server listening here: a wildcard address on loopback. The
    /// client's default when only `HAUL_LISTEN` is set, so the container's HEALTHCHECK follows its port.
    var localURL: String {
        let target: String
        switch host {
        case "", "0.0.0.0": target = "127.0.0.1"
        case "::": target = "::1"
        default: target = host
        }
        return "http://" + (target.contains(":") ? "[\(target)]" : target) + ":\(port)"
    }
}
