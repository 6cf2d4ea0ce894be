import Foundation
import HaulLoop
import XCTest

/// Webhooks against a real receiver on loopback: each delivery a signed JSON POST, kept in the store's outbox
/// from the change it tells of until a 2xx, retried, and sent after a SIGKILL and a restart.
final class WebhookTests: HaulTestCase {
    override var serveArguments: [String] {
        ["--retry-wait", "0.05", "--webhook-retry-wait", "1", "--max-attempts", "3"]
    }

    private var receiver: HostileOrigin!
    /// How the receiver answers the next request (tests change it while haul runs).
    private let mode = LockedMode()

    final class LockedMode: @unchecked Sendable {
        enum Mode { case accept, fail, hang }
        private let lock = NSLock()
        private var value = Mode.accept
        var current: Mode {
            get { lock.withLock { value } }
            set { lock.withLock { value = newValue } }
        }
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        let mode = self.mode
        receiver = try HostileOrigin { _ in
            switch mode.current {
            case .accept: return .send(HostileOrigin.reply("204 No Content", headers: ["Connection: close"]))
            case .fail:
                return .send(
                    HostileOrigin.reply(
                        "500 Internal Server Error",
                        headers: ["Content-Length: 0", "Connection: close"]))
            case .hang: return .silence
            }
        }
    }

    override func tearDownWithError() throws {
        receiver?.stop()
        receiver = nil
        try super.tearDownWithError()
    }

    private func addWebhook(_ body: [String: Any]) throws -> (id: String, secret: String) {
        let reply = try api.request("POST", "/webhooks", json: body)
        XCTAssertEqual(reply.status, 201, reply.text)
        let id = try XCTUnwrap(reply.json["id"] as? String)
        XCTAssertEqual(reply.header("Location"), "/webhooks/\(id)")
        return (id, try XCTUnwrap(reply.json["secret"] as? String))
    }

    /// Waits until the webhook's deliveries are `count`, each stored as delivered: nothing more is due to be sent.
    private func waitForAllDelivered(_ hook: String, count: Int) throws {
        try waitFor("\(count) deliveries stored as delivered") {
            let listed = try api.get("/webhooks/\(hook)/deliveries").json["deliveries"] as? [[String: Any]] ?? []
            return listed.count == count && listed.allSatisfy { $0["state"] as? String == "delivered" }
        }
    }

    /// The POSTs the receiver got, as JSON bodies, after checking each one's signature and headers.
    private func deliveries(secret: String, file: StaticString = #filePath, line: UInt = #line) -> [[String: Any]] {
        receiver.requests.filter { $0.method == "POST" }.compactMap { request in
            XCTAssertEqual(request.headers["content-type"], "application/json", file: file, line: line)
            let signature = request.headers["haul-signature"] ?? ""
            let parts = Dictionary(
                signature.split(separator: ",").compactMap { part -> (String, String)? in
                    let pair = part.split(separator: "=", maxSplits: 1)
                    return pair.count == 2 ? (String(pair[0]), String(pair[1])) : nil
                }, uniquingKeysWith: { $1 })
            let timestamp = parts["t"] ?? ""
            let expected = Digest.hex(
                Digest.hmacSHA256(
                    key: Array(secret.utf8),
                    message: Array("\(timestamp).".utf8) + request.body))
            XCTAssertEqual(parts["v1"], expected, "signature of \(signature)", file: file, line: line)
            XCTAssertLessThan(abs((Double(timestamp) ?? 0) - Date().timeIntervalSince1970), 300, file: file, line: line)
            let json = (try? JSONSerialization.jsonObject(with: Data(request.body))) as? [String: Any]
            XCTAssertNotNil(json, String(decoding: request.body, as: UTF8.self), file: file, line: line)
            XCTAssertEqual(request.headers["haul-delivery"], json?["id"] as? String, file: file, line: line)
            XCTAssertEqual(request.headers["haul-event"], json?["event"] as? String, file: file, line: line)
            return json
        }
    }

