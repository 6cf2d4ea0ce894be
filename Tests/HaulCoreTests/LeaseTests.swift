import Foundation
import HaulCore
import HaulLoop
import HaulTestSupport
import XCTest

/// A node sharing a PostgreSQL store writes a byte of a download only while its lease holds by its own monotonic
/// clock. Woken past the deadline (a SIGSTOP, a cut-off: the manual clock jumps, no timer has run yet), the first
/// bytes its transfers offer are held back, not written; it renews at once, and goes on if it still holds the
/// download, or stops without another byte if another node took it.
final class LeaseTests: XCTestCase {
    private var directory: String!
    private var url: String!

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "haul-lease-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory + "/downloads", withIntermediateDirectories: true)
        url = try PostgresServer.shared().createDatabase()
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func node(fetcher: Fetcher, clock: Clock) throws -> (Engine, EventLoop) {
        let loop = try EventLoop()
        let store = try DownloadStore(postgres: url, node: "a")
        var config = EngineConfig(downloadRoot: directory + "/downloads")
        config.space = SpacePolicy(minFreeSpace: 0)
        config.node = "a"
        config.lease = 3
        let engine = try Engine(
            loop: loop, store: store, config: config, log: Logger(minimum: .error),
            fetcher: fetcher, clock: clock)
        try engine.start()
        return (engine, loop)
    }

    /// Pumps the fetcher every 10 ms of clock time until `condition` holds (at most `seconds`).
    private func run(_ fetcher: ScriptedFetcher, _ clock: ManualClock, seconds: Double = 5, until condition: () -> Bool)
    {
        var elapsed = 0.0
        while elapsed < seconds, !condition() {
            fetcher.pump()
            clock.advance(0.01)
            elapsed += 0.01
        }
    }

    /// Wakes the node `seconds` after its last renewal and lets its transfers offer bytes before any timer runs.
    private func wake(_ fetcher: ScriptedFetcher, _ clock: ManualClock, after seconds: Double) {
        clock.jump(seconds)
        for _ in 0..<5 { fetcher.pump() }
    }

    func testBytesWaitForARenewalAndGoOnWhenTheLeaseStillHolds() throws {
        let fetcher = ScriptedFetcher(body: [UInt8](repeating: 3, count: 8 << 20), chunkSize: 64 * 1024)
        let clock = ManualClock()
        let (engine, loop) = try node(fetcher: fetcher, clock: clock)
        let id = try engine.add(NewDownload(url: "http://origin.test/held.bin")).snapshot.download.id
        run(fetcher, clock) { (engine.receivedBytes(id) ?? 0) > 1 << 20 }
        let before = try XCTUnwrap(engine.receivedBytes(id))
        XCTAssertLessThan(before, 8 << 20)

        wake(fetcher, clock, after: 10)
        XCTAssertEqual(engine.receivedBytes(id), before, "not a byte before the lease is renewed")
        // The renewal runs on the next turn; the database still has this node's claim: the bytes go on.
        run(fetcher, clock) { engine.receivedBytes(id) == 8 << 20 }
        XCTAssertEqual(engine.receivedBytes(id), 8 << 20, "every byte, after the renewal")
        withExtendedLifetime(loop) {}
    }

    func testANodeWokenAfterATakeoverWritesNothingMore() throws {
        let fetcher = ScriptedFetcher(body: [UInt8](repeating: 5, count: 8 << 20), chunkSize: 64 * 1024)
        let clock = ManualClock()
        let (engine, loop) = try node(fetcher: fetcher, clock: clock)
        let id = try engine.add(NewDownload(url: "http://origin.test/taken.bin")).snapshot.download.id
        run(fetcher, clock) { (engine.receivedBytes(id) ?? 0) > 1 << 20 }
        let before = try XCTUnwrap(engine.receivedBytes(id))
        let written = engine.bytesReceived
        // While this node is stopped, another one claims the download (its lease ran out in the database).
        let other = try PostgresDatabase(url: url)
        try other.execute(
            "UPDATE downloads SET claimed_by = 'b', fence = fence + 1, lease_until = 1e12 "
                + "WHERE id = '\(id)'")

        wake(fetcher, clock, after: 10)
        XCTAssertEqual(engine.bytesReceived, written, "not a byte before the lease is renewed")
        run(fetcher, clock, seconds: 2) { false }
        XCTAssertEqual(engine.bytesReceived, written, "the renewal said b holds it: nothing more is written")
        XCTAssertTrue(engine.runningIDs.isEmpty, "the runner stopped")
        XCTAssertEqual(engine.snapshot(id)?.download.node, "b", "b's, as the store says")
        _ = before
        withExtendedLifetime(loop) {}
    }
}
