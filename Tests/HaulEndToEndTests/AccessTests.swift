import Foundation
import XCTest

/// What `curl -i` got: status, headers (lower-case names) and body.
struct RawReply {
    var status = 0
    var headers: [String: String] = [:]
    /// Every header line in order, repeated names included.
    var lines: [(name: String, value: String)] = []
    var body = ""

    /// How many times the header `name` (lower case) was sent.
    func count(_ name: String) -> Int { lines.filter { $0.name == name }.count }
}

/// One request with curl, which sends exactly the headers given (URLSession replaces Host and Origin).
func curl(
    _ url: String, method: String = "GET", headers: [String: String] = [:], body: String? = nil
) throws
    -> RawReply
{
    var arguments = ["-s", "-i", "-X", method, "--max-time", "10"]
    for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
    if let body { arguments += ["--data-binary", body] }
    let output = try runCommand("/usr/bin/curl", arguments + [url])
    var reply = RawReply()
    let parts = output.components(separatedBy: "\r\n\r\n")
    let head = parts.first ?? ""
    reply.body = parts.dropFirst().joined(separator: "\r\n\r\n")
    for (index, line) in head.components(separatedBy: "\r\n").enumerated() {
        if index == 0 {
            reply.status = Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
        } else if let colon = line.firstIndex(of: ":") {
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            reply.headers[name] = value
            reply.lines.append((name, value))
        }
    }
    return reply
}

final class TokenTests: HaulTestCase {
    let token = "s3cret-token-for-the-tests"

    override var serveArguments: [String] { super.serveArguments + ["--token", token] }

    func testEveryRouteButHealthzNeedsTheToken() throws {
        for path in ["/downloads", "/stats", "/openapi.yaml", "/downloads/nope", "/events", "/metrics"] {
            let reply = try api.get(path)
            XCTAssertEqual(reply.status, 401, path)
            XCTAssertEqual(reply.header("Content-Type"), "application/problem+json", path)
            XCTAssertEqual(reply.header("WWW-Authenticate"), "Bearer realm=\"haul\"", path)
            XCTAssertEqual(reply.json["type"] as? String, "urn:haul:problem:unauthorized", path)
        }
        let post = try api.request("POST", "/downloads", json: ["url": originURL("x.bin")])
        XCTAssertEqual(post.status, 401)
        XCTAssertEqual(try api.get("/stats").status, 401, "nothing was added")
        XCTAssertEqual(try api.get("/healthz").status, 200)
        // The dashboard's page holds no data; it asks for the token itself.
        for path in ["/", "/ui/app.js", "/ui/app.css"] { XCTAssertEqual(try api.get(path).status, 200, path) }

        let bearer = ["Authorization": "Bearer \(token)"]
        XCTAssertEqual(try api.request("GET", "/stats", headers: bearer).status, 200)
        let added = try api.request(
            "POST", "/downloads", json: ["url": originURL("x.bin"), "start_paused": true],
            headers: bearer)
        XCTAssertEqual(added.status, 201)
        XCTAssertEqual(try api.request("GET", "/stats", headers: bearer).json["downloads"] as? Int, 1)
        // The query token is for event streams only, where a browser cannot set a header.
        XCTAssertEqual(try api.get("/stats?access_token=\(token)").status, 401)
    }

    func testAnEventStreamTakesTheTokenFromTheQuery() throws {
        let port = haul.port
        let refused = try SSEClient(port: port, path: "/events?access_token=wrong-token-xxxxxxxx")
        _ = refused.read(timeout: 10) { $0.status != 0 }
        XCTAssertEqual(refused.status, 401)
        let stream = try SSEClient(port: port, path: "/events?access_token=\(token)")
        _ = stream.read(timeout: 10) { $0.status != 0 }
        XCTAssertEqual(stream.status, 200)
    }

    func testRepeatedWrongTokensGet429AndThenNoSecretIsLookedAt() throws {
        let wrong = ["Authorization": "Bearer not-the-token-at-all"]
        for attempt in 1...10 {
            XCTAssertEqual(try api.request("GET", "/downloads", headers: wrong).status, 401, "attempt \(attempt)")
        }
        let limited = try api.request("GET", "/downloads", headers: wrong)
        XCTAssertEqual(limited.status, 429)
        XCTAssertEqual(limited.json["type"] as? String, "urn:haul:problem:too-many-attempts")
        XCTAssertGreaterThanOrEqual(Int(limited.header("Retry-After") ?? "") ?? 0, 1)
        // Past the burst no secret from this address is looked at, the right one neither: were it let in, a
        // guesser would tell a right guess (200) from a wrong one (429) and go on at full speed ...
        XCTAssertEqual(
            try api.request("GET", "/downloads", headers: ["Authorization": "Bearer \(token)"]).status,
            429)
        let stream = try SSEClient(port: haul.port, path: "/events?access_token=\(token)")
        _ = stream.read(timeout: 10) { $0.status != 0 }
        XCTAssertEqual(stream.status, 429)
        XCTAssertEqual(try api.get("/downloads").status, 401)
        XCTAssertEqual(try api.get("/healthz").status, 200)
        // ... until the attempts leak away (one every 6 s): then the right token passes again.
        try waitFor("the address to be let try again", timeout: 20) {
            try self.api.request("GET", "/downloads", headers: ["Authorization": "Bearer \(self.token)"]).status == 200
        }
    }
}

