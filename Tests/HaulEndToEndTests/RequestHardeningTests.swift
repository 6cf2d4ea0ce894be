import Foundation
import XCTest

/// What a hostile API client sends, over real HTTP: header injection into the origin's request, a body that would
/// freeze the loop, a Host header built to pass the allowlist, a body that is not JSON.
final class RequestHardeningTests: HaulTestCase {
    private func fields(_ reply: Client.Reply) -> [String] {
        (reply.json["errors"] as? [[String: Any]] ?? []).compactMap { $0["field"] as? String }
    }

    func testHeadersThatWouldSmuggleARequestAreRefusedAndNothingReachesTheOrigin() throws {
        try sandbox.makeRandomFile("www/h.bin", size: 1000)
        for headers in [
            ["X-A": "1\r\nHost: evil.example"], ["X-A": "1\r\n\r\nGET /smuggled HTTP/1.1"],
            ["X-A": "nul\u{0}byte"], ["Host": "evil.example"], ["RANGE": "bytes=0-"],
            ["Bad Name": "x"],
        ] {
            let reply = try api.request("POST", "/downloads", json: ["url": originURL("h.bin"), "headers": headers])
            XCTAssertEqual(reply.status, 422, "\(headers): \(reply.text)")
            XCTAssertEqual(reply.header("Content-Type"), "application/problem+json")
            XCTAssertTrue(fields(reply).allSatisfy { $0.hasPrefix("headers") }, "\(fields(reply))")
        }
        XCTAssertEqual(try api.get("/stats").json["downloads"] as? Int, 0)
        XCTAssertEqual(try originRequests().count, 0, "the origin heard nothing")
    }

