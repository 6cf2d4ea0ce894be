import Foundation
import HaulCore
import HaulLoop
import XCTest
@testable import HaulAPI

/// Every error status the API answers, the token gate and CORS, by calling `API.handle` directly.
final class APIInProcessTests: XCTestCase {
    private func problemType(_ fixture: APIFixture, _ response: HTTPResponse) -> String? {
        XCTAssertEqual(response.header("Content-Type"), "application/problem+json")
        return fixture.json(response)["type"] as? String
    }

    func testErrorStatuses() throws {
        let fixture = try APIFixture()
        let id = fixture.addPaused()
        XCTAssertFalse(id.isEmpty)
        let big = "{\"url\":\"http://h/" + String(repeating: "a", count: 1 << 20) + "\"}"
        let cases: [(String, String, String?, [(String, String)], Int, String)] = [
            ("POST", "/downloads", "{\"url\":", [], 400, "malformed-request"),
            ("GET", "/stats", nil, [("Host", "a, b")], 400, "malformed-request"),
            ("GET", "/nowhere", nil, [], 404, "not-found"),
            ("GET", "/downloads/nope", nil, [], 404, "not-found"),
            ("PUT", "/downloads", "{}", [], 405, "method-not-allowed"),
            ("PATCH", "/downloads/\(id)", "{\"state\":\"completed\"}", [], 422, "validation"),
            ("POST", "/downloads", big, [], 413, "body-too-large"),
            (
                "POST", "/downloads", "{\"url\":\"http://h/x\"}", [("Content-Type", "text/plain")], 415,
                "unsupported-media-type"
            ),
            ("POST", "/downloads", "{\"url\":\"gopher://h/x\",\"connections\":99}", [], 422, "validation"),
            ("POST", "/downloads", "{\"url\":\"http://h/x\",\"size\":1125899906842624}", [], 507, "insufficient-space"),
        ]
        for (method, target, body, headers, status, type) in cases {
            let response = fixture.call(method, target, json: body, headers: headers)
            XCTAssertEqual(response.status, status, "\(method) \(target)")
            XCTAssertEqual(problemType(fixture, response), "urn:haul:problem:\(type)", "\(method) \(target)")
        }
        XCTAssertEqual(fixture.call("PUT", "/downloads", json: "{}").header("Allow"), "DELETE, GET, POST, HEAD")
        XCTAssertEqual(fixture.json(fixture.call("GET", "/stats"))["downloads"] as? Int, 1, "nothing else was added")
    }

    func testConflicts() throws {
        let fixture = try APIFixture()
        let key = [("Idempotency-Key", "k1")]
        let first = fixture.call(
            "POST", "/downloads", json: "{\"url\":\"http://h/a\",\"start_paused\":true}",
            headers: key)
        XCTAssertEqual(first.status, 201)
        let again = fixture.call(
            "POST", "/downloads", json: "{\"start_paused\":true, \"url\":\"http://h/a\"}",
            headers: key)
        XCTAssertEqual(again.status, 201, "the same request under the same key gets the first answer")
        let other = fixture.call("POST", "/downloads", json: "{\"url\":\"http://h/b\"}", headers: key)
        XCTAssertEqual(other.status, 409)
        XCTAssertEqual(problemType(fixture, other), "urn:haul:problem:invalid-transition")
        let id = fixture.json(first)["id"] as? String ?? ""
        // A paused download cannot be paused "again" into another state; a completed one cannot be paused.
        XCTAssertEqual(fixture.call("PATCH", "/downloads/\(id)", json: "{\"state\":\"paused\"}").status, 200)
        XCTAssertEqual(fixture.call("DELETE", "/downloads/\(id)").status, 204)
        XCTAssertEqual(fixture.call("PATCH", "/downloads/\(id)", json: "{\"state\":\"queued\"}").status, 404)
    }

