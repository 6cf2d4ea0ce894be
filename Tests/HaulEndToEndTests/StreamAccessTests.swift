import Foundation
import XCTest

/// What stays open after a request is answered, under a token: aria2's WebSocket notifications go only to sockets
/// that proved a token (at the handshake or by a call), a purge tells no one of a stop, a revoked or expired
/// token's event streams and sockets are cut off, sockets share the event streams' cap, and a message left
/// incomplete is not held for ever.
final class StreamAccessTests: HaulTestCase {
    private let token = "stream-access-token-0123456789"

    override var serveArguments: [String] {
        super.serveArguments + [
            "--token", token, "--max-event-streams", "6", "--http-timeout", "3", "--sse-heartbeat", "1",
        ]
    }

    private var port: Int { URL(string: haul.baseURL)!.port! }

    private func call(_ method: String, _ path: String, as secret: String, _ json: Any? = nil) throws -> Client.Reply {
        try api.request(method, path, json: json, headers: ["Authorization": "Bearer " + secret])
    }

    private func rpc(_ method: String, _ params: [Any], as secret: String? = nil) throws -> [String: Any] {
        try api.request(
            "POST", "/jsonrpc",
            json: [
                "jsonrpc": "2.0", "id": "x", "method": method,
                "params": ["token:" + (secret ?? token)] + params,
            ]
        ).json
    }

    /// A scoped token: its id and secret.
    private func makeToken(
        _ name: String, scope: String = "manage", expiresIn: Double? = nil
    ) throws
        -> (id: String, secret: String)
    {
        var body: [String: Any] = ["name": name, "scope": scope]
        if let expiresIn {
            let formatter = ISO8601DateFormatter()
            body["expires_at"] = formatter.string(from: Date().addingTimeInterval(expiresIn))
        }
        let reply = try call("POST", "/tokens", as: token, body)
        XCTAssertEqual(reply.status, 201, reply.text)
        return (try XCTUnwrap(reply.json["id"] as? String), try XCTUnwrap(reply.json["secret"] as? String))
    }

    /// Adds a small file by aria2's addUri and waits for `socket` to hear it complete.
    private func addAndHearCompletion(on socket: WebSocketClient, name: String) throws -> String {
        _ = try sandbox.makeRandomFile("www/\(name)", size: 40_000)
        let gid = try XCTUnwrap(try rpc("aria2.addUri", [[originURL(name)]])["result"] as? String)
        XCTAssertEqual(try hear(gid, on: socket), ["aria2.onDownloadStart", "aria2.onDownloadComplete"])
        return gid
    }

    /// The notifications `socket` is sent about `gid`, up to its completion.
    private func hear(_ gid: String, on socket: WebSocketClient) throws -> [String] {
        var heard: [String] = []
        while !heard.contains("aria2.onDownloadComplete") {
            guard let message = try socket.readJSON() else { throw HarnessError("closed while waiting: \(heard)") }
            if let method = message["method"] as? String,
                (message["params"] as? [[String: Any]])?.first?["gid"] as? String == gid
            {
                heard.append(method)
            }
        }
        return heard
    }

    func testOnlySocketsThatProvedTheTokenHearOfDownloads() throws {
        let silent = try WebSocketClient(port: port)
        let wrong = try WebSocketClient(port: port)
        let byCall = try WebSocketClient(port: port)
        let byQuery = try WebSocketClient(port: port, path: "/jsonrpc?token=" + token)
        let byHeader = try WebSocketClient(port: port, headers: ["Authorization: Bearer " + token])
        for socket in [silent, wrong, byCall, byQuery, byHeader] { XCTAssertTrue(socket.isOpen, socket.status) }
        XCTAssertEqual(
            try WebSocketClient(port: port, path: "/jsonrpc?token=wrong-token").status,
            "HTTP/1.1 401 Unauthorized")
        try wrong.call("aria2.getGlobalStat", token: "not-the-token", id: "w")
        XCTAssertNotNil(try wrong.readUntilAnswer("w").answer["error"])
        try byCall.call("aria2.getGlobalStat", token: token, id: "c")
        XCTAssertNotNil(try byCall.readUntilAnswer("c").answer["result"])
        let gid = try addAndHearCompletion(on: byQuery, name: "heard.bin")
        for socket in [byCall, byHeader] {
            XCTAssertEqual(try hear(gid, on: socket), ["aria2.onDownloadStart", "aria2.onDownloadComplete"])
        }
        for (socket, id) in [(silent, "s"), (wrong, "w2")] {
            try socket.call("system.listNotifications", id: id)
            XCTAssertEqual(try socket.readUntilAnswer(id).notifications, [], "a socket that proved no token heard")
        }
    }

