import Foundation
import HaulCore
import HaulLoop
import HaulTestSupport
import XCTest

/// The engine and its runners over a scripted fetcher and a manual clock: what depends on time (speed limits) is
/// measured on the clock the engine reads, so the figures are exact, whatever the machine's load.
final class RunnerTests: XCTestCase {
    private var directory: String!

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "haul-runner-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory + "/downloads", withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func engine(fetcher: Fetcher, clock: Clock, maxSpeed: Int64? = nil) throws -> (Engine, EventLoop) {
        let loop = try EventLoop()
        let store = try DownloadStore(path: directory + "/haul.sqlite")
        var config = EngineConfig(downloadRoot: directory + "/downloads")
        config.space = SpacePolicy(minFreeSpace: 0)
        config.maxSpeed = maxSpeed
        let engine = try Engine(
            loop: loop, store: store, config: config, log: Logger(minimum: .error),
            fetcher: fetcher, clock: clock)
        try engine.start()
        return (engine, loop)
    }

    /// Pumps the fetcher every `step` seconds of clock time for `seconds`.
    private func run(_ fetcher: ScriptedFetcher, _ clock: ManualClock, seconds: Double, step: Double = 0.01) {
        var elapsed = 0.0
        while elapsed < seconds {
            fetcher.pump()
            clock.advance(step)
            elapsed += step
        }
    }

    func testAPerDownloadSpeedLimitHoldsOnTheClock() throws {
        let body = [UInt8](repeating: 7, count: 4 << 20)
        let fetcher = ScriptedFetcher(body: body)
        let clock = ManualClock()
        let (engine, loop) = try engine(fetcher: fetcher, clock: clock)
        var request = NewDownload(url: "http://origin.test/limited.bin")
        request.maxSpeed = 200_000
        request.connections = 4
        let id = try engine.add(request).snapshot.download.id
        run(fetcher, clock, seconds: 1)
        let start = try XCTUnwrap(engine.receivedBytes(id))
        run(fetcher, clock, seconds: 5)
        let rate = Double(try XCTUnwrap(engine.receivedBytes(id)) - start) / 5
        XCTAssertEqual(rate, 200_000, accuracy: 200_000 * 0.05, "four connections share one limit")
        // Raised while running: the next chunks take the new limit.
        _ = try engine.update(id, DownloadChanges(maxSpeed: .some(800_000)))
        run(fetcher, clock, seconds: 1)
        let faster = try XCTUnwrap(engine.receivedBytes(id))
        run(fetcher, clock, seconds: 2)
        let raised = Double(try XCTUnwrap(engine.receivedBytes(id)) - faster) / 2
        XCTAssertEqual(raised, 800_000, accuracy: 800_000 * 0.05)
        withExtendedLifetime(loop) {}
    }

    func testTheGlobalSpeedLimitIsSharedByAllDownloads() throws {
        let body = [UInt8](repeating: 9, count: 4 << 20)
        let fetcher = ScriptedFetcher(body: body)
        let clock = ManualClock()
        let (engine, loop) = try engine(fetcher: fetcher, clock: clock, maxSpeed: 300_000)
        let ids = try (0..<3).map {
            try engine.add(NewDownload(url: "http://origin.test/\($0).bin")).snapshot.download.id
        }
        run(fetcher, clock, seconds: 1)
        let before = ids.map { engine.receivedBytes($0) ?? 0 }.reduce(0, +)
        run(fetcher, clock, seconds: 4)
        let rate = Double(ids.map { engine.receivedBytes($0) ?? 0 }.reduce(0, +) - before) / 4
        XCTAssertEqual(rate, 300_000, accuracy: 300_000 * 0.05)
        XCTAssertTrue(ids.allSatisfy { (engine.receivedBytes($0) ?? 0) > 0 }, "every download moves")
        withExtendedLifetime(loop) {}
    }
}
