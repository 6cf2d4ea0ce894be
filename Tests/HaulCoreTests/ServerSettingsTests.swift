import Foundation
@testable import HaulCore
import XCTest

/// The settings a client changes at run time: windows of the speed schedule, changes laid over the defaults, and
/// what a PATCH body may say.
final class ServerSettingsTests: XCTestCase {
    let defaults = ServerSettings(maxActive: 5, maxSpeed: nil, defaultConnections: 8, maxConnectionsPerHost: 16)

    func testWindowsOfTheWeek() {
        let office = SpeedWindow(days: [0, 1, 2, 3, 4], from: 9 * 60, to: 17 * 60, maxSpeed: 1 << 20)
        XCTAssertTrue(office.contains(WeekTime(day: 0, minute: 9 * 60)))
        XCTAssertTrue(office.contains(WeekTime(day: 4, minute: 17 * 60 - 1)))
        XCTAssertFalse(office.contains(WeekTime(day: 4, minute: 17 * 60)), "the end is not in it")
        XCTAssertFalse(office.contains(WeekTime(day: 5, minute: 10 * 60)), "not on Saturday")
        // Friday night into Saturday morning.
        let night = SpeedWindow(days: [4], from: 22 * 60, to: 6 * 60, maxSpeed: nil)
        XCTAssertTrue(night.contains(WeekTime(day: 4, minute: 23 * 60)))
        XCTAssertTrue(night.contains(WeekTime(day: 5, minute: 5 * 60)))
        XCTAssertFalse(night.contains(WeekTime(day: 5, minute: 23 * 60)))
        XCTAssertFalse(night.contains(WeekTime(day: 4, minute: 5 * 60)), "Thursday night is not Friday's")
        // Sunday night wraps into Monday.
        XCTAssertTrue(SpeedWindow(days: [6], from: 23 * 60, to: 60, maxSpeed: 1).contains(WeekTime(day: 0, minute: 30)))
        let allDay = SpeedWindow(from: 0, to: 1440, maxSpeed: 1)
        XCTAssertTrue(allDay.contains(WeekTime(day: 3, minute: 1439)))
        // From 10:00 to 10:00: a whole day from ten on Monday.
        let day = SpeedWindow(days: [0], from: 600, to: 600, maxSpeed: 1)
        XCTAssertTrue(day.contains(WeekTime(day: 0, minute: 600)))
        XCTAssertTrue(day.contains(WeekTime(day: 1, minute: 599)))
        XCTAssertFalse(day.contains(WeekTime(day: 1, minute: 600)))
    }

    func testTheFirstWindowWinsElseTheBaseLimit() {
        var settings = defaults
        settings.maxSpeed = 10_000_000
        settings.speedSchedule = [
            SpeedWindow(days: [0], from: 0, to: 1440, maxSpeed: 1000),
            SpeedWindow(from: 0, to: 1440, maxSpeed: nil),
        ]
        XCTAssertEqual(settings.speedLimit(at: WeekTime(day: 0, minute: 100)), 1000)
        XCTAssertNil(settings.speedLimit(at: WeekTime(day: 1, minute: 100)), "a window may lift the limit")
        settings.speedSchedule = []
        XCTAssertEqual(settings.speedLimit(at: WeekTime(day: 1, minute: 100)), 10_000_000)
    }

    func testChangesLayOverTheDefaultsAndNullGoesBack() throws {
        let (first, errors) = SettingsChange.parse(
            try members(
                #"{"max_active": 2, "max_speed": 0, "speed_schedule": [{"days":["sat","sun"],"from":"10:00","to":"24:00","max_speed":500}]}"#
            ))
        XCTAssertTrue(errors.isEmpty, "\(errors)")
        let applied = first.applied(to: defaults)
        XCTAssertEqual(applied.maxActive, 2)
        XCTAssertNil(applied.maxSpeed, "0 is no limit")
        XCTAssertEqual(applied.speedSchedule, [SpeedWindow(days: [5, 6], from: 600, to: 1440, maxSpeed: 500)])
        let (reset, _) = SettingsChange.parse(try members(#"{"max_active": null, "default_connections": 4}"#))
        let merged = first.merged(with: reset).kept
        XCTAssertEqual(merged.applied(to: defaults).maxActive, 5, "null: back to the default")
        XCTAssertEqual(merged.applied(to: defaults).defaultConnections, 4)
        XCTAssertNil(merged.maxActive, "a field back at its default is not kept")
        // What the store keeps reads back the same.
        guard case .object(let stored) = merged.json else { return XCTFail() }
        XCTAssertEqual(SettingsChange.parse(stored).change, merged)
        XCTAssertEqual(WeekTime(day: 0, minute: 0), WeekTime(day: 0, minute: 0))
    }

    func testWhatABodyMayNotSay() throws {
        let (_, errors) = SettingsChange.parse(
            try members(
                #"""
                {"max_active": 0, "max_speed": -1, "default_connections": 33, "max_connections_per_host": "x",
                 "colour": 1, "speed_schedule": [{"from": "9:00", "to": "17:00", "max_speed": 1},
                 {"days": ["funday"], "from": "10:00", "to": "10:00", "max_speed": 1, "extra": true}, 3]}
                """#))
        XCTAssertEqual(
            errors.map(\.field),
            [
                "max_active", "max_speed", "default_connections", "max_connections_per_host",
                "colour", "speed_schedule[0].from", "speed_schedule[1].extra",
                "speed_schedule[1].days", "speed_schedule[2]",
            ])
        XCTAssertNil(SpeedWindow.minutes("24:01"))
        XCTAssertEqual(SpeedWindow.minutes("24:00"), 1440)
        XCTAssertEqual(SpeedWindow.clock(570), "09:30")
    }

    private func members(_ text: String) throws -> [(String, JSONValue)] {
        guard case .object(let members) = try JSONValue.parse(Array(text.utf8)) else {
            throw CocoaError(.coderInvalidValue)
        }
        return members
    }

    func testTheTimeZoneIsNamedAsPeopleKnowIt() {
        XCTAssertEqual(ServerTimeZone.name(environment: ["TZ": "Europe/Berlin"]), "Europe/Berlin")
        XCTAssertEqual(ServerTimeZone.name(environment: ["TZ": ":/usr/share/zoneinfo/Asia/Tokyo"]), "Asia/Tokyo")
        XCTAssertEqual(ServerTimeZone.name(environment: ["TZ": "CET-1CEST"]), "CET-1CEST", "a POSIX rule as set")
        XCTAssertFalse(ServerTimeZone.name(environment: [:]).isEmpty)
        XCTAssertNotNil(ServerTimeZone.offset(at: Date()).wholeMatch(of: /[+-]\d\d:\d\d/))
    }
}