    func testEachEventAskedForArrivesSignedWithTheDownload() throws {
        let hook = try addWebhook(["url": receiver.baseURL + "/hook", "events": ["created", "completed", "removed"]])
        XCTAssertTrue(hook.secret.hasPrefix("whsec_"), hook.secret)
        // The secret is shown once: never in a listing or a GET.
        let listed = try api.get("/webhooks")
        XCTAssertEqual(listed.status, 200)
        XCTAssertFalse(listed.text.contains(hook.secret), listed.text)
        XCTAssertEqual(
            (listed.json["webhooks"] as? [[String: Any]])?.first?["events"] as? [String],
            ["created", "completed", "removed"])
        XCTAssertNil(try api.get("/webhooks/\(hook.id)").json["secret"])

        let hash = try sandbox.makeRandomFile("www/told.bin", size: 300_000)
        let id = try add(["url": originURL("told.bin")])
        try waitForState(id, "completed")
        XCTAssertEqual(try api.request("DELETE", "/downloads/\(id)").status, 204)
        try waitFor("three deliveries") { deliveries(secret: hook.secret).count >= 3 }
        // Every delivery stored as delivered: nothing more is due to be sent.
        try waitForAllDelivered(hook.id, count: 3)
        let received = deliveries(secret: hook.secret)
        XCTAssertEqual(received.compactMap { $0["event"] as? String }.sorted(), ["completed", "created", "removed"])
        XCTAssertEqual(Set(received.compactMap { $0["id"] as? String }).count, 3, "one id per delivery")
        for body in received {
            let download = try XCTUnwrap(body["download"] as? [String: Any])
            XCTAssertEqual(download["id"] as? String, id)
            XCTAssertEqual(body["webhook_id"] as? String, hook.id)
        }
        let completed = try XCTUnwrap(
            received.first { $0["event"] as? String == "completed" }?["download"]
                as? [String: Any])
        XCTAssertEqual(completed["state"] as? String, "completed")
        XCTAssertEqual(try sha256(sandbox.file("downloads/" + (completed["path"] as? String ?? ""))), hash)

        // What was sent, as the server recorded it.
        try waitFor("the deliveries to be recorded as delivered") {
            let list = try api.get("/webhooks/\(hook.id)/deliveries").json["deliveries"] as? [[String: Any]] ?? []
            return list.count == 3 && list.allSatisfy { $0["state"] as? String == "delivered" }
        }
        let list = try api.get("/webhooks/\(hook.id)/deliveries").json["deliveries"] as? [[String: Any]] ?? []
        XCTAssertEqual(list.compactMap { $0["last_status"] as? Int }, [204, 204, 204])
        XCTAssertEqual(Set(list.compactMap { $0["id"] as? String }), Set(received.compactMap { $0["id"] as? String }))

        XCTAssertEqual(try api.request("DELETE", "/webhooks/\(hook.id)").status, 204)
        XCTAssertEqual(try api.get("/webhooks/\(hook.id)").status, 404)
        XCTAssertEqual(try api.request("DELETE", "/webhooks/\(hook.id)").status, 404)
    }

    func testAFailingReceiverIsTriedAgainUntilItAnswers() throws {
        mode.current = .fail
        let hook = try addWebhook(["url": receiver.baseURL + "/hook", "events": ["created"]])
        let id = try add(["url": "http://127.0.0.1:9/later.bin", "start_paused": true])
        try waitFor("two failed attempts") { receiver.requests.count >= 2 }
        let pending = try XCTUnwrap(
            (try api.get("/webhooks/\(hook.id)/deliveries").json["deliveries"]
                as? [[String: Any]])?.first)
        XCTAssertEqual(pending["state"] as? String, "pending")
        XCTAssertTrue(try api.get("/metrics").text.contains("haul_webhook_deliveries{state=\"pending\"} 1"))
        XCTAssertEqual(pending["last_status"] as? Int, 500)
        XCTAssertTrue((pending["last_error"] as? String ?? "").contains("500"), "\(pending)")
        XCTAssertNotNil(pending["next_attempt_at"] as? String)
        mode.current = .accept
        try waitFor("the delivery to go through") {
            (try api.get("/webhooks/\(hook.id)/deliveries").json["deliveries"] as? [[String: Any]])?.first?["state"]
                as? String == "delivered"
        }
        XCTAssertTrue(try api.get("/metrics").text.contains("haul_webhook_deliveries{state=\"delivered\"} 1"))
        let all = deliveries(secret: hook.secret)
        XCTAssertGreaterThanOrEqual(all.count, 3)
        XCTAssertEqual(Set(all.compactMap { $0["id"] as? String }).count, 1, "every attempt carries the same id")
        XCTAssertEqual((all.last?["download"] as? [String: Any])?["id"] as? String, id)
        // Attempts wait longer each time (1 s, then 2 s with --webhook-retry-wait 1): not a tight loop.
        XCTAssertLessThan(all.count, 12)
    }

    func testADeliveryCutOffByAKillArrivesAfterTheRestartOnceWithAValidSignature() throws {
        mode.current = .hang
        let hook = try addWebhook(["url": receiver.baseURL + "/hook", "events": ["completed"]])
        let hash = try sandbox.makeRandomFile("www/crash.bin", size: 200_000)
        let id = try add(["url": originURL("crash.bin")])
        // The state change is stored and its delivery is in flight (the receiver holds it): then SIGKILL.
        try waitFor("the attempt to reach the receiver") { receiver.requests.count == 1 }
        XCTAssertEqual(haul.stop(signal: SIGKILL), SIGKILL)
        mode.current = .accept
        try startHaul()
        try waitFor("the delivery after the restart") {
            (try api.get("/webhooks/\(hook.id)/deliveries").json["deliveries"] as? [[String: Any]])?.first?["state"]
                as? String == "delivered"
        }
        let all = deliveries(secret: hook.secret)
        XCTAssertEqual(all.count, 2, "the cut-off attempt and the one after the restart")
        XCTAssertEqual(Set(all.compactMap { $0["id"] as? String }).count, 1, "one delivery id")
        let download = try XCTUnwrap(all.last?["download"] as? [String: Any])
        XCTAssertEqual(download["id"] as? String, id)
        XCTAssertEqual(download["state"] as? String, "completed")
        XCTAssertEqual(try sha256(sandbox.file("downloads/crash.bin")), hash)
    }

