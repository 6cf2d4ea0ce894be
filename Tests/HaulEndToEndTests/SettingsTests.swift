import Foundation
import XCTest

/// GET and PATCH /settings: what a client changes while the server runs takes effect at once and outlives a
/// restart; null puts a setting back to the flags' default.
final class SettingsTests: HaulTestCase {
    override var serveArguments: [String] { super.serveArguments + ["--max-active", "4", "--connections", "3"] }

    private func settings() throws -> [String: Any] {
        let reply = try api.get("/settings")
        XCTAssertEqual(reply.status, 200, reply.text)
        return reply.json
    }

    func testAChangeTakesEffectAndOutlivesARestart() throws {
        let initial = try settings()
        XCTAssertEqual(initial["max_active"] as? Int, 4, "the flags give the defaults")
        XCTAssertEqual(initial["default_connections"] as? Int, 3)
        XCTAssertEqual(initial["max_speed"] as? Int, 0)
        XCTAssertEqual((initial["defaults"] as? [String: Any])?["max_active"] as? Int, 4)

        let changed = try api.request("PATCH", "/settings", json: ["max_active": 1, "default_connections": 2])
        XCTAssertEqual(changed.status, 200, changed.text)
        XCTAssertEqual(changed.json["max_active"] as? Int, 1)
        try sandbox.makeRandomFile("www/first.bin", size: 300_000)
        try sandbox.makeRandomFile("www/second.bin", size: 1000)
        let first = try add(["url": originURL("first.bin", "rate=300000")])
        let second = try add(["url": originURL("second.bin")])
        XCTAssertEqual(int(try download(first)["connections"]), 2, "new downloads take the new default")
        try waitForState(first, "downloading")
        XCTAssertEqual(try download(second)["state"] as? String, "queued", "one at a time now")
        _ = try waitForState(second, "completed")

        XCTAssertEqual(haul.stop(signal: SIGTERM), 0)
        try startHaul()
        XCTAssertEqual(try settings()["max_active"] as? Int, 1, "kept in the store")
        let reset = try api.request("PATCH", "/settings", json: ["max_active": NSNull()])
        XCTAssertEqual(reset.json["max_active"] as? Int, 4, "null: the default again")
        XCTAssertEqual(reset.json["default_connections"] as? Int, 2, "the rest stays")
    }

    func testAScheduleWindowLimitsTheSpeedWhileItLasts() throws {
        let hash = try sandbox.makeRandomFile("www/limited.bin", size: 400_000)
        let reply = try api.request(
            "PATCH", "/settings",
            json: [
                "speed_schedule": [["from": "00:00", "to": "24:00", "max_speed": 100_000]]
            ])
        XCTAssertEqual(reply.status, 200, reply.text)
        XCTAssertEqual(reply.json["current_max_speed"] as? Int, 100_000, "every minute of every day is in the window")
        XCTAssertEqual(reply.json["max_speed"] as? Int, 0, "outside the windows: no limit")
        let started = Date()
        let id = try add(["url": originURL("limited.bin")])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        // 400 kB at 100 kB/s, after a quarter second's burst: not under three and a half seconds.
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 3.5)
        let lifted = try api.request("PATCH", "/settings", json: ["speed_schedule": NSNull()])
        XCTAssertEqual(lifted.json["current_max_speed"] as? Int, 0)
    }

    func testABadChangeIsRefusedWhole() throws {
        let reply = try api.request(
            "PATCH", "/settings",
            json: [
                "max_active": 0, "max_connections_per_host": 8,
                "speed": 1,
            ])
        XCTAssertEqual(reply.status, 422)
        // A dictionary's keys come in any order: the fields are compared as a set.
        XCTAssertEqual(
            Set((reply.json["errors"] as? [[String: Any]])?.compactMap { $0["field"] as? String } ?? []),
            ["max_active", "speed"])
        XCTAssertEqual(try settings()["max_connections_per_host"] as? Int, 16, "nothing changed")
    }
}
