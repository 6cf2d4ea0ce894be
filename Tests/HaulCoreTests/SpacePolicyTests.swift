import HaulCore
import XCTest

/// The free-space rule as a table: what a file needs must fit in the free space less the reserve, and no file may
/// pass the largest size accepted.
final class SpacePolicyTests: XCTestCase {
    func testKnownSizes() {
        let gib: Int64 = 1 << 30
        let policy = SpacePolicy(minFreeSpace: gib, maxFileSize: 100 * gib)
        let cases: [(total: Int64, needed: Int64, free: Int64, code: ErrorCode?)] = [
            (10 * gib, 10 * gib, 20 * gib, nil),
            (10 * gib, 10 * gib, 11 * gib, nil),  // exactly the reserve left
            (10 * gib, 10 * gib, 11 * gib - 1, .insufficientSpace),
            (1 << 40, 1 << 40, 80 * gib, .fileTooLarge),  // over the largest file first
            (50 * gib, 50 * gib, 20 * gib, .insufficientSpace),
            (50 * gib, 0, 2 * gib, nil),  // resumed: its blocks are held already
            (0, 0, 0, nil),  // an empty file fits anywhere
            (10, 10, -5, .insufficientSpace),  // free below the reserve already
        ]
        for c in cases {
            XCTAssertEqual(policy.refusal(total: c.total, needed: c.needed, free: c.free)?.code, c.code, "\(c)")
        }
        XCTAssertNil(SpacePolicy(minFreeSpace: 0).refusal(total: 1 << 50, needed: 1 << 20, free: 1 << 20))
    }

    func testGrowingFiles() {
        let policy = SpacePolicy(minFreeSpace: 1 << 20, maxFileSize: 1 << 30)
        XCTAssertNil(policy.refusalWhileWriting(written: 1 << 29, free: 1 << 30))
        XCTAssertEqual(policy.refusalWhileWriting(written: (1 << 30) + 1, free: 1 << 40)?.code, .fileTooLarge)
        XCTAssertEqual(policy.refusalWhileWriting(written: 10, free: (1 << 20) - 1)?.code, .insufficientSpace)
        XCTAssertNil(SpacePolicy(minFreeSpace: 0).refusalWhileWriting(written: 1 << 50, free: 0))
        let message = policy.refusalWhileWriting(written: 10, free: 512 << 10)?.message ?? ""
        XCTAssertTrue(message.contains("512.0 KiB (524288 bytes)") && message.contains("--min-free-space"), message)
    }
}
