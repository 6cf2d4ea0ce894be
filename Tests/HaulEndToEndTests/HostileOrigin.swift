import Foundation

/// An origin that answers with exact bytes, including what no well-behaved HTTP server would send (a lying
/// Content-Length, an endless body, headers beyond any limit, or nothing at all). Each connection is served on its
/// own thread: the request head is read, then `respond` decides what happens on the socket.
final class HostileOrigin: @unchecked Sendable {
    /// A received request: its first line, headers (lower-case names) and body (by Content-Length).
    struct Request {
        var line: String
        var headers: [String: String]
        var body: [UInt8] = []
        var method: String { String(line.split(separator: " ").first ?? "") }
        var path: String { String(line.split(separator: " ").dropFirst().first ?? "") }
    }

    /// What to do with one connection.
    enum Behaviour {
        /// Send these bytes, then close.
        case send([UInt8])
        /// Send these bytes, then `chunk` again and again until the client goes away.
        case sendForever([UInt8], chunk: [UInt8])
        /// Keep the connection open and say nothing until the client goes away.
        case silence
    }

    let port: UInt16
    var baseURL: String { "http://127.0.0.1:\(port)" }
    private let listener: Int32
    private let respond: @Sendable (Request) -> Behaviour
    private let lock = NSLock()
    private var received: [Request] = []
    private var stopped = false

    /// Listens on `port` of 127.0.0.1 (0: any free one; a given one lets a test bring a server back where it was).
    init(port wanted: UInt16 = 0, respond: @escaping @Sendable (Request) -> Behaviour) throws {
        self.respond = respond
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw HarnessError("socket: \(errno)") }
        self.listener = listener
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = wanted.bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(listener, pointer, length) == 0 && listen(listener, 64) == 0
                    && getsockname(listener, pointer, &length) == 0
            }
        }
        guard bound else { throw HarnessError("bind: \(errno)") }
        port = UInt16(bigEndian: address.sin_port)
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// Every request received so far.
    var requests: [Request] {
        lock.lock()
        defer { lock.unlock() }
        return received
    }

    /// Closes the listener once: a second close (deinit after an explicit stop) could close whatever socket has
    /// been given the same descriptor number since, such as the listener of the origin that replaced this one.
    func stop() {
        lock.lock()
        let wasStopped = stopped
        stopped = true
        lock.unlock()
        guard !wasStopped else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    deinit { stop() }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                lock.lock()
                let done = stopped
                lock.unlock()
                if done || errno == EBADF || errno == EINVAL { return }
                continue
            }
            Thread { [self] in serve(client) }.start()
        }
    }

    private func serve(_ client: Int32) {
        defer { close(client) }
        // Keep-alive: one connection may carry several requests (probe, then GET).
        while let request = readHead(client) {
            lock.lock()
            received.append(request)
            lock.unlock()
            switch respond(request) {
            case .send(let bytes):
                guard write(client, bytes) else { return }
                if bytes.isEmpty { return }
                // Whatever the reply claimed, the connection ends here unless it framed itself.
                if !HostileOrigin.keepsAlive(bytes) { return }
            case .sendForever(let head, let chunk):
                guard write(client, head) else { return }
                while write(client, chunk) {}
                return
            case .silence:
                var byte: UInt8 = 0
                while recv(client, &byte, 1, 0) > 0 {}
                return
            }
        }
    }

    /// Whether a canned reply says `Connection: keep-alive` (only those let a second request follow).
    private static func keepsAlive(_ bytes: [UInt8]) -> Bool {
        let head = String(decoding: bytes.prefix(4096), as: UTF8.self).lowercased()
        return head.contains("connection: keep-alive")
    }

    private func readHead(_ client: Int32) -> Request? {
        var data: [UInt8] = []
        var byte: UInt8 = 0
        while !data.ends(with: [13, 10, 13, 10]) {
            guard recv(client, &byte, 1, 0) == 1, data.count < 65536 else { return nil }
            data.append(byte)
        }
        let lines = String(decoding: data, as: UTF8.self).components(separatedBy: "\r\n").filter { !$0.isEmpty }
        guard let first = lines.first else { return nil }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...]
                .trimmingCharacters(in: .whitespaces)
        }
        var body: [UInt8] = []
        if let length = headers["content-length"].flatMap(Int.init), length > 0, length <= 1 << 20 {
            body = [UInt8](repeating: 0, count: length)
            var read = 0
            while read < length {
                let n = body.withUnsafeMutableBytes { recv(client, $0.baseAddress! + read, length - read, 0) }
                guard n > 0 else { return nil }
                read += n
            }
        }
        return Request(line: first, headers: headers, body: body)
    }

    private func write(_ client: Int32, _ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes {
                send(client, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            }
            if n <= 0 { return false }
            sent += n
        }
        return true
    }

    /// A response head and body as bytes.
    static func reply(_ status: String = "200 OK", headers: [String] = [], body: [UInt8] = []) -> [UInt8] {
        Array(("HTTP/1.1 \(status)\r\n" + headers.map { $0 + "\r\n" }.joined() + "\r\n").utf8) + body
    }
}

private extension Array where Element == UInt8 {
    func ends(with suffix: [UInt8]) -> Bool {
        count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
    }
}
