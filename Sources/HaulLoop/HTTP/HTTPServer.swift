internal import CEvent
internal import CEventRequest
import FoundationEssentials
import Glibc

/// libevent's evhttp bound to the loop's `event_base`. Each request is handed to `handler` on the loop thread, as
/// an `HTTPExchange` to answer at once or to stream into.
public final class HTTPServer {
    let loop: EventLoop
    private var http: OpaquePointer?
    private let handler: (HTTPExchange) -> Void
    /// Exchanges streaming a reply, which `close` ends before it frees their connections.
    fileprivate(set) var streams: [ObjectIdentifier: HTTPExchange] = [:]
    let connectionGuard: ConnectionGuard
    /// WebSockets taken over from evhttp, which `close` frees before the server.
    var webSockets: [ObjectIdentifier: WebSocketConnection] = [:]

    /// `maxBodySize`: evhttp refuses bodies larger than this with its own 413 before they are read;
    /// `maxHeadersSize`: a request line and headers larger than this are refused the same way.
    /// `connections`: the per-client cap and the request deadline.
    public init(
        loop: EventLoop, maxBodySize: Int = 4 << 20, maxHeadersSize: Int = 32 << 10, timeout: Int32 = 60,
        connections: ConnectionPolicy = ConnectionPolicy(), handler: @escaping (HTTPExchange) -> Void
    ) throws {
        guard let http = evhttp_new(loop.base) else { throw LoopError.libevent("evhttp_new failed") }
        self.loop = loop
        self.http = http
        self.handler = handler
        connectionGuard = ConnectionGuard(loop: loop, policy: connections)
        evhttp_set_max_body_size(http, maxBodySize)
        evhttp_set_max_headers_size(http, maxHeadersSize)
        evhttp_set_timeout(http, timeout)
        // Without this evhttp answers 501 to PATCH and OPTIONS itself.
        let methods =
            EVHTTP_REQ_GET.rawValue | EVHTTP_REQ_POST.rawValue | EVHTTP_REQ_HEAD.rawValue
            | EVHTTP_REQ_PUT.rawValue | EVHTTP_REQ_DELETE.rawValue | EVHTTP_REQ_OPTIONS.rawValue
            | EVHTTP_REQ_PATCH.rawValue | EVHTTP_REQ_TRACE.rawValue | EVHTTP_REQ_CONNECT.rawValue
        evhttp_set_allowed_methods(http, UInt16(methods))
        // Client connections get the API priority, so a busy transfer never starves a REST request.
        evhttp_set_bevcb(
            http,
            { base, arg in
                let bufferEvent = bufferevent_socket_new(base, -1, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue))
                if let bufferEvent {
                    bufferevent_priority_set(bufferEvent, EventLoop.Priority.api.rawValue)
                    Unmanaged<HTTPServer>.fromOpaque(arg!).takeUnretainedValue().connectionGuard.opened(bufferEvent)
                }
                return bufferEvent
            }, Unmanaged.passUnretained(self).toOpaque())
        evhttp_set_gencb(
            http,
            { request, arg in
                guard let request, let arg else { return }
                Unmanaged<HTTPServer>.fromOpaque(arg).takeUnretainedValue().accept(request)
            }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// A server on `loop` whose requests are handled on `home`'s thread: there as they are when the loops are one,
    /// else each through a `ForwardedExchange` posted to `home` (the API's loop reads and writes the connections,
    /// the engine's answers), unless `answeredHere`, asked on `loop` first, answers it there (with the request and
    /// the uptime it arrived at).
    public convenience init(
        loop: EventLoop, handledOn home: EventLoop, timeout: Int32 = 60,
        connections: ConnectionPolicy = ConnectionPolicy(),
        answeredHere: ((HTTPRequest, Double) -> HTTPResponse?)? = nil,
        handler: @escaping (any ServerExchange) -> Void
    ) throws {
        if home === loop {
            try self.init(loop: loop, timeout: timeout, connections: connections) { handler($0) }
            return
        }
        let handler = LoopBound(handler)
        try self.init(loop: loop, timeout: timeout, connections: connections) { exchange in
            if let answeredHere, let response = answeredHere(exchange.message, exchange.receivedAt) {
                return exchange.respond(response)
            }
            let forwarded = ForwardedExchange(exchange, io: loop, home: home)
            home.post { handler.value(forwarded) }
        }
    }

    deinit { close() }

    /// Ends every open stream, then closes the listening sockets and every connection. Call it while the loop
    /// still exists (at shutdown, after `run` returns): a stream's close callback must not fire from inside
    /// `evhttp_free`, which would end a request evhttp is freeing.
    public func close() {
        guard let http else { return }
        for exchange in streams.values { exchange.end() }
        streams.removeAll()
        for socket in webSockets.values { socket.finish() }
        webSockets.removeAll()
        evhttp_free(http)
        self.http = nil
    }

    /// Listens on `host:port` (port 0 picks a free one) and returns the port actually bound.
    public func bind(host: String, port: UInt16) throws -> UInt16 {
        guard let http, let handle = evhttp_bind_socket_with_handle(http, host, port) else {
            throw LoopError.system("bind \(host):\(port)", errno)
        }
        let fd = evhttp_bound_socket_get_fd(handle)
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard ok == 0 else { throw LoopError.system("getsockname", errno) }
        let family = storage.ss_family
        let bigEndianPort = withUnsafePointer(to: &storage) { pointer -> UInt16 in
            if family == sa_family_t(AF_INET6) {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_port }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_port }
        }
        return UInt16(bigEndian: bigEndianPort)
    }

