internal import CEvent
import FoundationEssentials
import Glibc

/// A WebSocket (RFC 6455) on a connection evhttp answered `101 Switching Protocols` on: libevent 2.1 has no
/// WebSocket server, so its bufferevent is taken over after the answer (our callbacks instead of evhttp's) and
/// the evhttp connection is freed, request and all, when the socket closes. Text messages come in through `onText`;
/// `send` writes one. A ping every 30 s finds dead peers; each message is at most 1 MiB. Confined to the loop.
public final class WebSocketConnection {
    private var connection: OpaquePointer?
    private var bufferEvent: OpaquePointer?
    private var frames = WebSocketFrames()
    private weak var server: HTTPServer?
    private let fd: Int32
    private var pingTimer: LoopTimer?
    /// Armed while a frame or message is partly read: a client has the server's request deadline to complete it,
    /// or the socket is closed (a client dribbling a 1 MiB message held that much for as long as it liked).
    private var messageTimer: LoopTimer?
    private let loop: EventLoop
    private let messageDeadline: Double
    /// Pings sent without a pong since.
    private var unanswered = 0
    /// Whether a close frame went out: nothing more is sent, the socket closes once it is written.
    private var closing = false
    /// Kept alive while libevent holds a pointer to it.
    private var selfReference: WebSocketConnection?
    public let peer: String
    /// A text message from the peer.
    public var onText: ((String) -> Void)?
    /// The connection ended (either side), once.
    public var onClose: (() -> Void)?
    /// Everything queued was written to the socket.
    var onWritten: (() -> Void)?

    init(connection: OpaquePointer, bufferEvent: OpaquePointer, server: HTTPServer?, loop: EventLoop, peer: String) {
        self.connection = connection
        self.bufferEvent = bufferEvent
        self.server = server
        self.peer = peer
        self.loop = loop
        messageDeadline = server?.connectionGuard.policy.requestDeadline ?? 60
        fd = bufferevent_getfd(bufferEvent)
        selfReference = self
        server?.webSockets[ObjectIdentifier(self)] = self
        if fd >= 0 { server?.connectionGuard.streaming(on: fd, true) }
        bufferevent_set_timeouts(bufferEvent, nil, nil)
        bufferevent_setcb(
            bufferEvent,
            { _, arg in
                Unmanaged<WebSocketConnection>.fromOpaque(arg!).takeUnretainedValue().readable()
            },
            { _, arg in
                Unmanaged<WebSocketConnection>.fromOpaque(arg!).takeUnretainedValue().written()
            },
            { _, events, arg in
                Unmanaged<WebSocketConnection>.fromOpaque(arg!).takeUnretainedValue().event(events)
            }, Unmanaged.passUnretained(self).toOpaque())
        bufferevent_enable(bufferEvent, Int16(EV_READ | EV_WRITE))
        pingTimer = LoopTimer(loop: loop, delay: 30, repeating: true) { [unowned self] in self.ping() }
        pingTimer?.start()
        // Bytes the client sent right after its request (a first message) are in the input buffer already.
        if evbuffer_get_length(bufferevent_get_input(bufferEvent)) > 0 { readable() }
    }

    public var isClosed: Bool { bufferEvent == nil }

    /// Sends a text message.
    public func send(_ text: String) { write(WebSocketFrames.frame(opcode: 0x1, Array(text.utf8))) }

    public func send(_ bytes: [UInt8]) { write(WebSocketFrames.frame(opcode: 0x1, bytes)) }

    /// Bytes queued for the peer and not yet written to the socket.
    public var queuedBytes: Int {
        guard let bufferEvent else { return 0 }
        return evbuffer_get_length(bufferevent_get_output(bufferEvent))
    }

    /// Sends a close frame with `code` and closes once it is written.
    public func close(code: UInt16 = 1000, reason: String = "") {
        guard bufferEvent != nil, !closing else { return }
        write(
            WebSocketFrames.frame(opcode: 0x8, [UInt8(code >> 8), UInt8(code & 0xFF)] + Array(reason.utf8.prefix(120))))
        closing = true
        if queuedBytes == 0 { finish() }
    }

    private func write(_ bytes: [UInt8]) {
        guard let bufferEvent, !closing else { return }
        bytes.withUnsafeBytes { _ = bufferevent_write(bufferEvent, $0.baseAddress, $0.count) }
    }

    private func readable() {
        guard let bufferEvent else { return }
        let input = bufferevent_get_input(bufferEvent)
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        while evbuffer_get_length(input) > 0, self.bufferEvent != nil {
            let count = chunk.withUnsafeMutableBytes { evbuffer_remove(input, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            let outputs = chunk.withUnsafeBytes { frames.feed(UnsafeRawBufferPointer(rebasing: $0[..<Int(count)])) }
            for output in outputs {
                guard self.bufferEvent != nil, !closing else { return }
                switch output {
                case .text(let text): onText?(text)
                case .binary:
                    // aria2's JSON-RPC is text; a binary message is not one of its calls.
                    close(code: 1003, reason: "binary messages are not accepted")
                case .ping(let payload): write(WebSocketFrames.frame(opcode: 0xA, payload))
                case .pong: unanswered = 0
                case .close(let code):
                    // Answer with the same code (none when it gave none), then close.
                    write(WebSocketFrames.frame(opcode: 0x8, code.map { [UInt8($0 >> 8), UInt8($0 & 0xFF)] } ?? []))
                    closing = true
                    if queuedBytes == 0 { finish() }
                case .fail(let code, let reason): close(code: code, reason: reason)
                }
            }
        }
        if frames.isIdle {
            messageTimer = nil
        } else if messageTimer == nil, self.bufferEvent != nil {
            messageTimer = LoopTimer(loop: loop, delay: messageDeadline) { [unowned self] in
                self.close(code: 1008, reason: "a message was not completed in time")
                // A client that reads nothing either is let go of a second later, close frame sent or not.
                self.messageTimer = LoopTimer(loop: self.loop, delay: 1) { [unowned self] in self.finish() }
                self.messageTimer?.start()
            }
            messageTimer?.start()
        }
    }

    private func written() {
        onWritten?()
        if closing, queuedBytes == 0 { finish() }
    }

    private func event(_ events: Int16) {
        // End of stream, an error or a timeout: the peer is gone.
        finish()
    }

    private func ping() {
        guard !closing else { return }
        unanswered += 1
        guard unanswered <= 2 else { return finish() }
        write(WebSocketFrames.frame(opcode: 0x9, []))
    }

    /// Frees the connection (its socket closes) and tells `onClose`, once.
    func finish() {
        guard let connection else { return }
        self.connection = nil
        bufferEvent = nil
        pingTimer = nil
        messageTimer = nil
        if fd >= 0 { server?.connectionGuard.streaming(on: fd, false) }
        server?.webSockets[ObjectIdentifier(self)] = nil
        // The request evhttp answered 101 to is still queued on the connection: freeing it frees both.
        evhttp_connection_free(connection)
        let onClose = self.onClose
        self.onClose = nil
        onText = nil
        onWritten = nil
        onClose?()
        selfReference = nil
    }
}
