/// One request being answered, as the API's handler sees it on its own thread: an `HTTPExchange` when the handler
/// runs on the loop holding the connection, a `ForwardedExchange` when the connection is held by a loop of its own
/// (`--threads` 2 or more) and the handler runs on the engine's. Either `respond(_:)` once, or `startStream`, any
/// number of `send`, then `end`; or `upgrade` to a WebSocket. Once the client has gone, every call is a no-op.
public protocol ServerExchange: AnyObject {
    var message: HTTPRequest { get }
    /// The uptime when the request arrived, before it was copied out of evhttp.
    var receivedAt: Double { get }
    var isClosed: Bool { get }
    /// Called once if the client disconnects while a stream is open.
    var onClose: (() -> Void)? { get set }
    /// Bytes sent on a stream and not yet written to the client's socket.
    var queuedBytes: Int { get }
    func respond(_ response: HTTPResponse)
    /// Sends the status and headers now; the body follows with `send`.
    func startStream(status: Int, headers: [(name: String, value: String)])
    /// Queues `bytes`; `drained` runs once everything queued so far has been written to the socket. A later
    /// `send` with its own `drained` replaces an earlier one still pending.
    func send(_ bytes: [UInt8], drained: (() -> Void)?)
    func end()
    /// Caps the kernel's send buffer for this connection, so a client that stops reading shows in `queuedBytes`.
    func limitSendBuffer(_ bytes: Int32)
    /// Closes the connection at once; `onClose` follows.
    func abort()
    /// Answers `101 Switching Protocols` with `headers` and hands the connection over to a WebSocket; nil when
    /// the client has gone.
    func upgrade(headers: [(name: String, value: String)]) -> (any WebSocketEndpoint)?
}

/// A WebSocket as the API sees it: text messages in through `onText`, out through `send`; `onClose` once it ends.
public protocol WebSocketEndpoint: AnyObject {
    var peer: String { get }
    var onText: ((String) -> Void)? { get set }
    var onClose: (() -> Void)? { get set }
    var isClosed: Bool { get }
    /// Bytes sent and not yet written to the socket.
    var queuedBytes: Int { get }
    /// Sends a text message.
    func send(_ bytes: [UInt8])
    /// Sends a close frame with `code` and closes once it is written.
    func close(code: UInt16, reason: String)
}

extension HTTPExchange: ServerExchange {
    public func upgrade(headers: [(name: String, value: String)]) -> (any WebSocketEndpoint)? {
        upgradeToWebSocket(headers: headers)
    }
}

extension WebSocketConnection: WebSocketEndpoint {}