    private func accept(_ request: OpaquePointer) {
        loop.assertInLoop()
        let exchange = HTTPExchange(request: request, server: self)
        if let fd = exchange.socketFD { connectionGuard.requestArrived(on: fd) }
        handler(exchange)
    }
}

/// One request being answered. Either `respond(_:)` once, or `startStream`, any number of `send`, then `end`.
/// Once the client has gone (`isClosed`), every call is a no-op.
public final class HTTPExchange {
    private var request: OpaquePointer?
    public let message: HTTPRequest
    /// Called once if the client disconnects while a stream is open.
    public var onClose: (() -> Void)?
    private var streaming = false
    private var drained: (() -> Void)?
    /// Keeps the exchange alive while libevent holds a pointer to it (close and drain callbacks).
    private var selfReference: HTTPExchange? {
        didSet {
            let streaming = selfReference != nil
            server?.streams[ObjectIdentifier(self)] = streaming ? self : nil
            if let fd = socketFD { server?.connectionGuard.streaming(on: fd, streaming) }
        }
    }
    private weak var server: HTTPServer?
    /// The uptime when this exchange began, before the request was copied out of evhttp: a request's log line
    /// measures from here.
    public let receivedAt = ProcessInfo.processInfo.systemUptime

    init(request: OpaquePointer, server: HTTPServer) {
        self.request = request
        self.server = server
        self.message = HTTPExchange.read(request)
    }

    public var isClosed: Bool { request == nil }

    public func respond(_ response: HTTPResponse) {
        guard let request else { return }
        setHeaders(response.headers, on: request)
        if HTTPExchange.leavesBodyUnread(message) {
            // evhttp reads bodies only for POST, PUT and PATCH: the body of any other request would be parsed as
            // the next request on this connection. Closing it after the answer drops those bytes.
            evhttp_add_header(evhttp_request_get_output_headers(request), "Connection", "close")
        }
        let buffer = evbuffer_new()
        if let part = response.file {
            if message.method == "HEAD" {
                // evhttp sends no body for HEAD and would count an empty one: the length is told here.
                evhttp_add_header(evhttp_request_get_output_headers(request), "Content-Length", String(part.length))
            } else {
                // libevent owns the descriptor from here (closed with the buffer) and sends it with sendfile.
                let descriptor = part.file.take()
                if evbuffer_add_file(buffer, descriptor, part.offset, part.length) != 0 { close(descriptor) }
            }
        } else {
            response.body.withUnsafeBytes { _ = evbuffer_add(buffer, $0.baseAddress, $0.count) }
        }
        evhttp_send_reply(request, Int32(response.status), HTTPExchange.reason(response.status), buffer)
        evbuffer_free(buffer)
        self.request = nil
        onClose = nil
    }

