import Foundation
import XCTest

/// Webhooks do not hold each other up, nor hammer a failing receiver: each has slots of its own, a failing one
/// rests, and webhook retries keep their own schedule whatever `--retry-wait` says.
final class WebhookIsolationTests: HaulTestCase {
    /// Downloads retried at once (`--retry-wait 0`), webhooks left at their own default.
    override var serveArguments: [String] { ["--retry-wait", "0", "--max-attempts", "3"] }

    private var receivers: [HostileOrigin] = []

    override func tearDownWithError() throws {
        for receiver in receivers { receiver.stop() }
        receivers = []
        try super.tearDownWithError()
    }

    private func receiver(_ behaviour: HostileOrigin.Behaviour) throws -> HostileOrigin {
        let made = try HostileOrigin { _ in behaviour }
        receivers.append(made)
        return made
    }

    private func addWebhook(_ url: String) throws {
        let reply = try api.request("POST", "/webhooks", json: ["url": url, "events": ["created"]])
        XCTAssertEqual(reply.status, 201, reply.text)
    }

    func testAFailingReceiverIsNotHammeredWhateverTheRetryWait() throws {
        let failing = try receiver(
            .send(
                HostileOrigin.reply(
                    "500 Internal Server Error",
                    headers: ["Content-Length: 0", "Connection: close"])))
        try addWebhook(failing.baseURL + "/hook")
        for index in 0..<5 { _ = try add(["url": "http://127.0.0.1:9/r\(index).bin", "start_paused": true]) }
        try waitFor("the first attempt") { !failing.requests.isEmpty }
        Thread.sleep(forTimeInterval: 3)
        // Five deliveries due at once, a receiver answering 500: one attempt, then the webhook rests 5 s (it was
        // 3,905 attempts in 3 s with --retry-wait 0).
        XCTAssertLessThanOrEqual(failing.requests.count, 2, "\(failing.requests.count) attempts in 3 s")
        let listed = try api.get("/webhooks").json["webhooks"] as? [[String: Any]] ?? []
        let id = try XCTUnwrap(listed.first?["id"] as? String)
        let deliveries = try api.get("/webhooks/\(id)/deliveries").json["deliveries"] as? [[String: Any]] ?? []
        XCTAssertEqual(deliveries.count, 5)
        XCTAssertTrue(deliveries.allSatisfy { $0["state"] as? String == "pending" })
    }

    func testADeadReceiverDoesNotDelayAHealthyOne() throws {
        let healthy = try receiver(.send(HostileOrigin.reply("204 No Content", headers: ["Connection: close"])))
        // Twenty receivers that accept and never answer: each attempt holds a slot 15 s.
        for _ in 0..<20 { try addWebhook(try receiver(.silence).baseURL + "/hook") }
        try addWebhook(healthy.baseURL + "/hook")
        for index in 0..<20 { _ = try add(["url": "http://127.0.0.1:9/d\(index).bin", "start_paused": true]) }
        // All twenty reach the healthy receiver while the dead ones hold their own slots (one in five in 45 s
        // when every webhook shared eight).
        try waitFor("twenty deliveries to the healthy receiver", timeout: 10) {
            healthy.requests.filter { $0.method == "POST" }.count >= 20
        }
        let ids = Set(healthy.requests.compactMap { $0.headers["haul-delivery"] })
        XCTAssertEqual(ids.count, 20)
        // The dead receivers got two attempts each at most: their slots, not the others'.
        for dead in receivers.dropFirst() { XCTAssertLessThanOrEqual(dead.requests.count, 2) }
    }
}