final class ExposureTests: HaulTestCase {
    override var serveArguments: [String] {
        super.serveArguments + ["--cors-origin", "http://dash.example:3000", "--allowed-hosts", "haul.lan"]
    }

    func testAServerBeyondLoopbackNeedsATokenOrAnExplicitFlag() throws {
        let binary = buildDirectory + "/haul"
        let refused = Process()
        refused.executableURL = URL(fileURLWithPath: binary)
        refused.arguments = [
            "serve", "--listen", "0.0.0.0:0", "--download-dir", sandbox.file("d2"),
            "--data-dir", sandbox.file("data2"),
        ]
        let errors = Pipe()
        refused.standardError = errors
        refused.standardOutput = FileHandle.nullDevice
        try refused.run()
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        refused.waitUntilExit()
        XCTAssertEqual(refused.terminationStatus, 2)
        XCTAssertTrue(message.contains("without a token"), message)

        let allowed = try ServerProcess(
            executable: binary,
            arguments: [
                "serve", "--listen", "0.0.0.0:0", "--allow-unauthenticated",
                "--download-dir", sandbox.file("d3"),
                "--data-dir", sandbox.file("data3"),
            ],
            logPath: sandbox.file("open.log"))
        XCTAssertTrue(allowed.isRunning)
        allowed.stop()
    }

    func testOnLoopbackOnlyLoopbackAndConfiguredHostNamesAreAnswered() throws {
        let url = haul.baseURL + "/stats"
        XCTAssertEqual(try curl(url).status, 200)
        XCTAssertEqual(try curl(url, headers: ["Host": "localhost:8080"]).status, 200)
        XCTAssertEqual(try curl(url, headers: ["Host": "HAUL.lan"]).status, 200)
        // A page whose name was rebound to 127.0.0.1 sends its own name.
        let rebound = try curl(url, headers: ["Host": "attacker.example:8080"])
        XCTAssertEqual(rebound.status, 403)
        XCTAssertTrue(rebound.body.contains("urn:haul:problem:host-not-allowed"), rebound.body)
        let post = try curl(
            haul.baseURL + "/downloads", method: "POST",
            headers: ["Host": "attacker.example", "Content-Type": "application/json"],
            body: "{\"url\":\"http://127.0.0.1:9/x\"}")
        XCTAssertEqual(post.status, 403)
        XCTAssertEqual(try api.get("/stats").json["downloads"] as? Int, 0)
    }