    /// Sends the status and headers now; the body follows with `send`. Without a Content-Length header an
    /// HTTP/1.1 client gets a chunked body.
    public func startStream(status: Int, headers: [(name: String, value: String)]) {
        guard let request else { return }
        setHeaders(headers, on: request)
        streaming = true
        selfReference = self
        if let connection = evhttp_request_get_connection(request) {
            evhttp_connection_set_closecb(
                connection,
                { _, arg in
                    Unmanaged<HTTPExchange>.fromOpaque(arg!).takeUnretainedValue().clientClosed()
                }, Unmanaged.passUnretained(self).toOpaque())
        }
        evhttp_send_reply_start(request, Int32(status), HTTPExchange.reason(status))
    }

    /// Answers `101 Switching Protocols` with `headers` (the handshake's) and hands the connection over to a
    /// WebSocket; nil when the client has gone.
    public func upgradeToWebSocket(headers: [(name: String, value: String)]) -> WebSocketConnection? {
        guard let request, let server, let connection = evhttp_request_get_connection(request),
            let bufferEvent = evhttp_connection_get_bufferevent(connection)
        else { return nil }
        setHeaders(headers, on: request)
        evhttp_connection_set_closecb(connection, nil, nil)
        // A 101 has no body: evhttp writes the status line and headers, with no chunked encoding.
        evhttp_send_reply_start(request, 101, "Switching Protocols")
        self.request = nil
        return WebSocketConnection(
            connection: connection, bufferEvent: bufferEvent, server: server,
            loop: server.loop, peer: message.peer)
    }

    /// Queues `bytes`. `drained` runs once everything queued so far has been handed to the kernel (use it for
    /// flow control); a later `send` with its own `drained` replaces an earlier one still pending.
    public func send(_ bytes: UnsafeRawBufferPointer, drained: (() -> Void)? = nil) {
        guard let request, streaming else { return }
        let buffer = evbuffer_new()
        _ = evbuffer_add(buffer, bytes.baseAddress, bytes.count)
        if let drained {
            self.drained = drained
            evhttp_send_reply_chunk_with_cb(
                request, buffer,
                { _, arg in
                    Unmanaged<HTTPExchange>.fromOpaque(arg!).takeUnretainedValue().chunkDrained()
                }, Unmanaged.passUnretained(self).toOpaque())
        } else {
            evhttp_send_reply_chunk(request, buffer)
        }
        evbuffer_free(buffer)
    }

    public func send(_ bytes: [UInt8], drained: (() -> Void)? = nil) {
        bytes.withUnsafeBytes { send($0, drained: drained) }
    }

    /// Finishes the stream. With `closeConnection` the connection is closed too, so a body shorter than its
    /// Content-Length reaches the client as a cut-off transfer.
    public func end() {
        guard let request, streaming else { return }
        if let connection = evhttp_request_get_connection(request) {
            evhttp_connection_set_closecb(connection, nil, nil)
        }
        // While the socket is still known: its request deadline runs again.
        selfReference = nil
        evhttp_send_reply_end(request)
        self.request = nil
        drained = nil
        // Ended, it closes for no one: what `onClose` holds (a forwarded exchange holds this one) is let go.
        onClose = nil
    }

    /// Bytes queued for this client and not yet written to its socket.
    public var queuedBytes: Int {
        guard let request, let connection = evhttp_request_get_connection(request),
            let bufferEvent = evhttp_connection_get_bufferevent(connection)
        else { return 0 }
        return evbuffer_get_length(bufferevent_get_output(bufferEvent))
    }

