import Foundation
import XCTest

/// A WebSocket client on a raw socket (RFC 6455 by hand): the frames a test sends, masked or not, and the ones the
/// server sends back, read one at a time.
final class WebSocketClient {
    let socket: RawSocket
    /// The handshake's status line (`HTTP/1.1 101 Switching Protocols`, or the refusal's).
    let status: String

    /// Opens `path` on the server at `port` with these extra header lines (`Origin: ...`).
    init(port: Int, path: String = "/jsonrpc", origin: String? = nil, headers: [String] = []) throws {
        socket = try RawSocket(port: UInt16(port))
        var request =
            "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        if let origin { request += "Origin: \(origin)\r\n" }
        for line in headers { request += line + "\r\n" }
        try socket.write(Array((request + "\r\n").utf8))
        let head = try socket.readHead()
        if head.hasPrefix("HTTP/1.1 101") {
            XCTAssertTrue(head.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), head)
        }
        status = head.components(separatedBy: "\r\n")[0]
    }

    var isOpen: Bool { status.hasPrefix("HTTP/1.1 101") }

    /// A client frame: masked with a fixed key.
    static func frame(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, masked: Bool = true) -> [UInt8] {
        var out: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        let mask: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        let bit: UInt8 = masked ? 0x80 : 0
        if payload.count < 126 {
            out.append(bit | UInt8(payload.count))
        } else if payload.count < 65536 {
            out += [bit | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            out.append(bit | 127)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((payload.count >> shift) & 0xFF)) }
        }
        guard masked else { return out + payload }
        return out + mask + payload.enumerated().map { $0.element ^ mask[$0.offset & 3] }
    }

    func write(_ bytes: [UInt8]) throws { try socket.write(bytes) }

    /// Sends a text message.
    func send(_ text: [UInt8]) throws { try socket.write(WebSocketClient.frame(0x1, text)) }

    /// Sends a JSON-RPC call (`token` first among its parameters when given).
    func call(_ method: String, _ params: [Any] = [], token: String? = nil, id: String? = nil) throws {
        let all: [Any] = (token.map { ["token:" + $0] } ?? []) + params
        try send(
            Array(
                try JSONSerialization.data(withJSONObject: [
                    "jsonrpc": "2.0", "id": id ?? method,
                    "method": method, "params": all,
                ])))
    }

    /// The next server frame: its opcode and payload.
    func read() throws -> (opcode: UInt8, payload: [UInt8]) { try WebSocketClient.readFrame(socket) }

    static func readFrame(_ socket: RawSocket) throws -> (opcode: UInt8, payload: [UInt8]) {
        let head = try socket.read(count: 2)
        var length = Int(head[1] & 0x7F)
        if length == 126 {
            let more = try socket.read(count: 2)
            length = Int(more[0]) << 8 | Int(more[1])
        } else if length == 127 {
            length = try socket.read(count: 8).reduce(0) { $0 << 8 | Int($1) }
        }
        XCTAssertEqual(head[1] & 0x80, 0, "a server's frames are not masked")
        return (head[0] & 0x0F, try socket.read(count: length))
    }

    /// The next text message as a JSON object (nil for a close frame or anything else).
    func readJSON() throws -> [String: Any]? {
        let frame = try read()
        guard frame.opcode == 0x1 else { return nil }
        return try JSONSerialization.jsonObject(with: Data(frame.payload)) as? [String: Any]
    }

    /// Messages until the answer with `id` (the notifications before it, by method, then the answer).
    func readUntilAnswer(_ id: String) throws -> (notifications: [String], answer: [String: Any]) {
        var notifications: [String] = []
        while true {
            guard let message = try readJSON() else { throw HarnessError("the socket closed before answer \(id)") }
            if message["id"] as? String == id { return (notifications, message) }
            if let method = message["method"] as? String { notifications.append(method) }
        }
    }
}
