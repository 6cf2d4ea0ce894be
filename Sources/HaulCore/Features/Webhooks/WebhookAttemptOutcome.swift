import FoundationEssentials
import HaulLoop

/// What one webhook attempt's end does to its delivery and to its webhook's slots: a pure step on the times it is
/// given (wall time for the delivery's schedule, monotonic time for the webhook's rest), so the retry schedule,
/// the rest of a failing receiver and the give-up after a day are tested as a table on the manual clock.
struct WebhookAttemptOutcome: Equatable {
    var delivery: WebhookDelivery
    var slots: WebhookSlots
    /// The delivery was given up on: it would be retried past `WebhookDelivery.retention`.
    var gaveUp = false

    /// The attempt answered `status` (nil: no answer) with `failure` (nil: the transfer ended cleanly), at wall
    /// time `now` and monotonic time `uptime`. `baseWait` is the first retry's wait, `maxRest` the longest rest
    /// of a failing webhook, `random` in 0..<1 spreads retries (jitter).
    static func after(
        _ delivery: WebhookDelivery, slots: WebhookSlots, status: Int?, failure: TransferFailure?,
        message: String, now: Date, uptime: Double, baseWait: Double, maxRest: Double,
        random: Double
    ) -> WebhookAttemptOutcome {
        var outcome = WebhookAttemptOutcome(delivery: delivery, slots: slots)
        outcome.delivery.attempts += 1
        outcome.delivery.lastAttemptAt = now
        outcome.delivery.lastStatus = status
        outcome.slots.inFlight = max(0, slots.inFlight - 1)
        // A 2xx whose body was cut short was still received: the receiver said so before the body.
        if let status, (200..<300).contains(status), failure == nil || failure == .cutOff {
            outcome.delivery.state = .delivered
            outcome.delivery.lastError = nil
            outcome.slots.failures = 0
            outcome.slots.restUntil = -.infinity
            return outcome
        }
        outcome.delivery.lastError =
            status.map { "the receiver answered HTTP \($0)" }
            ?? (message.isEmpty ? "no answer" : message)
        let wait = WebhookDelivery.backoff(attempts: outcome.delivery.attempts, base: baseWait, random: random)
        if now.timeIntervalSince(delivery.createdAt) + wait > WebhookDelivery.retention {
            outcome.delivery.state = .failed
            outcome.gaveUp = true
        } else {
            outcome.delivery.nextAttemptAt = now.addingTimeInterval(wait)
        }
        // A failure rests the webhook: its next attempt, of any delivery, waits (doubling, up to `maxRest`).
        outcome.slots.failures += 1
        outcome.slots.restUntil = uptime + min(maxRest, baseWait * Double(1 << min(outcome.slots.failures - 1, 16)))
        return outcome
    }
}
