import XCTest
@testable import HaulCore

final class TokenBucketTests: XCTestCase {
    func testTheLongRunRateIsTheLimit() {
        var bucket = TokenBucket(rate: 100_000)
        var now = 0.0
        var passed = 0
        // Offer 16 KiB chunks as fast as allowed for 10 simulated seconds.
        while now < 10 {
            let wait = bucket.delay(for: 16384, now: now)
            if wait == 0 {
                bucket.consume(16384)
                passed += 16384
            } else {
                now += wait
            }
        }
        XCTAssertEqual(Double(passed) / 10, 100_000, accuracy: 100_000 * 0.05)
    }

    func testIdleTimeBuysOnlyAShortBurst() {
        var bucket = TokenBucket(rate: 1_000_000)
        XCTAssertEqual(bucket.delay(for: 1000, now: 0), 0)
        bucket.consume(1000)
        // An hour of idleness allows a quarter second's worth at once, not an hour's.
        var burst = 0
        while bucket.delay(for: 16384, now: 3600) == 0 {
            bucket.consume(16384)
            burst += 16384
        }
        XCTAssertLessThanOrEqual(burst, 250_000 + 16384)
        XCTAssertGreaterThan(burst, 200_000)
    }

    func testLoweringTheRateDropsSavedTokens() {
        var bucket = TokenBucket(rate: 10_000_000)
        bucket.rate = 100_000
        XCTAssertGreaterThan(bucket.delay(for: 16384 * 3, now: 0) + bucket.delay(for: 16384, now: 0), -1)
        var passed = 0
        while bucket.delay(for: 16384, now: 0) == 0 {
            bucket.consume(16384)
            passed += 16384
        }
        XCTAssertLessThanOrEqual(passed, 32768)
    }
}
