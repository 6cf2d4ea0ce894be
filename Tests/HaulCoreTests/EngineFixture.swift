import Foundation
import HaulCore
import HaulLoop
import XCTest

extension XCTestCase {
    /// An engine on SQLite in a directory of its own, over a fetcher and a clock the test chooses: the engine
    /// without sockets. The directory is removed when the test ends.
    func makeEngine(
        fetcher: Fetcher, clock: Clock, configure: (inout EngineConfig) -> Void = { _ in }
    )
        throws -> Engine
    {
        let directory = NSTemporaryDirectory() + "haul-engine-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory + "/downloads", withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: directory) }
        var config = EngineConfig(downloadRoot: directory + "/downloads")
        config.space = SpacePolicy(minFreeSpace: 0)
        configure(&config)
        // The engine holds its loop.
        let engine = try Engine(
            loop: try EventLoop(), store: try DownloadStore(path: directory + "/haul.sqlite"),
            config: config, log: Logger(minimum: .error), fetcher: fetcher, clock: clock)
        try engine.start()
        return engine
    }
}
