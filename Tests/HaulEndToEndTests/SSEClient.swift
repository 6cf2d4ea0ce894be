import Foundation

/// One parsed server-sent event.
struct SSEEvent: Equatable {
    var id: String?
    var event: String
    var data: String

    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(data.utf8))) as? [String: Any] ?? [:]
    }
}

/// A raw-socket event-stream client: HTTP/1.0 (so the body is the plain stream, not chunked), parsed as it
/// arrives. Reads only when asked, so a test can also make it stop reading.
final class SSEClient {
    let fd: Int32
    private var buffer = Data()
    private var headerDone = false
    private(set) var status = 0
    private(set) var events: [SSEEvent] = []
    private(set) var comments = 0
    private(set) var closed = false

    /// Connects and sends the request; `receiveBuffer` shrinks the socket's receive buffer first.
    init(port: UInt16, path: String, headers: [String: String] = [:], receiveBuffer: Int32? = nil) throws {
        fd = try connectToLoopback(port: port, receiveBuffer: receiveBuffer)
        var request = "GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        for (name, value) in headers { request += "\(name): \(value)\r\n" }
        request += "\r\n"
        _ = request.withCString { send(fd, $0, strlen($0), 0) }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    deinit { if !closed { close(fd) } }

    func disconnect() {
        guard !closed else { return }
        closed = true
        close(fd)
    }

    /// Reads what is available now, without blocking.
    func pump() {
        guard !closed else { return }
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &chunk, chunk.count, 0)
            if n > 0 {
                buffer.append(contentsOf: chunk[0..<n])
                continue
            }
            if n == 0 { closed = true; close(fd) }
            break
        }
        parse()
    }

    /// Reads until `condition` holds or `timeout` passes; true if it held.
    @discardableResult
    func read(timeout: TimeInterval = 30, until condition: (SSEClient) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            pump()
            if condition(self) { return true }
            if closed { return condition(self) }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&pfd, 1, 20)
        }
        return condition(self)
    }

    private func parse() {
        if !headerDone {
            guard let end = buffer.range(of: Data("\r\n\r\n".utf8)) else { return }
            let head = String(decoding: buffer[..<end.lowerBound], as: UTF8.self)
            status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
            buffer.removeSubrange(..<end.upperBound)
            headerDone = true
        }
        while let end = buffer.range(of: Data("\n\n".utf8)) {
            let block = String(decoding: buffer[..<end.lowerBound], as: UTF8.self)
            buffer.removeSubrange(..<end.upperBound)
            var event = SSEEvent(id: nil, event: "message", data: "")
            var isEvent = false
            var data: [Substring] = []
            for line in block.split(separator: "\n", omittingEmptySubsequences: false) {
                if line.hasPrefix(":") { comments += 1; continue }
                if line.hasPrefix("id: ") {
                    event.id = String(line.dropFirst(4)); isEvent = true
                } else if line.hasPrefix("event: ") {
                    event.event = String(line.dropFirst(7)); isEvent = true
                } else if line.hasPrefix("data: ") {
                    data.append(line.dropFirst(6)); isEvent = true
                }
            }
            // Several data lines make one payload, joined by line breaks (the SSE rules).
            event.data = data.joined(separator: "\n")
            if isEvent { events.append(event) }
        }
    }

    /// The first event of `kind` about download `id` in state `state` (when given).
    func has(_ kind: String, id: String? = nil, state: String? = nil) -> Bool {
        events.contains { e in
            e.event == kind && (id == nil || e.json["id"] as? String == id)
                && (state == nil || e.json["state"] as? String == state)
        }
    }
}

extension ServerProcess {
    var port: UInt16 { UInt16(baseURL.split(separator: ":").last ?? "0") ?? 0 }
    var pid: Int32 { process.processIdentifier }

    /// Resident memory now and at its peak, in KiB, from /proc.
    func memory() -> (rss: Int, peak: Int) {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        func field(_ name: String) -> Int {
            status.split(separator: "\n").first { $0.hasPrefix(name) }
                .flatMap { Int($0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") } ?? 0
        }
        return (field("VmRSS:"), field("VmHWM:"))
    }

    /// User plus system CPU seconds used so far.
    func cpuSeconds() -> Double {
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        guard let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        let ticks = (Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0)
        return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}
