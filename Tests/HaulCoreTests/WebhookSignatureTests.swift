import Foundation
import HaulCore
import HaulLoop
import XCTest

/// The webhook signature and backoff, as a receiver would check them.
final class WebhookSignatureTests: XCTestCase {
    func testHMACMatchesRFC4231() {
        // RFC 4231, test case 2.
        XCTAssertEqual(
            Digest.hex(
                Digest.hmacSHA256(
                    key: Array("Jefe".utf8),
                    message: Array("what do ya want for nothing?".utf8))),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    func testTheSignatureCoversTheTimestampAndTheBody() {
        let body = Array("{\"event\":\"completed\"}".utf8)
        let header = Webhook.signature(secret: "whsec_k", timestamp: 1_800_000_000, body: body)
        XCTAssertEqual(
            header,
            "t=1800000000,v1="
                + Digest.hex(
                    Digest.hmacSHA256(
                        key: Array("whsec_k".utf8), message: Array("1800000000.".utf8) + body)))
        XCTAssertNotEqual(header, Webhook.signature(secret: "whsec_k", timestamp: 1_800_000_001, body: body))
        XCTAssertNotEqual(header, Webhook.signature(secret: "whsec_j", timestamp: 1_800_000_000, body: body))
        XCTAssertTrue(Webhook.newSecret().hasPrefix("whsec_"))
        XCTAssertEqual(Webhook.newSecret().count, 6 + 64)
    }

    func testBackoffDoublesUpToAnHour() {
        XCTAssertEqual(WebhookDelivery.backoff(attempts: 1, base: 5, random: 0), 5)
        XCTAssertEqual(WebhookDelivery.backoff(attempts: 4, base: 5, random: 0), 40)
        XCTAssertEqual(WebhookDelivery.backoff(attempts: 40, base: 5, random: 0), 3600)
        XCTAssertEqual(WebhookDelivery.backoff(attempts: 2, base: 5, random: 1), 12, accuracy: 1e-9)
    }

    func testAWebhookWantsItsEventsAndItsCategory() {
        let hook = Webhook(
            id: "w", url: "http://h/", secret: "s", events: [.completed], category: "tv",
            createdAt: Date())
        XCTAssertTrue(hook.wants(.completed, category: "tv"))
        XCTAssertFalse(hook.wants(.completed, category: nil))
        XCTAssertFalse(hook.wants(.failed, category: "tv"))
        var all = hook
        all.category = nil
        XCTAssertTrue(all.wants(.completed, category: "films"))
    }
}
