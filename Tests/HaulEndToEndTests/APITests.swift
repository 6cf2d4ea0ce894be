import Foundation
import XCTest

/// What clients get for bad input, over real HTTP: the status, problem+json, and the offending fields.
final class APITests: HaulTestCase {
    private func assertProblem(
        _ reply: Client.Reply, _ status: Int, field: String? = nil,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertEqual(reply.status, status, reply.text, file: file, line: line)
        XCTAssertEqual(reply.header("Content-Type"), "application/problem+json", file: file, line: line)
        let problem = reply.json
        XCTAssertEqual(problem["status"] as? Int, status, file: file, line: line)
        XCTAssertNotNil(problem["type"] as? String, file: file, line: line)
        XCTAssertNotNil(problem["title"] as? String, file: file, line: line)
        XCTAssertFalse((problem["detail"] as? String ?? "").isEmpty, file: file, line: line)
        if let field {
            let fields = (problem["errors"] as? [[String: Any]] ?? []).compactMap { $0["field"] as? String }
            XCTAssertTrue(fields.contains(field), "\(fields) lacks \(field)", file: file, line: line)
        }
    }

    func testBadInputsGetClearProblems() throws {
        assertProblem(
            try api.request(
                "POST", "/downloads", body: Data("{\"url\": ".utf8),
                headers: ["Content-Type": "application/json"]), 400)
        assertProblem(try api.request("POST", "/downloads", json: [String: Any]()), 422, field: "url")
        assertProblem(try api.request("POST", "/downloads", json: ["url": 42]), 422, field: "url")
        assertProblem(try api.request("POST", "/downloads", json: ["url": "not a url"]), 422, field: "url")
        assertProblem(try api.request("POST", "/downloads", json: ["url": "gopher://h/f"]), 422, field: "url")
        assertProblem(try api.request("POST", "/downloads", json: ["url": "file:///etc/passwd"]), 422, field: "url")
        assertProblem(try api.request("POST", "/downloads", json: ["url": "http:///nohost"]), 422, field: "url")
        assertProblem(
            try api.request("POST", "/downloads", json: ["url": "http://h/f", "directory": "../up"]), 422,
            field: "directory")
        assertProblem(
            try api.request("POST", "/downloads", json: ["url": "http://h/f", "filename": "a/b"]), 422,
            field: "filename")
        assertProblem(
            try api.request("POST", "/downloads", json: ["url": "http://h/f", "connections": 99]), 422,
            field: "connections")
        assertProblem(
            try api.request("POST", "/downloads", json: ["url": "http://h/f", "headers": ["Range": "x"]]),
            422, field: "headers.Range")
        assertProblem(
            try api.request("POST", "/downloads", json: ["url": "http://h/f", "colour": "red"]), 422,
            field: "colour")
        assertProblem(try api.request("POST", "/downloads", json: [1, 2]), 400)
        assertProblem(
            try api.request(
                "POST", "/downloads", body: Data("url=x".utf8),
                headers: ["Content-Type": "application/x-www-form-urlencoded"]), 415)
        let big = Data("{\"url\": \"http://h/\(String(repeating: "a", count: 1 << 20))\"}".utf8)
        assertProblem(
            try api.request("POST", "/downloads", body: big, headers: ["Content-Type": "application/json"]),
            413)
        XCTAssertEqual((try api.get("/downloads").json["downloads"] as? [Any])?.count, 0, "nothing was added")
    }

    func testUnknownIdsRoutesAndMethods() throws {
        assertProblem(try api.get("/downloads/nope"), 404)
        assertProblem(try api.request("PATCH", "/downloads/nope", json: ["state": "paused"]), 404)
        assertProblem(try api.request("DELETE", "/downloads/nope"), 404)
        assertProblem(try api.get("/nowhere"), 404)
        let put = try api.request("PUT", "/downloads", json: [String: Any]())
        assertProblem(put, 405)
        XCTAssertEqual(put.header("Allow"), "DELETE, GET, POST, HEAD")
        assertProblem(try api.request("POST", "/downloads/abc", json: [String: Any]()), 405)
        assertProblem(try api.get("/downloads?state=sleeping"), 422, field: "state")
        assertProblem(try api.get("/downloads?limit=0"), 422, field: "limit")
    }