    func testPurgingResultsTellsNoStop() throws {
        // Finished while no socket was open.
        _ = try sandbox.makeRandomFile("www/done.bin", size: 10_000)
        let gid = try XCTUnwrap(try rpc("aria2.addUri", [[originURL("done.bin")]])["result"] as? String)
        try waitFor("the download to complete") {
            (try self.rpc("aria2.tellStatus", [gid, ["status"]])["result"] as? [String: Any])?["status"] as? String
                == "complete"
        }
        let socket = try WebSocketClient(port: port, path: "/jsonrpc?token=" + token)
        try socket.call("aria2.purgeDownloadResult", token: token, id: "purge")
        XCTAssertEqual(try socket.readUntilAnswer("purge").answer["result"] as? String, "OK")
        try socket.call("aria2.getVersion", token: token, id: "after")
        XCTAssertEqual(try socket.readUntilAnswer("after").notifications, [], "aria2 sends nothing for a purge")
        XCTAssertNotNil(try rpc("aria2.tellStatus", [gid])["error"], "the result is gone")
    }

    func testARevokedTokensStreamsAndSocketsAreCutOff() throws {
        let watcher = try makeToken("watcher")
        let events = try SSEClient(port: UInt16(port), path: "/events?access_token=" + watcher.secret)
        XCTAssertTrue(events.read(timeout: 10, until: { _ in events.status == 200 }))
        let socket = try WebSocketClient(port: port, path: "/jsonrpc?token=" + watcher.secret)
        XCTAssertTrue(socket.isOpen, socket.status)
        // Both hear of a download while the token stands.
        _ = try addAndHearCompletion(on: socket, name: "before.bin")
        XCTAssertTrue(events.read(timeout: 10, until: { _ in events.events.contains { $0.event == "state" } }))
        XCTAssertEqual(try call("DELETE", "/tokens/\(watcher.id)", as: token).status, 204)
        // The stream ends and the socket is closed at once; the token is refused from then on.
        XCTAssertTrue(
            events.read(timeout: 10, until: { _ in events.closed }), "the revoked token's stream is still open")
        var frame = try socket.read()
        while frame.opcode == 0x1 { frame = try socket.read() }
        XCTAssertEqual(frame.opcode, 0x8)
        XCTAssertEqual(frame.payload.prefix(2), [0x03, 0xF0], "closed with 1008")
        XCTAssertEqual(try call("GET", "/downloads", as: watcher.secret).status, 401)
    }

    func testAnExpiredTokensStreamIsCutOff() throws {
        let brief = try makeToken("brief", scope: "read", expiresIn: 3)
        let events = try SSEClient(port: UInt16(port), path: "/events?access_token=" + brief.secret)
        XCTAssertTrue(events.read(timeout: 10, until: { _ in events.status == 200 }))
        let socket = try WebSocketClient(port: port, headers: ["Authorization: Bearer " + brief.secret])
        XCTAssertTrue(socket.isOpen, socket.status)
        XCTAssertTrue(
            events.read(timeout: 15, until: { _ in events.closed }), "an expired token's stream is still open")
        XCTAssertEqual(try socket.read().opcode, 0x8)
    }

    func testSocketsShareTheStreamsCapAndAnIncompleteMessageIsNotHeldForEver() throws {
        // --max-event-streams 6: four event streams and two sockets fill it; a seventh of either is refused.
        var streams: [SSEClient] = []
        for _ in 0..<4 {
            let stream = try SSEClient(port: UInt16(port), path: "/events?access_token=" + token)
            XCTAssertTrue(stream.read(timeout: 10, until: { _ in stream.status == 200 }))
            streams.append(stream)
        }
        let first = try WebSocketClient(port: port)
        let second = try WebSocketClient(port: port)
        XCTAssertTrue(first.isOpen && second.isOpen)
        XCTAssertEqual(try WebSocketClient(port: port).status, "HTTP/1.1 503 Service Unavailable")
        let refused = try SSEClient(port: UInt16(port), path: "/events?access_token=" + token)
        XCTAssertTrue(refused.read(timeout: 10, until: { _ in refused.status != 0 }))
        XCTAssertEqual(refused.status, 503)
        // Half a frame, then nothing: closed after the request deadline (--http-timeout 3) with 1008.
        let frame = WebSocketClient.frame(0x1, [UInt8](repeating: 0x20, count: 50_000))
        try first.write(Array(frame.prefix(30_000)))
        let started = Date()
        let close = try first.read()
        XCTAssertEqual(close.opcode, 0x8)
        XCTAssertEqual(close.payload.prefix(2), [0x03, 0xF0])
        XCTAssertGreaterThan(Date().timeIntervalSince(started), 1.5)
        // Its place is free again.
        try waitFor("the closed socket's place to be free") {
            try WebSocketClient(port: self.port).isOpen
        }
        _ = streams
    }
}
