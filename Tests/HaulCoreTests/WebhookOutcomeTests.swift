import Foundation
import HaulLoop
import HaulTestSupport
import XCTest
@testable import HaulCore

/// A webhook delivery's life after each attempt, without sockets: on the manual clock's times, its retries wait
/// 5 s doubling to an hour, its webhook rests while it fails, a success clears both, and after a day it is given
/// up on.
final class WebhookOutcomeTests: XCTestCase {
    private let created = Date(timeIntervalSince1970: 1_800_000_000)

    private func delivery() -> WebhookDelivery {
        WebhookDelivery(id: "d1", webhookID: "w1", event: .completed, downloadID: "x", body: "{}", createdAt: created)
    }

    private func after(
        _ delivery: WebhookDelivery, _ slots: WebhookSlots = WebhookSlots(inFlight: 1),
        status: Int?, failure: TransferFailure? = nil, at clock: ManualClock
    ) -> WebhookAttemptOutcome {
        WebhookAttemptOutcome.after(
            delivery, slots: slots, status: status, failure: failure, message: "",
            now: clock.wallTime, uptime: clock.now, baseWait: 5, maxRest: 300, random: 0)
    }

    func testAFailingReceiverIsRetriedOnTheScheduleUntilADayHasPassed() {
        let clock = ManualClock()
        clock.wallStart = created
        var current = delivery()
        var slots = WebhookSlots(inFlight: 1)
        var waits: [Double] = []
        var rests: [Double] = []
        while current.state == .pending {
            let outcome = after(current, slots, status: 500, at: clock)
            XCTAssertEqual(outcome.delivery.lastError, "the receiver answered HTTP 500")
            XCTAssertEqual(outcome.slots.inFlight, 0)
            rests.append(outcome.slots.restUntil - clock.now)
            guard outcome.delivery.state == .pending else {
                XCTAssertTrue(outcome.gaveUp)
                current = outcome.delivery
                break
            }
            waits.append(outcome.delivery.nextAttemptAt.timeIntervalSince(clock.wallTime))
            // The next attempt comes when it is due, on the clock.
            clock.advance(outcome.delivery.nextAttemptAt.timeIntervalSince(clock.wallTime))
            (current, slots) = (outcome.delivery, outcome.slots)
            slots.inFlight = 1
        }
        XCTAssertEqual(Array(waits.prefix(11)), [5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600])
        XCTAssertTrue(waits.dropFirst(10).allSatisfy { $0 == 3600 }, "an hour at most")
        XCTAssertEqual(Array(rests.prefix(8)), [5, 10, 20, 40, 80, 160, 300, 300], "the webhook rests up to 5 min")
        XCTAssertEqual(current.state, .failed)
        XCTAssertLessThanOrEqual(clock.wallTime.timeIntervalSince(created), WebhookDelivery.retention)
        XCTAssertGreaterThan(
            clock.wallTime.timeIntervalSince(created) + 3600, WebhookDelivery.retention,
            "given up only when the next wait would pass the day")
        XCTAssertEqual(current.attempts, waits.count + 1)
    }

    func testASuccessDeliversAndEndsTheWebhooksRest() {
        let clock = ManualClock()
        clock.wallStart = created
        clock.advance(30)
        let failing = WebhookSlots(inFlight: 2, failures: 4, restUntil: 100)
        let outcome = after(delivery(), failing, status: 204, at: clock)
        XCTAssertEqual(outcome.delivery.state, .delivered)
        XCTAssertEqual(outcome.delivery.attempts, 1)
        XCTAssertEqual(outcome.delivery.lastStatus, 204)
        XCTAssertEqual(outcome.delivery.lastAttemptAt, created.addingTimeInterval(30))
        XCTAssertEqual(outcome.slots, WebhookSlots(inFlight: 1, failures: 0, restUntil: -.infinity))
        // Answered 2xx, then the body was cut: received all the same. Any other failure after a 2xx is not.
        XCTAssertEqual(after(delivery(), status: 200, failure: .cutOff, at: clock).delivery.state, .delivered)
        XCTAssertEqual(after(delivery(), status: 200, failure: .timeout, at: clock).delivery.state, .pending)
        let silent = after(delivery(), status: nil, failure: .connect, at: clock)
        XCTAssertEqual(silent.delivery.lastError, "no answer")
        XCTAssertNil(silent.delivery.lastStatus)
        XCTAssertEqual(silent.delivery.nextAttemptAt, created.addingTimeInterval(35))
    }
}
