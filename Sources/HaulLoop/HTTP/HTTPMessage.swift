/// An HTTP request as the server received it: plain values, no transport attached, so routers and handlers can be
/// exercised in tests without a socket.
public struct HTTPRequest: Sendable {
    public var method: String
    /// The request target as sent: path and query, still percent-encoded.
    public var target: String
    /// Header names as sent; look them up with `header(_:)`.
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// The client's address (no port), for per-client limits.
    public var peer: String
    /// The HTTP version as major * 10 + minor: 11 for HTTP/1.1, 10 for HTTP/1.0.
    public var version: Int

    public init(
        method: String, target: String, headers: [(name: String, value: String)] = [], body: [UInt8] = [],
        peer: String = "", version: Int = 11
    ) {
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
        self.peer = peer
        self.version = version
    }

    /// Every value of header `name`, compared case-insensitively, in the order received.
    public func headerValues(_ name: String) -> [String] {
        headers.filter { ASCII.equalsIgnoringCase($0.name, name) }.map(\.value)
    }

    /// The first value of header `name`, compared case-insensitively.
    public func header(_ name: String) -> String? {
        headers.first(where: { ASCII.equalsIgnoringCase($0.name, name) })?.value
    }

    /// The path without the query, percent-decoded.
    public var path: String {
        let raw = target.firstIndex(of: "?").map { target[..<$0] } ?? target[...]
        return PercentEncoding.decode(raw) ?? String(raw)
    }

    /// The query parameters, percent-decoded (`+` as space); the last one wins for repeated names (the router
    /// refuses those: see `queryPairs`).
    public var query: [String: String] {
        var result: [String: String] = [:]
        for (name, value) in queryPairs { result[name] = value }
        return result
    }

    /// Every query parameter in order, percent-decoded (`+` as space), repeats included.
    public var queryPairs: [(name: String, value: String)] {
        guard let mark = target.firstIndex(of: "?"), target.index(after: mark) < target.endIndex else { return [] }
        var result: [(name: String, value: String)] = []
        for pair in target[target.index(after: mark)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ s: Substring) -> String {
                let spaced = s.replacing("+", with: " ")
                return PercentEncoding.decode(spaced) ?? String(spaced)
            }
            result.append((decode(parts[0]), parts.count > 1 ? decode(parts[1]) : ""))
        }
        return result
    }
}

/// A complete HTTP response.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// A body read from a file instead (`body` is then empty): `length` bytes from `offset`, sent by the kernel.
    public var file: (file: OpenFile, offset: Int64, length: Int64)?

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? {
        headers.first(where: { ASCII.equalsIgnoringCase($0.name, name) })?.value
    }

    /// This response with `extra` headers appended.
    public func adding(_ extra: [(name: String, value: String)]) -> HTTPResponse {
        guard !extra.isEmpty else { return self }
        var copy = self
        copy.headers += extra
        return copy
    }
}