    /// Caps the kernel's send buffer for this connection, so a client that stops reading makes our own queue
    /// (`queuedBytes`) grow soon, where we can see and bound it, instead of megabytes of socket memory.
    public func limitSendBuffer(_ bytes: Int32) {
        guard let fd = socketFD else { return }
        var size = bytes
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Closes the connection at once; `onClose` follows when libevent notices.
    public func abort() {
        guard let fd = socketFD else { return }
        shutdown(fd, Int32(SHUT_RDWR))
    }

    fileprivate var socketFD: Int32? {
        guard let request, let connection = evhttp_request_get_connection(request),
            let bufferEvent = evhttp_connection_get_bufferevent(connection)
        else { return nil }
        let fd = bufferevent_getfd(bufferEvent)
        return fd >= 0 ? fd : nil
    }

    private func chunkDrained() {
        let drained = self.drained
        self.drained = nil
        drained?()
    }

    private func clientClosed() {
        guard let request else { return }
        // evhttp has detached the unfinished request from the dead connection; ending it frees it.
        self.request = nil
        evhttp_send_reply_end(request)
        drained = nil
        let onClose = self.onClose
        self.onClose = nil
        selfReference = nil
        onClose?()
    }

    private func setHeaders(_ headers: [(name: String, value: String)], on request: OpaquePointer) {
        let output = evhttp_request_get_output_headers(request)
        for (name, value) in headers { evhttp_add_header(output, name, value) }
    }

    private static func read(_ request: OpaquePointer) -> HTTPRequest {
        let method: String
        switch evhttp_request_get_command(request) {
        case EVHTTP_REQ_GET: method = "GET"
        case EVHTTP_REQ_POST: method = "POST"
        case EVHTTP_REQ_HEAD: method = "HEAD"
        case EVHTTP_REQ_PUT: method = "PUT"
        case EVHTTP_REQ_DELETE: method = "DELETE"
        case EVHTTP_REQ_OPTIONS: method = "OPTIONS"
        case EVHTTP_REQ_PATCH: method = "PATCH"
        case EVHTTP_REQ_TRACE: method = "TRACE"
        case EVHTTP_REQ_CONNECT: method = "CONNECT"
        default: method = "UNKNOWN"
        }
        let target = evhttp_request_get_uri(request).map { String(cString: $0) } ?? "/"
        var headers: [(name: String, value: String)] = []
        if let input = evhttp_request_get_input_headers(request) {
            var entry = input.pointee.tqh_first
            while let current = entry {
                headers.append((String(cString: current.pointee.key), String(cString: current.pointee.value)))
                entry = current.pointee.next.tqe_next
            }
        }
        var body: [UInt8] = []
        if let buffer = evhttp_request_get_input_buffer(request) {
            let length = evbuffer_get_length(buffer)
            if length > 0 {
                body = [UInt8](repeating: 0, count: length)
                body.withUnsafeMutableBytes { _ = evbuffer_remove(buffer, $0.baseAddress, length) }
            }
        }
        var peer = ""
        if let connection = evhttp_request_get_connection(request) {
            var address: UnsafeMutablePointer<CChar>?
            var port: UInt16 = 0
            evhttp_connection_get_peer(connection, &address, &port)
            if let address { peer = String(cString: address) }
        }
        return HTTPRequest(
            method: method, target: target, headers: headers, body: body, peer: peer,
            version: Int(haul_evhttp_request_version(request)))
    }

    /// Whether `request` announced a body that evhttp left on the connection.
    static func leavesBodyUnread(_ request: HTTPRequest) -> Bool {
        guard !["POST", "PUT", "PATCH"].contains(request.method) else { return false }
        if let length = request.header("Content-Length"), length != "0" { return true }
        return request.header("Transfer-Encoding") != nil
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 201: return "Created"
        case 204: return "No Content"
        case 206: return "Partial Content"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 304: return "Not Modified"
        case 307: return "Temporary Redirect"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 409: return "Conflict"
        case 413: return "Content Too Large"
        case 416: return "Range Not Satisfiable"
        case 422: return "Unprocessable Content"
        case 429: return "Too Many Requests"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 503: return "Service Unavailable"
        default: return "Status \(status)"
        }
    }
}
