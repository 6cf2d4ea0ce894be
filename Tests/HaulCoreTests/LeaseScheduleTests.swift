import XCTest
@testable import HaulCore

/// A node's leases on its own clock, without a store or sockets: renewals every third of a lease, the leases
/// held to 0.8 of one after the last renewal that went through, lost when renewals keep failing, and a node
/// woken past its lease (SIGSTOP, a frozen VM) acting on nothing until it has renewed.
final class LeaseScheduleTests: XCTestCase {
    func testRenewalsGoOutEveryThirdOfALeaseAndHoldItsFourFifths() {
        var leases = LeaseSchedule(lease: 30, now: 100)
        // (time, renewal due, holds) for a node whose renewals all go through when sent.
        var seen: [(Double, Bool, Bool)] = []
        for now in stride(from: 100.0, through: 160, by: 5) {
            let due = leases.renewalDue(at: now)
            seen.append((now, due, leases.holds(at: now)))
            if due {
                leases.sent(at: now)
                leases.renewed(sentAt: now)
            }
        }
        XCTAssertEqual(seen.filter(\.1).map(\.0), [110, 120, 130, 140, 150, 160], "every 10 s of a 30 s lease")
        XCTAssertTrue(seen.allSatisfy(\.2), "never lapses while renewals go through")
    }

    func testFailingRenewalsLoseTheLeasesAtFourFifths() {
        var leases = LeaseSchedule(lease: 30, now: 0)
        leases.sent(at: 10)
        leases.renewed(sentAt: 10)
        // The store stops answering: renewals are sent and fail.
        for now in [20.0, 30.0] {
            XCTAssertTrue(leases.renewalDue(at: now))
            leases.sent(at: now)
            XCTAssertTrue(leases.holds(at: now), "\(now)")
        }
        XCTAssertTrue(leases.holds(at: 33.9))
        XCTAssertFalse(leases.holds(at: 34), "0.8 of a lease after the renewal sent at 10")
        XCTAssertFalse(leases.lapsed(at: 34))
        XCTAssertTrue(leases.lapsed(at: 34.1), "what it runs stops")
        // A late answer to an older renewal does not move the leases back.
        leases.renewed(sentAt: 5)
        XCTAssertEqual(leases.renewedAt, 10)
    }

    func testANodeWokenPastItsLeaseActsOnNothingUntilItRenews() {
        var leases = LeaseSchedule(lease: 10, now: 0)
        // Stopped at 1, woken at 60: every timer is overdue and none has run.
        XCTAssertFalse(leases.holds(at: 60), "no byte may be written")
        XCTAssertTrue(leases.renewalDue(at: 60))
        leases.sent(at: 60)
        XCTAssertFalse(leases.holds(at: 60.1), "sent is not renewed")
        leases.renewed(sentAt: 60)
        XCTAssertTrue(leases.holds(at: 60.1))
        XCTAssertFalse(leases.renewalDue(at: 63))
        XCTAssertTrue(leases.renewalDue(at: 63.34))
    }
}