    func testTheTokenGate() throws {
        let token = "in-process-token-0123456789"
        let fixture = try APIFixture(access: AccessPolicy(token: token))
        let bearer = [("Authorization", "Bearer \(token)")]
        for target in ["/downloads", "/stats", "/metrics", "/openapi.yaml", "/events", "/nowhere"] {
            XCTAssertEqual(fixture.call("GET", target).status, 401, target)
        }
        for target in ["/", "/ui/app.js", "/ui/app.css", "/healthz"] {
            XCTAssertEqual(fixture.call("GET", target).status, 200, "\(target) is open")
        }
        XCTAssertEqual(fixture.call("GET", "/stats", headers: bearer).status, 200)
        // The query token is for event streams only.
        XCTAssertEqual(fixture.call("GET", "/events?access_token=\(token)").status, 200)
        XCTAssertEqual(fixture.call("GET", "/stats?access_token=\(token)").status, 401)
        // Ten wrong tokens from one address: past them no secret from it is looked at, the right one neither (its
        // answer would tell a right guess from a wrong one); other addresses are untouched.
        let wrong = [("Authorization", "Bearer wrong-token-wrong-token")]
        for _ in 0..<10 { XCTAssertEqual(fixture.call("GET", "/stats", headers: wrong, peer: "10.0.0.1").status, 401) }
        let limited = fixture.call("GET", "/stats", headers: wrong, peer: "10.0.0.1")
        XCTAssertEqual(limited.status, 429)
        XCTAssertNotNil(limited.header("Retry-After"))
        XCTAssertEqual(fixture.call("GET", "/stats", headers: bearer, peer: "10.0.0.1").status, 429)
        XCTAssertEqual(fixture.call("GET", "/stats", headers: bearer, peer: "10.0.0.2").status, 200)
        XCTAssertEqual(fixture.call("GET", "/stats", headers: wrong, peer: "10.0.0.2").status, 401)
    }

    func testHostsAndOrigins() throws {
        let fixture = try APIFixture(
            access: AccessPolicy(
                allowedHosts: AccessPolicy.loopbackHosts,
                corsOrigins: ["http://dash.example:3000"]))
        XCTAssertEqual(fixture.call("GET", "/stats", headers: [("Host", "evil.example")]).status, 403)
        XCTAssertEqual(fixture.call("GET", "/stats", headers: [("Host", "127.0.0.1:8080@evil.example")]).status, 400)
        let body = "{\"url\":\"http://h/x\",\"start_paused\":true}"
        let foreign = fixture.call("POST", "/downloads", json: body, headers: [("Origin", "http://evil.example")])
        XCTAssertEqual(foreign.status, 403)
        XCTAssertEqual(
            fixture.call("GET", "/stats", headers: [("Origin", "http://evil.example")]).status, 200,
            "a read from another origin is answered (without CORS headers the browser hides it)")
        let allowed = fixture.call("POST", "/downloads", json: body, headers: [("Origin", "http://dash.example:3000")])
        XCTAssertEqual(allowed.status, 201)
        XCTAssertEqual(
            allowed.headers.filter { $0.name == "Access-Control-Allow-Origin" }.map(\.value),
            ["http://dash.example:3000"])
        let preflight = fixture.call(
            "OPTIONS", "/downloads",
            headers: [
                ("Origin", "http://dash.example:3000"),
                ("Access-Control-Request-Method", "POST"),
            ])
        XCTAssertEqual(preflight.status, 204)
        for name in ["Access-Control-Allow-Origin", "Vary", "Access-Control-Allow-Methods"] {
            XCTAssertEqual(preflight.headers.filter { $0.name == name }.count, 1, name)
        }
        let refused = fixture.call(
            "OPTIONS", "/downloads",
            headers: [
                ("Origin", "http://evil.example"),
                ("Access-Control-Request-Method", "POST"),
            ])
        XCTAssertNil(refused.header("Access-Control-Allow-Origin"))
        XCTAssertEqual(fixture.json(fixture.call("GET", "/stats"))["downloads"] as? Int, 1)
    }

    func testListingPagesAndConditionalAnswers() throws {
        let fixture = try APIFixture()
        let ids = (0..<5).map { fixture.addPaused("http://127.0.0.1:9/\($0).bin") }
        let first = fixture.call("GET", "/downloads?limit=2")
        let page = fixture.json(first)
        XCTAssertEqual(
            (page["downloads"] as? [[String: Any]])?.compactMap { $0["id"] as? String }, Array(ids.prefix(2)))
        let cursor = try XCTUnwrap(page["next_cursor"] as? String)
        let rest = fixture.json(fixture.call("GET", "/downloads?limit=10&cursor=\(cursor)"))
        XCTAssertEqual(
            (rest["downloads"] as? [[String: Any]])?.compactMap { $0["id"] as? String },
            Array(ids.dropFirst(2)))
        XCTAssertTrue(rest["next_cursor"] is NSNull)
        let tag = try XCTUnwrap(first.header("ETag"))
        XCTAssertEqual(fixture.call("GET", "/downloads?limit=2", headers: [("If-None-Match", tag)]).status, 304)
    }
}