    func testAKillBeforeAnyAttemptLosesNothing() throws {
        // The receiver is down: every change waits in the outbox. Three downloads, then SIGKILL, then it is up.
        receiver.stop()
        let port = receiver.port
        let hook = try addWebhook(["url": "http://127.0.0.1:\(port)/hook", "events": ["created", "removed"]])
        var ids: [String] = []
        for index in 0..<3 { ids.append(try add(["url": "http://127.0.0.1:9/f\(index).bin", "start_paused": true])) }
        XCTAssertEqual(try api.request("DELETE", "/downloads/\(ids[0])").status, 204)
        XCTAssertEqual(haul.stop(signal: SIGKILL), SIGKILL)
        receiver = try HostileOrigin(port: port) { _ in
            .send(HostileOrigin.reply("200 OK", headers: ["Content-Length: 0", "Connection: close"]))
        }
        try startHaul()
        try waitFor("four deliveries") {
            Set(deliveries(secret: hook.secret).compactMap { $0["id"] as? String }).count == 4
        }
        let events = deliveries(secret: hook.secret).map {
            "\($0["event"] ?? "")" + ":" + "\(($0["download"] as? [String: Any])?["id"] ?? "")"
        }
        XCTAssertEqual(Set(events), Set(ids.map { "created:" + $0 } + ["removed:" + ids[0]]))
    }

    func testTheOutboundAddressPolicyAppliesToReceivers() throws {
        haul.stop()
        try startHaul(extra: ["--deny-private-networks"])
        let hook = try addWebhook(["url": receiver.baseURL + "/hook", "events": ["created"]])
        _ = try add(["url": "http://127.0.0.1:9/x.bin", "start_paused": true])
        try waitFor("a refused attempt") {
            let list = try api.get("/webhooks/\(hook.id)/deliveries").json["deliveries"] as? [[String: Any]] ?? []
            return (list.first?["attempts"] as? Int ?? 0) >= 1
        }
        let delivery = try XCTUnwrap(
            (try api.get("/webhooks/\(hook.id)/deliveries").json["deliveries"]
                as? [[String: Any]])?.first)
        XCTAssertEqual(delivery["state"] as? String, "pending")
        XCTAssertTrue(delivery["last_status"] is NSNull, "\(delivery)")
        XCTAssertTrue(receiver.requests.isEmpty, "nothing reached a loopback receiver")
    }

    func testAWebhookOfACategoryHearsOnlyItsDownloads() throws {
        XCTAssertEqual(try api.request("PUT", "/categories/films", json: [:]).status, 201)
        let hook = try addWebhook(["url": receiver.baseURL + "/hook", "events": ["created"], "category": "films"])
        _ = try add(["url": "http://127.0.0.1:9/other.bin", "start_paused": true])
        let film = try add(["url": "http://127.0.0.1:9/film.bin", "start_paused": true, "category": "films"])
        try waitFor("the film's delivery") { !deliveries(secret: hook.secret).isEmpty }
        // The other download's change was stored before the film's; the webhook has one delivery, delivered.
        try waitForAllDelivered(hook.id, count: 1)
        let received = deliveries(secret: hook.secret)
        XCTAssertEqual(received.count, 1)
        XCTAssertEqual((received.first?["download"] as? [String: Any])?["id"] as? String, film)
        XCTAssertEqual((received.first?["download"] as? [String: Any])?["category"] as? String, "films")
    }

    func testBadWebhooksAreRefusedWithTheFieldsNamed() throws {
        let bad = try api.request(
            "POST", "/webhooks",
            json: [
                "url": "ftp://example.com/x", "events": ["finished"],
                "colour": "red",
            ])
        XCTAssertEqual(bad.status, 422, bad.text)
        XCTAssertEqual(bad.header("Content-Type"), "application/problem+json")
        let fields = Set((bad.json["errors"] as? [[String: Any]] ?? []).compactMap { $0["field"] as? String })
        XCTAssertEqual(fields, ["url", "events", "colour"])
        XCTAssertEqual(try api.request("POST", "/webhooks", json: ["events": []]).status, 422)
        XCTAssertEqual(
            try api.request(
                "POST", "/webhooks",
                json: [
                    "url": receiver.baseURL,
                    "category": "../up",
                ]
            ).status, 422)
        XCTAssertEqual(try api.get("/webhooks/nothere/deliveries").status, 404)
        XCTAssertEqual((try api.get("/webhooks").json["webhooks"] as? [[String: Any]])?.count, 0)
        // The default events: created, completed, failed, removed (not every state change).
        let made = try api.request("POST", "/webhooks", json: ["url": receiver.baseURL + "/all"])
        XCTAssertEqual(made.json["events"] as? [String], ["created", "completed", "failed", "removed"])
    }
}