    func testImpossibleTransitionsAre409() throws {
        try sandbox.makeRandomFile("www/f.bin", size: 100)
        let id = try add(["url": originURL("f.bin")])
        _ = try waitForState(id, "completed")
        assertProblem(try patch(id, ["state": "paused"]), 409)
        assertProblem(try patch(id, ["state": "queued"]), 409)
        assertProblem(try patch(id, ["state": "completed"]), 422, field: "state")
        assertProblem(try patch(id, ["speed": 1]), 422, field: "speed")
        XCTAssertEqual(try download(id)["state"] as? String, "completed", "nothing changed")
    }

    func testHealthAndContract() throws {
        let health = try api.get("/healthz")
        XCTAssertEqual(health.status, 200)
        XCTAssertEqual(health.json["status"] as? String, "ok")
        let spec = try api.get("/openapi.yaml")
        XCTAssertEqual(spec.status, 200)
        XCTAssertTrue(spec.text.hasPrefix("openapi: 3.1"))
    }

    func testDownloadsSurviveARestartWithTheirIds() throws {
        try sandbox.makeRandomFile("www/p.bin", size: 100)
        let id = try add(["url": originURL("p.bin"), "start_paused": true])
        XCTAssertEqual(haul.stop(signal: SIGTERM), 0, "SIGTERM exits cleanly")
        try startHaul()
        let after = try download(id)
        XCTAssertEqual(after["state"] as? String, "paused")
        XCTAssertEqual(after["url"] as? String, originURL("p.bin"))
    }
}

/// Retried POSTs: the Idempotency-Key returns the first answer.
final class IdempotencyTests: HaulTestCase {
    func testTheSameKeyReturnsTheFirstAnswer() throws {
        try sandbox.makeRandomFile("www/i.bin", size: 100)
        let body: [String: Any] = ["url": originURL("i.bin"), "start_paused": true]
        let first = try api.request("POST", "/downloads", json: body, headers: ["Idempotency-Key": "k-1"])
        XCTAssertEqual(first.status, 201)
        let again = try api.request("POST", "/downloads", json: body, headers: ["Idempotency-Key": "k-1"])
        XCTAssertEqual(again.status, 201, "the first answer's status")
        XCTAssertEqual(again.json["id"] as? String, first.json["id"] as? String)
        // The same JSON with its members in another order and other spacing is the same request.
        let reordered = try api.request(
            "POST", "/downloads",
            body: Data("{ \"start_paused\" : true,\n \"url\": \"\(originURL("i.bin"))\" }".utf8),
            headers: ["Idempotency-Key": "k-1", "Content-Type": "application/json"])
        XCTAssertEqual(reordered.status, 201, reordered.text)
        XCTAssertEqual(reordered.json["id"] as? String, first.json["id"] as? String)
        XCTAssertEqual((try api.get("/downloads").json["downloads"] as? [Any])?.count, 1)
        // The same key with another request is refused; a new key makes a new download.
        let other = try api.request(
            "POST", "/downloads", json: ["url": originURL("i.bin"), "filename": "x"],
            headers: ["Idempotency-Key": "k-1"])
        XCTAssertEqual(other.status, 409)
        XCTAssertEqual(other.header("Content-Type"), "application/problem+json")
        let fresh = try api.request(
            "POST", "/downloads", json: ["url": originURL("i.bin"), "filename": "y"],
            headers: ["Idempotency-Key": "k-2"])
        XCTAssertEqual(fresh.status, 201)
        // Remembered across a restart.
        haul.stop(signal: SIGTERM)
        try startHaul()
        let afterRestart = try api.request("POST", "/downloads", json: body, headers: ["Idempotency-Key": "k-1"])
        XCTAssertEqual(afterRestart.json["id"] as? String, first.json["id"] as? String)
    }
}
