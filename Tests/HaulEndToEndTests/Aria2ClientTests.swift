import Foundation
import XCTest

/// Real aria2 clients against Haul: aria2p (from PyPI) adding, following by WebSocket notifications, pausing,
/// resuming, removing and purging; and the WebSocket itself on a raw socket (fragments, pings, masking, limits,
/// a page of another origin), and the same calls answered with aria2c's shapes (Debian's aria2c on loopback).
final class Aria2ClientTests: HaulTestCase {
    private let token = "aria2p-test-token-0123"

    override var serveArguments: [String] { super.serveArguments + ["--token", token] }

    func testAria2pDrivesHaulAsItDrivesAria2() throws {
        guard FileManager.default.fileExists(atPath: LocalFTP.python) else {
            throw XCTSkip(".build/venv is missing (make test makes it with aria2p)")
        }
        let hash = try sandbox.makeRandomFile("www/for-aria2p.bin", size: 5 << 20)
        _ = try sandbox.makeRandomFile("www/slow.bin", size: 8 << 20)
        let port = try XCTUnwrap(URL(string: haul.baseURL)?.port)
        let run = try execute(
            LocalFTP.python,
            [
                packageRoot + "/Tests/Aria2/aria2p_client.py", String(port), token,
                originURL("for-aria2p.bin"), originURL("slow.bin"),
            ])
        XCTAssertEqual(run.status, 0, run.output)
        let line = try XCTUnwrap(run.stdout.split(separator: "\n").last.map(String.init), run.output)
        let report = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        XCTAssertEqual(report["version"] as? String, "1.36.0")
        let first = try XCTUnwrap(report["first"] as? [String: Any])
        XCTAssertEqual(first["status"] as? String, "complete")
        XCTAssertEqual(first["path"] as? String, sandbox.file("downloads/by-aria2p.bin"))
        XCTAssertEqual(first["name"] as? String, "by-aria2p.bin")
        XCTAssertEqual(first["total"] as? Int, 5 << 20)
        XCTAssertEqual(first["completed"] as? Int, 5 << 20)
        XCTAssertEqual(try sha256(sandbox.file("downloads/by-aria2p.bin")), hash)
        XCTAssertEqual(report["slow_started"] as? String, "active")
        XCTAssertEqual(report["slow_paused"] as? String, "paused")
        XCTAssertNotEqual(report["slow_resumed"] as? String, "paused")
        XCTAssertTrue(
            (report["slow_removed"] as? String ?? "").hasPrefix("gone")
                || report["slow_removed"] as? String == "removed",
            "\(report)")
        let firstGID = try XCTUnwrap(first["gid"] as? String)
        let slowGID = try XCTUnwrap(report["slow_gid"] as? String)
        XCTAssertEqual(report["listed"] as? [String], [firstGID])
        XCTAssertEqual(report["after_purge"] as? [String], [])
        // The WebSocket's notifications, in aria2's order for each download.
        let seen = try XCTUnwrap(report["seen"] as? [[String]])
        XCTAssertEqual(seen.filter { $0[1] == firstGID }.map { $0[0] }, ["start", "complete"], "\(seen)")
        XCTAssertEqual(seen.filter { $0[1] == slowGID }.map { $0[0] }, ["start", "pause", "start", "stop"], "\(seen)")
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: sandbox.file("downloads/by-aria2p.bin")),
            "a purge forgets results, not files")
    }

    // MARK: the WebSocket on a raw socket

    /// A connected WebSocket after the handshake, or the refusal's status line.
    private func openSocket(origin: String? = nil) throws -> (socket: RawSocket, status: String) {
        let client = try WebSocketClient(port: try XCTUnwrap(URL(string: haul.baseURL)?.port), origin: origin)
        return (client.socket, client.status)
    }

    private func frame(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, masked: Bool = true) -> [UInt8] {
        WebSocketClient.frame(opcode, payload, fin: fin, masked: masked)
    }

    private func readFrame(_ socket: RawSocket) throws -> (opcode: UInt8, payload: [UInt8]) {
        try WebSocketClient.readFrame(socket)
    }

    private func call(_ method: String, _ params: [Any] = []) throws -> [UInt8] {
        try JSONSerialization.data(withJSONObject: [
            "jsonrpc": "2.0", "id": method, "method": method,
            "params": ["token:" + token] + params,
        ]).map { $0 }
    }

    func testTheWebSocketSpeaksRFC6455() throws {
        let (socket, status) = try openSocket()
        XCTAssertEqual(status, "HTTP/1.1 101 Switching Protocols")
        // A call in three fragments, with a ping between them: the pong first, then the answer.
        let body = try call("aria2.getVersion")
        try socket.write(frame(0x1, Array(body[..<10]), fin: false))
        try socket.write(frame(0x9, Array("are you there".utf8)))
        try socket.write(frame(0x0, Array(body[10..<20]), fin: false))
        try socket.write(frame(0x0, Array(body[20...])))
        let pong = try readFrame(socket)
        XCTAssertEqual(pong.opcode, 0xA)
        XCTAssertEqual(pong.payload, Array("are you there".utf8))
        let answer = try readFrame(socket)
        XCTAssertEqual(answer.opcode, 0x1)
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(answer.payload)) as? [String: Any])
        XCTAssertEqual((json["result"] as? [String: Any])?["version"] as? String, "1.36.0")
        // A long message (16-bit length) is answered too.
        let padded = try call("aria2.tellWaiting", [0, 10, Array(repeating: "gid", count: 400)])
        XCTAssertGreaterThan(padded.count, 125)
        try socket.write(frame(0x1, padded))
        XCTAssertEqual(try readFrame(socket).opcode, 0x1)
        // Closing: the server answers the close and ends the connection.
        try socket.write(frame(0x8, [0x03, 0xE8]))
        let close = try readFrame(socket)
        XCTAssertEqual(close.opcode, 0x8)
        XCTAssertEqual(close.payload.prefix(2), [0x03, 0xE8])
        XCTAssertTrue(try socket.readToEnd().isEmpty)
    }

    func testTheWebSocketRefusesWhatBreaksTheProtocol() throws {
        // Unmasked: 1002.
        let (plain, _) = try openSocket()
        try plain.write(frame(0x1, try call("aria2.getVersion"), masked: false))
        let refused = try readFrame(plain)
        XCTAssertEqual(refused.opcode, 0x8)
        XCTAssertEqual(refused.payload.prefix(2), [0x03, 0xEA])
        // Larger than 1 MiB: 1009, before the body is read.
        let (big, _) = try openSocket()
        try big.write(Array(frame(0x1, [UInt8](repeating: 0x20, count: (1 << 20) + 1)).prefix(20)))
        XCTAssertEqual(try readFrame(big).payload.prefix(2), [0x03, 0xF1])
        // Not UTF-8: 1007.
        let (bad, _) = try openSocket()
        try bad.write(frame(0x1, [0xFF, 0xFE]))
        XCTAssertEqual(try readFrame(bad).payload.prefix(2), [0x03, 0xEF])
        // A page of another origin may not open one (it could add downloads); the server's own page may.
        XCTAssertEqual(try openSocket(origin: "http://evil.example").status, "HTTP/1.1 403 Forbidden")
        XCTAssertEqual(try openSocket(origin: haul.baseURL).status, "HTTP/1.1 101 Switching Protocols")
        // The server is still fine.
        XCTAssertEqual(try api.get("/healthz").status, 200)
    }

    /// The calls AriaNg and Aria2-Explorer make (their sources: AriaNg's aria2RpcService, Aria2-Explorer's
    /// background script), sent to Debian's aria2c and to Haul: the same keys with the same JSON types.
    func testAnswersHaveAria2csShapes() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/aria2c") else {
            throw XCTSkip("aria2c is not installed (make test installs it)")
        }
        let port = try Nginx.freePort()
        let aria2 = Process()
        aria2.executableURL = URL(fileURLWithPath: "/usr/bin/aria2c")
        aria2.arguments = [
            "--enable-rpc", "--rpc-listen-port=\(port)", "--rpc-secret=\(token)",
            "-d", sandbox.file("aria2"), "--no-conf", "-q",
        ]
        aria2.standardOutput = FileHandle.nullDevice
        aria2.standardError = FileHandle.nullDevice
        try aria2.run()
        defer {
            aria2.terminate()
            aria2.waitUntilExit()
        }
        try waitFor("aria2c to listen") { LocalProxy.accepts(host: "127.0.0.1", port: port) }
        let aria2Client = Client(base: "http://127.0.0.1:\(port)")
        _ = try sandbox.makeRandomFile("www/shape.bin", size: 300_000)
        func ask(_ client: Client, _ method: String, _ params: [Any]) throws -> Any? {
            let reply = try client.request(
                "POST", "/jsonrpc",
                json: [
                    "jsonrpc": "2.0", "id": "x", "method": method,
                    "params": ["token:" + token] + params,
                ])
            return reply.json["result"] ?? reply.json["error"]
        }
        func shape(_ value: Any?) -> String {
            switch value {
            case let object as [String: Any]:
                return "{" + object.keys.sorted().map { "\($0):\(shape(object[$0]))" }.joined(separator: ",") + "}"
            case let array as [Any]: return "[" + (array.first.map { shape($0) } ?? "") + "]"
            case is String: return "s"
            case is NSNumber: return "n"
            default: return "null"
            }
        }
        var gids: [String: String] = [:]
        for (name, client) in [("aria2c", aria2Client), ("haul", api!)] {
            gids[name] =
                try ask(client, "aria2.addUri", [[originURL("shape.bin")], ["out": "shape-\(name).bin"]]) as? String
            try waitFor("\(name) to finish") {
                (try ask(client, "aria2.tellStatus", [gids[name]!, ["status"]]) as? [String: Any])?["status"] as? String
                    == "complete"
            }
        }
        let keys = [
            "gid", "status", "totalLength", "completedLength", "uploadLength", "downloadSpeed", "uploadSpeed",
            "connections", "dir", "files", "numPieces", "pieceLength", "bitfield", "errorCode",
            "errorMessage",
        ]
        let calls: [(String, (String) -> [Any])] = [
            ("aria2.getVersion", { _ in [] }),
            ("aria2.getGlobalStat", { _ in [] }),
            ("aria2.getSessionInfo", { _ in [] }),
            ("aria2.tellStatus", { [$0, keys] }),
            ("aria2.tellActive", { _ in [keys] }),
            ("aria2.tellWaiting", { _ in [0, 1000, keys] }),
            ("aria2.tellStopped", { _ in [0, 1000, keys] }),
            ("aria2.getFiles", { [$0] }),
            ("aria2.tellStatus", { _ in ["0000000000000001"] }),
            ("aria2.nope", { _ in [] }),
        ]
        for (method, params) in calls {
            let aria2Shape = shape(try ask(aria2Client, method, params(gids["aria2c"]!)))
            // Haul's version beside aria2's is the one key more.
            let haulShape = shape(try ask(api, method, params(gids["haul"]!))).replacingOccurrences(
                of: "haul:s,", with: "")
            XCTAssertEqual(haulShape, aria2Shape, method)
        }
    }
}