    func testCORSOnlyForConfiguredOrigins() throws {
        let allowed = "http://dash.example:3000"
        let preflight = try curl(
            haul.baseURL + "/downloads", method: "OPTIONS",
            headers: [
                "Origin": allowed, "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type, authorization",
            ])
        XCTAssertEqual(preflight.status, 204)
        XCTAssertEqual(preflight.headers["access-control-allow-origin"], allowed)
        // Each once: a second Access-Control-Allow-Origin makes browsers refuse the preflight (cors_test.py
        // shows it in Chromium).
        for name in [
            "access-control-allow-origin", "vary", "access-control-allow-methods",
            "access-control-allow-headers",
        ] {
            XCTAssertEqual(preflight.count(name), 1, "\(name): \(preflight.lines)")
        }
        XCTAssertTrue(preflight.headers["access-control-allow-methods"]?.contains("PATCH") == true)
        XCTAssertTrue(preflight.headers["access-control-allow-headers"]?.contains("Authorization") == true)

        let other = try curl(
            haul.baseURL + "/downloads", method: "OPTIONS",
            headers: ["Origin": "http://evil.example", "Access-Control-Request-Method": "POST"])
        XCTAssertNil(other.headers["access-control-allow-origin"])

        let get = try curl(haul.baseURL + "/downloads", headers: ["Origin": allowed])
        XCTAssertEqual(get.status, 200)
        XCTAssertEqual(get.headers["access-control-allow-origin"], allowed)
        XCTAssertNil(
            try curl(haul.baseURL + "/downloads", headers: ["Origin": "http://evil.example"])
                .headers["access-control-allow-origin"])

        // A form on another site needs no preflight; it must still change nothing.
        let forged = try curl(
            haul.baseURL + "/downloads", method: "POST",
            headers: ["Origin": "http://evil.example", "Content-Type": "text/plain"],
            body: "{\"url\":\"http://127.0.0.1:9/x\"}")
        XCTAssertEqual(forged.status, 403)
        let fromDashboard = try curl(
            haul.baseURL + "/downloads", method: "POST",
            headers: ["Origin": allowed, "Content-Type": "application/json"],
            body: "{\"url\":\"http://127.0.0.1:9/x\",\"start_paused\":true}")
        XCTAssertEqual(fromDashboard.status, 201)
        XCTAssertEqual(fromDashboard.headers["access-control-allow-origin"], allowed)
        XCTAssertEqual(fromDashboard.count("access-control-allow-origin"), 1)
        XCTAssertEqual(fromDashboard.count("vary"), 1)
        XCTAssertEqual(try api.get("/stats").json["downloads"] as? Int, 1)

        // The server's own page (same origin) needs no --cors-origin; a rebound name fails the Host check first.
        let host = "127.0.0.1:\(haul.port)"
        let sameOrigin = try curl(
            haul.baseURL + "/downloads", method: "POST",
            headers: ["Origin": "http://" + host, "Host": host, "Content-Type": "application/json"],
            body: "{\"url\":\"http://127.0.0.1:9/y\",\"start_paused\":true}")
        XCTAssertEqual(sameOrigin.status, 201, sameOrigin.body)
        XCTAssertNil(sameOrigin.headers["access-control-allow-origin"])
        let rebound = try curl(
            haul.baseURL + "/downloads", method: "POST",
            headers: [
                "Origin": "http://evil.example:\(haul.port)", "Host": "evil.example:\(haul.port)",
                "Content-Type": "application/json",
            ],
            body: "{\"url\":\"http://127.0.0.1:9/z\"}")
        XCTAssertEqual(rebound.status, 403)
        XCTAssertEqual(try api.get("/stats").json["downloads"] as? Int, 2)
    }
}

final class ClientLimitTests: HaulTestCase {
    override var serveArguments: [String] {
        super.serveArguments + ["--max-downloads", "3", "--max-event-streams", "2"]
    }

    func testStoredDownloadsAreCapped() throws {
        for i in 0..<3 { _ = try add(["url": "http://127.0.0.1:9/cap/\(i).bin", "start_paused": true]) }
        let refused = try api.request("POST", "/downloads", json: ["url": "http://127.0.0.1:9/cap/x.bin"])
        XCTAssertEqual(refused.status, 507)
        XCTAssertEqual(refused.json["type"] as? String, "urn:haul:problem:too-many-downloads")
        let first = (try api.get("/downloads").json["downloads"] as? [[String: Any]])?.first?["id"] as? String
        XCTAssertEqual(try api.request("DELETE", "/downloads/\(first!)").status, 204)
        XCTAssertEqual(
            try api.request("POST", "/downloads", json: ["url": "http://127.0.0.1:9/cap/x.bin"]).status,
            201, "room again after a removal")
    }

    func testEventStreamsAreCapped() throws {
        let port = haul.port
        let streams = try (0..<2).map { _ in try SSEClient(port: port, path: "/events") }
        for stream in streams { _ = stream.read(timeout: 10) { $0.status != 0 } }
        XCTAssertEqual(streams.map(\.status), [200, 200])
        let third = try api.get("/events")
        XCTAssertEqual(third.status, 503)
        XCTAssertEqual(third.header("Retry-After"), "5")
        streams[0].disconnect()
        try waitFor("a stream slot to free up") { (try api.get("/stats").json["event_streams"] as? Int) == 1 }
        let again = try SSEClient(port: port, path: "/events")
        _ = again.read(timeout: 10) { $0.status != 0 }
        XCTAssertEqual(again.status, 200)
    }

