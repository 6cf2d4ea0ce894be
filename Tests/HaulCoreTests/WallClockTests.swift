import Foundation
import HaulLoop
import HaulTestSupport
import XCTest
@testable import HaulCore

/// What the engine does by the time of day reads the clock's wall time, so a test sets the hour and moves it on
/// the manual clock, without sleeping and whatever the hour the suite runs at.
final class WallClockTests: XCTestCase {
    private func engine(_ clock: ManualClock) throws -> Engine {
        try makeEngine(fetcher: SilentFetcher(), clock: clock)
    }

    func testTheSpeedScheduleFollowsTheClocksHour() throws {
        let clock = ManualClock()
        // Half a minute before a minute boundary, early in a day wherever the suite's time zone is.
        clock.wallStart = Date(timeIntervalSince1970: 1_796_716_770)
        let start = WeekTime(clock.wallTime)
        try XCTSkipIf(start.minute + 3 > 1440, "too close to midnight in this time zone")
        let engine = try engine(clock)
        var change = SettingsChange()
        change.speedSchedule = [
            SpeedWindow(
                days: [start.day], from: start.minute + 1, to: start.minute + 2,
                maxSpeed: 100_000)
        ]
        _ = try engine.changeSettings(change)
        XCTAssertNil(engine.currentSpeedLimit, "the window has not begun")
        clock.advance(60)
        XCTAssertEqual(engine.currentSpeedLimit, 100_000, "within 30 s of the window's start")
        clock.advance(60)
        XCTAssertNil(engine.currentSpeedLimit, "the window is over")
    }

    func testADownloadsTimesAreTheClocksWallTime() throws {
        let clock = ManualClock()
        clock.wallStart = Date(timeIntervalSince1970: 1_700_000_000)
        let engine = try engine(clock)
        clock.advance(42)
        let added = try engine.add(NewDownload(url: "http://origin.test/f")).snapshot.download
        XCTAssertEqual(added.createdAt.timeIntervalSince1970, 1_700_000_042, accuracy: 0.001)
        clock.advance(8)
        let paused = try engine.update(added.id, DownloadChanges(state: .paused)).download
        XCTAssertEqual(paused.updatedAt.timeIntervalSince1970, 1_700_000_050, accuracy: 0.001)
    }
}