/// A blocking TCP connection to the server, for bytes no HTTP client would send.
final class RawSocket {
    private let fd: Int32
    private var pending: [UInt8] = []

    init(port: UInt16) throws {
        fd = try connectToLoopback(port: port)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    func write(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw HarnessError("send: \(errno)") }
            sent += n
        }
    }

    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = recv(fd, &chunk, chunk.count, 0)
        guard n >= 0 else { throw HarnessError("recv: \(errno)") }
        pending += chunk.prefix(n)
        return n > 0
    }

    /// Exactly `count` bytes.
    func read(count: Int) throws -> [UInt8] {
        while pending.count < count {
            guard try fill() else { throw HarnessError("the server closed after \(pending.count) of \(count) bytes") }
        }
        defer { pending.removeFirst(count) }
        return Array(pending.prefix(count))
    }

    /// An HTTP response head, through its blank line.
    func readHead() throws -> String {
        while true {
            if let end = String(decoding: pending, as: UTF8.self).range(of: "\r\n\r\n") {
                let head = String(String(decoding: pending, as: UTF8.self)[..<end.upperBound])
                pending.removeFirst(head.utf8.count)
                return head
            }
            guard try fill() else { return String(decoding: pending, as: UTF8.self) }
        }
    }

    /// What is left until the server closes.
    func readToEnd() throws -> [UInt8] {
        while try fill() {}
        defer { pending = [] }
        return pending
    }
}
