import Foundation
import XCTest
@testable import HaulCore

/// A download and its machine are values, though their seldom-set fields live out of line: a copy never sees
/// another's change, a field set back to nil leaves a download equal to one that never had it, and a machine that
/// never ran holds none of a run's state.
final class DownloadValueTests: XCTestCase {
    private func download(_ id: String = "a") -> Download {
        Download(
            id: id, sequence: 7, url: "http://origin.test/x.bin", headers: [], requestedFilename: nil,
            directory: "", state: .paused, connections: 4, priority: 0, maxSpeed: nil,
            createdAt: Date(timeIntervalSince1970: 0))
    }

    func testACopyKeepsItsOutOfLineFieldsWhenTheOtherChanges() {
        var first = download()
        first.error = DownloadError(.http(404), "not found")
        first.checksum = "sha256:00"
        var second = first
        second.error?.message = "gone"
        second.torrent = nil
        second.checksum = nil
        XCTAssertEqual(first.error?.message, "not found")
        XCTAssertEqual(first.checksum, "sha256:00")
        XCTAssertEqual(second.error?.message, "gone")
        XCTAssertNil(second.checksum)
        XCTAssertNotEqual(first, second)
    }

    func testAFieldSetBackToNilLeavesTheDownloadAsIfNeverSet() {
        let plain = download()
        var changed = plain
        changed.hookError = "exit 3"
        changed.cookies = "a=b"
        XCTAssertNotEqual(plain, changed)
        changed.hookError = nil
        changed.cookies = nil
        XCTAssertEqual(plain, changed)
        XCTAssertNil(changed.proxy)
        XCTAssertNil(changed.hls)
    }

    func testAMachineThatNeverRanReadsAnIdleRunAndACopyKeepsItsOwn() {
        var machine = DownloadMachine(download: download(), settings: MachineSettings())
        XCTAssertTrue(machine.connections.isEmpty)
        XCTAssertEqual(machine.speed, 0)
        XCTAssertNil(machine.nextAttemptAt)
        XCTAssertFalse(machine.isRunning)
        machine.restarts = 2
        var copy = machine
        copy.restarts += 1
        copy.recentRates.append(5)
        XCTAssertEqual(machine.restarts, 2)
        XCTAssertTrue(machine.recentRates.isEmpty)
        XCTAssertEqual(copy.restarts, 3)
        XCTAssertEqual(copy.recentRates, [5])
    }
}