    func testGivenHeadersReachTheOriginExactlyAndCannotReplaceHaulsOwn() throws {
        let hash = try sandbox.makeRandomFile("www/g.bin", size: 300_000)
        let headers = [
            "Cookie": "session=abc; theme=dark", "X-Padded": "  kept inside  ", "X-Empty": "",
            "Authorization": "Bearer xyz",
        ]
        let done = try waitForState(
            try add(["url": originURL("g.bin"), "headers": headers, "connections": 2]),
            "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        let requests = try originRequests()
        XCTAssertFalse(requests.isEmpty)
        for request in requests {
            let sent = request["headers"] as? [String: String] ?? [:]
            XCTAssertEqual(sent["cookie"], "session=abc; theme=dark")
            XCTAssertEqual(sent["x-padded"], "kept inside")
            XCTAssertEqual(sent["x-empty"], "")
            XCTAssertEqual(sent["host"], "127.0.0.1:\(try XCTUnwrap(URL(string: origin.baseURL)?.port))")
        }
        XCTAssertNil(done["headers"], "headers are never shown back")
    }

    func testTooManyHeadersAreRefusedAtOnceAndTheServerStaysResponsive() throws {
        // 100,000 entries in under 1 MiB: the answer is 422, quickly enough that the next request is answered.
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        let names: [String] = (0..<100_000).map { (n: Int) -> String in
            String([alphabet[n / 3844], alphabet[n / 62 % 62], alphabet[n % 62]])
        }
        let members: String = names.map { (name: String) -> String in "\"" + name + "\":\"\"" }
            .joined(separator: ",")
        let body = "{\"url\":\"" + originURL("x.bin") + "\",\"headers\":{" + members + "}}"
        let reply = try api.request(
            "POST", "/downloads", body: Data(body.utf8),
            headers: ["Content-Type": "application/json"])
        XCTAssertEqual(reply.status, 422, reply.text)
        XCTAssertEqual(fields(reply), ["headers"])
        XCTAssertEqual(try api.get("/healthz").status, 200)
        XCTAssertEqual(try api.get("/stats").json["downloads"] as? Int, 0)
    }

    func testTheRequestLogMeasuresTheWholeRequest() throws {
        // A megabyte of unknown members costs the server real CPU time to read, parse and refuse; the duration its
        // log line gives must cover all of it (the loop is single-threaded: nothing else ran meanwhile).
        let members = (0..<90_000).map { "\"u\($0)\":1" }.joined(separator: ",")
        let body = "{\"url\":\"" + originURL("x.bin") + "\"," + members + "}"
        let before = try cpuSeconds(haul.process.processIdentifier)
        let reply = try api.request(
            "POST", "/downloads", body: Data(body.utf8),
            headers: ["Content-Type": "application/json"])
        let spent = try cpuSeconds(haul.process.processIdentifier) - before
        XCTAssertEqual(reply.status, 422)
        var line: Substring?
        try waitFor("the request's log line") {
            let log = try String(contentsOfFile: sandbox.file("haul.log"), encoding: .utf8)
            line = log.split(separator: "\n").last { $0.contains("http.method=POST") && $0.contains("http.status=422") }
            return line != nil
        }
        let duration = line.flatMap { $0.split(separator: " ").first { $0.hasPrefix("http.duration_ms=") } }
        let logged =
            try XCTUnwrap(
                duration.flatMap { Double($0.dropFirst("http.duration_ms=".count)) },
                String(line ?? "")) / 1000
        // Two clock ticks of slack for /proc's 10 ms accounting.
        XCTAssertGreaterThanOrEqual(logged, spent - 0.02, "logged \(logged) s, the server spent \(spent) s of CPU")
    }

    /// User plus system CPU seconds of process `pid`, from /proc (in clock ticks of 10 ms).
    private func cpuSeconds(_ pid: Int32) throws -> Double {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // Fields after the command name, which is in parentheses and may hold spaces.
        let fields = stat[stat.index(after: try XCTUnwrap(stat.lastIndex(of: ")")))...].split(separator: " ")
        return (Double(fields[11]) ?? 0) / 100 + (Double(fields[12]) ?? 0) / 100
    }

    func testHostHeadersThatOnlyLookAllowedAreRefused() throws {
        let url = haul.baseURL + "/stats"
        let port = haul.port
        XCTAssertEqual(try curl(url).status, 200)
        for host in [
            "127.0.0.1:\(port)@evil.com", "a, b", "127.0.0.1:\(port), evil.com", "localhost:99999",
            "evil.com#127.0.0.1",
        ] {
            let reply = try curl(url, headers: ["Host": host])
            XCTAssertEqual(reply.status, 400, host)
            XCTAssertTrue(reply.body.contains("urn:haul:problem:malformed-request"), reply.body)
        }
        let twice = RawConnection.exchange(
            port: port,
            "GET /stats HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: 127.0.0.1\r\n\r\n")
        XCTAssertTrue(twice.hasPrefix("HTTP/1.1 400"), twice)
        let none = RawConnection.exchange(port: port, "GET /stats HTTP/1.1\r\nConnection: close\r\n\r\n")
        XCTAssertTrue(none.hasPrefix("HTTP/1.1 400"), none)
        let old = RawConnection.exchange(port: port, "GET /stats HTTP/1.0\r\n\r\n")
        XCTAssertTrue(old.hasPrefix("HTTP/1.0 200") || old.hasPrefix("HTTP/1.1 200"), "HTTP/1.0 needs no Host: \(old)")
    }

    func testOnlyApplicationJSONBodiesAreRead() throws {
        let body = "{\"url\":\"http://127.0.0.1:9/x\",\"start_paused\":true}"
        for type in ["text/plain", "application/jsonx", "application/x-www-form-urlencoded"] {
            let reply = try curl(
                haul.baseURL + "/downloads", method: "POST", headers: ["Content-Type": type],
                body: body)
            XCTAssertEqual(reply.status, 415, type)
        }
        // curl's --data-binary alone sends application/x-www-form-urlencoded; an empty type means none at all.
        XCTAssertEqual(
            try curl(
                haul.baseURL + "/downloads", method: "POST", headers: ["Content-Type": ""],
                body: body
            ).status, 415)
        XCTAssertEqual(
            try curl(
                haul.baseURL + "/downloads", method: "POST",
                headers: ["Content-Type": "application/json; charset=utf-8"], body: body
            ).status, 201)
        XCTAssertEqual(try api.get("/stats").json["downloads"] as? Int, 1)
    }
}

extension RawConnection {
    /// Sends `request` on a fresh connection and returns what the server answered until it closed or went quiet.
    static func exchange(port: UInt16, _ request: String) -> String {
        guard let connection = try? RawConnection(port: port) else { return "" }
        connection.send(request)
        return connection.readAll(within: 3)
    }
}
