/// An exchange whose connection a loop of its own holds (the API's, `io`), answered from the engine's loop
/// (`home`): each call is posted to `io` in order and runs there on the `HTTPExchange`; what the connection tells
/// (the client closed a stream, a stream's bytes were written) is posted back to `home`. Confined to `home` once
/// handed over; `local` is touched only on `io`.
public final class ForwardedExchange: ServerExchange, @unchecked Sendable {
    public let message: HTTPRequest
    public let receivedAt: Double
    public var onClose: (() -> Void)?
    public private(set) var isClosed = false
    private let local: LoopBound<HTTPExchange>
    /// The connection's loop and the answering one, by their inboxes: work posted to a loop that has stopped is
    /// let go with it, and holds neither loop alive.
    private let io: Inbox
    private let home: Inbox
    /// A stream's bytes not yet written (made by `startStream`: a plain answer needs none).
    private var gauge: SendGauge?
    /// Sends so far, and the `drained` waiting for send number `after` (and all before it) to be written.
    private var sends = 0
    private var drained: (after: Int, callback: () -> Void)?

    init(_ exchange: HTTPExchange, io: EventLoop, home: EventLoop) {
        message = exchange.message
        receivedAt = exchange.receivedAt
        local = LoopBound(exchange)
        self.io = io.inbox
        self.home = home.inbox
    }

    public var queuedBytes: Int { isClosed ? 0 : gauge?.total ?? 0 }

    public func respond(_ response: HTTPResponse) {
        guard !isClosed else { return }
        closeHere()
        let local = self.local
        io.append { local.value.respond(response) }
    }

    public func startStream(status: Int, headers: [(name: String, value: String)]) {
        guard !isClosed, gauge == nil else { return }
        gauge = SendGauge()
        let (local, home) = (self.local, self.home)
        io.append {
            local.value.startStream(status: status, headers: headers)
            local.value.onClose = { home.append { self.clientClosed() } }
        }
    }

    public func send(_ bytes: [UInt8], drained: (() -> Void)?) {
        guard !isClosed, let gauge else { return }
        sends += 1
        let number = sends
        if let drained { self.drained = (number, drained) }
        gauge.posted(bytes.count)
        let (local, home) = (self.local, self.home)
        io.append {
            let exchange = local.value
            // Every send asks to hear when the socket has taken it: a later send replaces an earlier one's wait,
            // and the callback waiting here goes once the send it came with (or a later one) is written.
            exchange.send(bytes) { [unowned exchange] in
                gauge.buffered(exchange.queuedBytes)
                home.append { self.written(through: number) }
            }
            gauge.handedOver(bytes.count, buffered: exchange.queuedBytes)
        }
    }

    public func end() {
        guard !isClosed, gauge != nil else { return }
        closeHere()
        let local = self.local
        io.append {
            local.value.onClose = nil
            local.value.end()
        }
    }

    public func limitSendBuffer(_ bytes: Int32) {
        guard !isClosed else { return }
        let local = self.local
        io.append { local.value.limitSendBuffer(bytes) }
    }

    public func abort() {
        guard !isClosed else { return }
        let local = self.local
        io.append { local.value.abort() }
    }

    public func upgrade(headers: [(name: String, value: String)]) -> (any WebSocketEndpoint)? {
        guard !isClosed else { return nil }
        closeHere()
        let socket = ForwardedWebSocket(peer: message.peer, io: io, home: home)
        let (local, home) = (self.local, self.home)
        io.append {
            guard let connection = local.value.upgradeToWebSocket(headers: headers) else {
                return home.append { socket.peerClosed() }
            }
            socket.attach(connection)
        }
        return socket
    }

    private func closeHere() {
        isClosed = true
        onClose = nil
        drained = nil
    }

    private func written(through number: Int) {
        guard !isClosed, let waiting = drained, number >= waiting.after else { return }
        drained = nil
        waiting.callback()
    }

    private func clientClosed() {
        guard !isClosed else { return }
        let onClose = self.onClose
        closeHere()
        onClose?()
    }
}

/// A WebSocket whose connection the API's loop (`io`) holds, used from the engine's (`home`): messages out are
/// posted to `io`, messages in and the close are posted back. `connection` is set and touched only on `io`.
final class ForwardedWebSocket: WebSocketEndpoint, @unchecked Sendable {
    let peer: String
    var onText: ((String) -> Void)?
    var onClose: (() -> Void)?
    private(set) var isClosed = false
    private let io: Inbox
    private let home: Inbox
    private let gauge = SendGauge()
    private var connection: WebSocketConnection?

    init(peer: String, io: Inbox, home: Inbox) {
        self.peer = peer
        self.io = io
        self.home = home
    }

    /// On `io`: the socket evhttp's connection became.
    func attach(_ socket: WebSocketConnection) {
        connection = socket
        let (home, gauge) = (self.home, self.gauge)
        socket.onText = { text in home.append { self.received(text) } }
        socket.onWritten = { [unowned socket] in gauge.buffered(socket.queuedBytes) }
        socket.onClose = {
            self.connection = nil
            home.append { self.peerClosed() }
        }
    }

    var queuedBytes: Int { isClosed ? 0 : gauge.total }

    func send(_ bytes: [UInt8]) {
        guard !isClosed else { return }
        gauge.posted(bytes.count)
        let gauge = self.gauge
        io.append {
            self.connection?.send(bytes)
            gauge.handedOver(bytes.count, buffered: self.connection?.queuedBytes ?? 0)
        }
    }

    func close(code: UInt16, reason: String) {
        guard !isClosed else { return }
        io.append { self.connection?.close(code: code, reason: reason) }
    }

    private func received(_ text: String) {
        guard !isClosed else { return }
        onText?(text)
    }

    /// On `home`: the socket ended (either side), once.
    func peerClosed() {
        guard !isClosed else { return }
        isClosed = true
        onText = nil
        let onClose = self.onClose
        self.onClose = nil
        onClose?()
    }
}

/// What a forwarded stream has sent and the client's socket has not taken: bytes posted to the connection's loop
/// and not yet handed to evhttp, and what evhttp's buffer held when last looked at there (after each send and
/// each drain).
final class SendGauge: @unchecked Sendable {
    private let lock = Lock()
    private var inFlight = 0
    private var held = 0

    func posted(_ count: Int) { lock.withLock { inFlight += count } }

    func handedOver(_ count: Int, buffered: Int) {
        lock.withLock {
            inFlight -= count
            held = buffered
        }
    }

    func buffered(_ count: Int) { lock.withLock { held = count } }

    var total: Int { lock.withLock { inFlight + held } }
}
