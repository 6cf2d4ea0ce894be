import Foundation
import HaulCore
import HaulLoop
import XCTest
@testable import HaulAPI

/// Every route of the table called in-process with a request that does what its operation says, answered as the
/// contract promises; a route added without a line here fails the first test.
final class EveryOperationTests: XCTestCase {
    /// One call: the request (with `{id}`, `{name}` and `{hook}` filled in) and the status it must get.
    private struct Call {
        let method: String
        let target: String
        var body: String?
        let status: Int
    }

    /// Keyed by the route's "METHOD pattern", in an order where each call finds what the earlier ones made.
    private let calls: [(route: String, call: Call)] = [
        (
            "POST /downloads",
            Call(
                method: "POST", target: "/downloads",
                body: #"{"url": "http://127.0.0.1:9/a.bin", "start_paused": true}"#, status: 201)
        ),
        ("GET /downloads", Call(method: "GET", target: "/downloads?state=paused&limit=5", status: 200)),
        ("GET /downloads/{id}", Call(method: "GET", target: "/downloads/{id}", status: 200)),
        (
            "PATCH /downloads/{id}",
            Call(
                method: "PATCH", target: "/downloads/{id}", body: #"{"priority": 3}"#,
                status: 200)
        ),
        (
            "POST /downloads/actions",
            Call(
                method: "POST", target: "/downloads/actions",
                body: #"{"action": "pause", "ids": ["{id}"]}"#, status: 200)
        ),
        // Not completed: the operation answers that it has no file yet.
        ("GET /downloads/{id}/file", Call(method: "GET", target: "/downloads/{id}/file", status: 409)),
        ("GET /downloads/{id}/events", Call(method: "GET", target: "/downloads/{id}/events", status: 200)),
        ("GET /events", Call(method: "GET", target: "/events", status: 200)),
        ("POST /tickets", Call(method: "POST", target: "/tickets", body: #"{"path": "/events"}"#, status: 201)),
        ("GET /stats", Call(method: "GET", target: "/stats", status: 200)),
        ("GET /version", Call(method: "GET", target: "/version", status: 200)),
        // Not started with --rpc-allow-shutdown.
        ("POST /shutdown", Call(method: "POST", target: "/shutdown", status: 409)),
        ("GET /metrics", Call(method: "GET", target: "/metrics", status: 200)),
        ("GET /settings", Call(method: "GET", target: "/settings", status: 200)),
        ("PATCH /settings", Call(method: "PATCH", target: "/settings", body: #"{"max_active": 3}"#, status: 200)),
        ("PUT /categories/{name}", Call(method: "PUT", target: "/categories/films", body: "{}", status: 201)),
        ("GET /categories", Call(method: "GET", target: "/categories", status: 200)),
        ("GET /categories/{name}", Call(method: "GET", target: "/categories/films", status: 200)),
        (
            "POST /webhooks",
            Call(
                method: "POST", target: "/webhooks",
                body: #"{"url": "http://127.0.0.1:9/hook", "category": "films"}"#, status: 201)
        ),
        ("GET /webhooks", Call(method: "GET", target: "/webhooks", status: 200)),
        ("GET /webhooks/{id}", Call(method: "GET", target: "/webhooks/{hook}", status: 200)),
        ("GET /webhooks/{id}/deliveries", Call(method: "GET", target: "/webhooks/{hook}/deliveries", status: 200)),
        ("GET /downloads/{id}/deliveries", Call(method: "GET", target: "/downloads/{id}/deliveries", status: 200)),
        ("DELETE /webhooks/{id}", Call(method: "DELETE", target: "/webhooks/{hook}", status: 204)),
        ("DELETE /categories/{name}", Call(method: "DELETE", target: "/categories/films", status: 204)),
        ("DELETE /downloads/{id}", Call(method: "DELETE", target: "/downloads/{id}", status: 204)),
        ("DELETE /downloads", Call(method: "DELETE", target: "/downloads?state=completed,failed", status: 200)),
        ("GET /", Call(method: "GET", target: "/", status: 200)),
        ("GET /ui/app.js", Call(method: "GET", target: "/ui/app.js", status: 200)),
        ("GET /ui/app.css", Call(method: "GET", target: "/ui/app.css", status: 200)),
        ("GET /healthz", Call(method: "GET", target: "/healthz", status: 200)),
        ("GET /readyz", Call(method: "GET", target: "/readyz", status: 200)),
        ("GET /openapi.yaml", Call(method: "GET", target: "/openapi.yaml", status: 200)),
        // Without --token every caller is admin already: no token is made.
        (
            "POST /tokens",
            Call(method: "POST", target: "/tokens", body: #"{"name": "ro", "scope": "read"}"#, status: 409)
        ),
        ("GET /tokens", Call(method: "GET", target: "/tokens", status: 200)),
        ("DELETE /tokens/{id}", Call(method: "DELETE", target: "/tokens/nothere", status: 404)),
        ("GET /token", Call(method: "GET", target: "/token", status: 200)),
        (
            "POST /jsonrpc",
            Call(
                method: "POST", target: "/jsonrpc",
                body: #"{"jsonrpc": "2.0", "id": 1, "method": "aria2.getGlobalStat"}"#, status: 200)
        ),
        // params: [0, 10] in base64.
        (
            "GET /jsonrpc",
            Call(
                method: "GET", target: "/jsonrpc?method=aria2.tellWaiting&id=2&params=WzAsIDEwXQ==",
                status: 200)
        ),
        // qBittorrent's calls, parameters in the query (a form or multipart body takes them too).
        ("GET /api/v2/{area}/{name}", Call(method: "GET", target: "/api/v2/app/webapiVersion", status: 200)),
        ("POST /api/v2/{area}/{name}", Call(method: "POST", target: "/api/v2/torrents/pause?hashes=all", status: 200)),
    ]

    func testEveryRouteHasACallHere() throws {
        let fixture = try APIFixture()
        let served = Set(fixture.api.routeTable.map { "\($0.method) \($0.path)" })
        XCTAssertEqual(Set(calls.map(\.route)), served)
        XCTAssertEqual(calls.count, served.count, "one call per route")
    }

    func testEveryOperationAnswersAsTheContractSays() throws {
        let fixture = try APIFixture()
        var id = ""
        var hook = ""
        for (route, call) in calls {
            let fill = { (text: String) in
                text.replacingOccurrences(of: "{id}", with: id).replacingOccurrences(of: "{hook}", with: hook)
            }
            let reply = fixture.call(call.method, fill(call.target), json: call.body.map(fill))
            let text = String(decoding: reply.body, as: UTF8.self)
            XCTAssertEqual(reply.status, call.status, "\(route): \(text.prefix(300))")
            if route == "POST /downloads" { id = fixture.json(reply)["id"] as? String ?? "" }
            if route == "POST /webhooks" { hook = fixture.json(reply)["id"] as? String ?? "" }
        }
        XCTAssertFalse(id.isEmpty)
        XCTAssertFalse(hook.isEmpty)
        // What the calls did is what a client sees afterwards.
        XCTAssertEqual(fixture.engine.count, 0, "the download was removed")
        XCTAssertEqual(fixture.engine.currentSettings.maxActive, 3)
        XCTAssertEqual(fixture.engine.webhooks.list.count, 0)
        XCTAssertEqual(fixture.engine.allCategories.count, 0)
    }
}
