/// When a node of a shared store renews its leases and how long it may act on what it holds, on its own
/// monotonic clock: a pure value, so renewal, loss and a node woken past its lease are tested as a table.
///
/// A renewal sent at `t` that the store accepts makes the leases hold until `t + lease` by the store's clock; the
/// node counts them as held until `t + 0.8 lease` by its own, a margin for the two clocks' drift. Renewals go out
/// every third of a lease, so two may fail before the margin is reached.
struct LeaseSchedule: Equatable {
    let lease: Double
    /// When the last renewal that went through was sent.
    private(set) var renewedAt: Double
    /// When the last renewal was sent, whatever came of it.
    private(set) var sentAt: Double

    init(lease: Double, now: Double) {
        self.lease = lease
        renewedAt = now
        sentAt = now
    }

    /// Whether the node may still act (write a byte) on what it holds at `now`.
    func holds(at now: Double) -> Bool { now < renewedAt + lease * 0.8 }

    /// Whether a renewal is due at `now`: a third of a lease since the last one was sent.
    func renewalDue(at now: Double) -> Bool { now - sentAt >= lease / 3 }

    /// Whether what it runs must stop at `now`: no renewal went through for most of a lease, and another node may
    /// hold it by now.
    func lapsed(at now: Double) -> Bool { now - renewedAt > lease * 0.8 }

    mutating func sent(at now: Double) { sentAt = now }

    /// The renewal sent at `sentAt` went through.
    mutating func renewed(sentAt: Double) { renewedAt = max(renewedAt, sentAt) }
}