    func testOversizedRequestsAreRefusedAndTheServerStaysUp() throws {
        let long = try curl(haul.baseURL + "/downloads?state=" + String(repeating: "a", count: 9000))
        XCTAssertEqual(long.status, 414)
        let huge = try curl(haul.baseURL + "/stats", headers: ["X-Filler": String(repeating: "b", count: 40_000)])
        XCTAssertGreaterThanOrEqual(huge.status, 400)
        let body = "{\"url\":\"http://127.0.0.1:9/\(String(repeating: "c", count: 5 << 20))\"}"
        let path = sandbox.file("big.json")
        try Data(body.utf8).write(to: URL(fileURLWithPath: path))
        let big = try curl(
            haul.baseURL + "/downloads", method: "POST",
            headers: ["Content-Type": "application/json"], body: "@" + path)
        XCTAssertEqual(big.status, 413)
        XCTAssertEqual(try api.get("/healthz").status, 200)
        XCTAssertEqual(try api.get("/stats").json["downloads"] as? Int, 0)
    }
}

/// A plain TCP connection to the server, for clients that misbehave on purpose.
final class RawConnection {
    private let fd: Int32

    init(port: UInt16) throws {
        fd = try connectToLoopback(port: port)
    }

    deinit { close(fd) }

    func send(_ text: String) { _ = text.withCString { Glibc.send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) } }

    /// What the server sends until it closes the connection or `timeout` seconds pass.
    func readAll(within timeout: Double) -> String {
        let deadline = Date().addingTimeInterval(timeout)
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Date() < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 50) > 0 else {
                // An answer has come and nothing more follows: a kept-alive connection.
                if received.count > 0, String(decoding: received, as: UTF8.self).contains("\r\n\r\n") { break }
                continue
            }
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            received += buffer.prefix(n)
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// Whether the server closed the connection, waiting up to `timeout` seconds for it (bytes it sends are read
    /// and dropped).
    func closedByServer(within timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Date() < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&poller, 1, 50) > 0 {
                let n = recv(fd, &buffer, buffer.count, 0)
                if n <= 0 { return true }
            }
        }
        return false
    }
}

final class ConnectionGuardTests: HaulTestCase {
    override var serveArguments: [String] {
        super.serveArguments + ["--http-timeout", "2", "--sse-heartbeat", "0.5", "--max-connections-per-client", "4"]
    }

    private var port: UInt16 { haul.port }

    func testATricklingRequestHeadIsCutWhileAStreamLives() throws {
        let stream = try SSEClient(port: port, path: "/events")
        _ = stream.read(timeout: 10) { $0.status != 0 }
        XCTAssertEqual(stream.status, 200)
        let slow = try RawConnection(port: port)
        slow.send("GET /stats HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        // A header line every 0.3 s: each read comes well inside evhttp's 2 s timeout, the whole head never does.
        let started = Date()
        var cut = false
        while Date().timeIntervalSince(started) < 6, !cut {
            slow.send("X-Slow: \(Int(Date().timeIntervalSince(started) * 10))\r\n")
            cut = slow.closedByServer(within: 0.3)
        }
        XCTAssertTrue(cut, "the trickling client was never cut off")
        XCTAssertGreaterThan(Date().timeIntervalSince(started), 1.5, "not before its deadline")
        // The event stream, quiet for as long, stays: heartbeats still arrive.
        let comments = stream.comments
        XCTAssertTrue(stream.read(timeout: 3) { $0.comments > comments })
        XCTAssertFalse(stream.closed)
    }

    func testConnectionsPerClientAreCappedByClosingTheIdleOnesFirst() throws {
        // Accepted in the order they came: the fifth below is taken after these four.
        let idle = try (0..<4).map { _ in try RawConnection(port: port) }
        // Four idle connections fill the cap; a fifth with a whole request is answered, and the oldest idle one is
        // what makes room. Checked well before the 2 s request deadline, which would close all of them.
        let answer = RawConnection.exchange(port: port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        XCTAssertTrue(answer.hasPrefix("HTTP/1.1 200"), "a new complete request was refused: \(answer)")
        let closed = idle.map { $0.closedByServer(within: 0.2) }
        XCTAssertEqual(closed.first, true, "the longest-idle connection made room: \(closed)")
        XCTAssertEqual(Array(closed.suffix(2)), [false, false], "the newer idle ones stay: \(closed)")
        withExtendedLifetime(idle) {}
    }

    /// A client holding the cap in live event streams cannot open one more: the newcomer goes, not a stream.
    func testACapFullOfStreamsRefusesTheNewcomer() throws {
        let streams = try (0..<4).map { _ in try SSEClient(port: port, path: "/events") }
        for stream in streams { _ = stream.read(timeout: 10) { $0.status != 0 } }
        XCTAssertEqual(streams.map(\.status), [200, 200, 200, 200])
        let extra = try RawConnection(port: port)
        XCTAssertTrue(extra.closedByServer(within: 1), "a fifth connection beside four live streams")
        XCTAssertTrue(streams.allSatisfy { !$0.closed }, "the streams stay")
    }
}
