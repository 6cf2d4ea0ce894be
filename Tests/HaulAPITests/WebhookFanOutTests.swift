import Foundation
import HaulCore
import HaulLoop
import XCTest
@testable import HaulAPI

/// Fifty webhooks and four hundred downloads (the bench's scenario W runs a hundred and a thousand): no loop turn
/// does more than a slice of the work. The change is
/// stored once per download (not once per webhook), its deliveries are made a slice per turn, and a bulk removal
/// is answered after as many turns as its slices, each one short. Turns are the manual clock's, so what is checked
/// is how the work is cut, not how fast this machine is.
final class WebhookFanOutTests: XCTestCase {
    private func pending(_ fixture: APIFixture) throws -> Int {
        try fixture.store.deliveryCounts()[.pending] ?? 0
    }

    private func addWebhooks(_ fixture: APIFixture, _ count: Int) {
        for index in 0..<count {
            let reply = fixture.call(
                "POST", "/webhooks",
                json: "{\"url\":\"http://127.0.0.1:9/h\(index)\",\"events\":[\"created\",\"removed\",\"state\"]}")
            XCTAssertEqual(reply.status, 201)
        }
    }

    func testManyDownloadsForManyWebhooksAreFannedOutASliceATurn() throws {
        let fixture = try APIFixture()
        addWebhooks(fixture, 50)
        let items = (0..<400).map { "{\"url\":\"http://127.0.0.1:9/f\($0).bin\",\"start_paused\":true}" }
        let added = fixture.call("POST", "/downloads", json: "{\"downloads\":[\(items.joined(separator: ","))]}")
        XCTAssertEqual(added.status, 200)
        XCTAssertEqual(fixture.json(added)["created"] as? Int, 400)
        // Answered with the thousand changes stored and not one delivery made yet: those come after.
        XCTAssertEqual(try pending(fixture), 0)
        var turns = 0
        var made = 0
        while turns < 2000 {
            fixture.clock.advance(WebhookDispatcher.backgroundGap)
            turns += 1
            let now = try pending(fixture)
            XCTAssertLessThanOrEqual(now - made, WebhookDispatcher.fanOutSlice + 200, "one turn made \(now - made)")
            made = now
            if made >= 20_000 { break }
        }
        XCTAssertEqual(made, 20_000, "one created delivery per webhook and download")
        XCTAssertGreaterThanOrEqual(turns, 20_000 / (WebhookDispatcher.fanOutSlice + 200))

        // The outbox holds each body once: under 600 bytes a delivery (a hundred thousand in under 64 MiB), where
        // a copy of the body each was over a kilobyte.
        let bytes = try FileManager.default.contentsOfDirectory(atPath: fixture.directory)
            .filter { $0.hasPrefix("haul.sqlite") }
            .reduce(0) {
                $0
                    + ((try FileManager.default.attributesOfItem(atPath: fixture.directory + "/" + $1)[.size]
                        as? Int) ?? 0)
            }
        XCTAssertLessThan(bytes / 20_000, 600, "the store holds \(bytes) bytes")

        // Removing them all: the answer comes once the last slice is done, a slice per turn.
        let removal = fixture.call("DELETE", "/downloads?state=paused")
        XCTAssertEqual(removal.status, 200)
        XCTAssertEqual((fixture.json(removal)["removed"] as? [String])?.count, 400)
        XCTAssertEqual(fixture.engine.count, 0)
        XCTAssertGreaterThanOrEqual(fixture.turnsTaken, 400 / API.bulkSlice - 1, "worked through in slices")
    }

    func testABulkActionIsWorkedThroughInSlices() throws {
        let fixture = try APIFixture()
        let items = (0..<600).map { "{\"url\":\"http://127.0.0.1:9/f\($0).bin\",\"start_paused\":true}" }
        XCTAssertEqual(
            fixture.call("POST", "/downloads", json: "{\"downloads\":[\(items.joined(separator: ","))]}")
                .status, 200)
        let resumed = fixture.call("POST", "/downloads/actions", json: #"{"action":"resume","state":["paused"]}"#)
        XCTAssertEqual(resumed.status, 200)
        XCTAssertEqual(fixture.json(resumed)["succeeded"] as? Int, 600)
        XCTAssertGreaterThanOrEqual(fixture.turnsTaken, 600 / API.bulkSlice - 1)
        let paused = fixture.call(
            "POST", "/downloads/actions", json: #"{"action":"pause","state":["queued","probing"]}"#)
        XCTAssertEqual(fixture.json(paused)["succeeded"] as? Int, 600)
        let removed = fixture.call("POST", "/downloads/actions", json: #"{"action":"remove","state":["paused"]}"#)
        XCTAssertEqual(fixture.json(removed)["succeeded"] as? Int, 600)
        XCTAssertEqual((fixture.json(removed)["results"] as? [[String: Any]])?.count, 600)
        XCTAssertEqual(fixture.engine.count, 0)
    }
}

/// What every webhook was sent about one download, as its detail view shows it.
final class DownloadDeliveriesTests: XCTestCase {
    func testADownloadsDeliveriesToEveryWebhookAreListedWithTheirWebhook() throws {
        let fixture = try APIFixture()
        var hooks: [String] = []
        for index in 0..<2 {
            let reply = fixture.call(
                "POST", "/webhooks", json: #"{"url": "http://127.0.0.1:9/h\#(index)", "events": ["created"]}"#)
            hooks.append(fixture.json(reply)["id"] as? String ?? "")
        }
        let mine = fixture.addPaused("http://127.0.0.1:9/mine.bin")
        let other = fixture.addPaused("http://127.0.0.1:9/other.bin")
        for _ in 0..<20 { fixture.clock.advance(WebhookDispatcher.backgroundGap) }
        let list = fixture.json(fixture.call("GET", "/downloads/\(mine)/deliveries"))["deliveries"] as? [[String: Any]]
        XCTAssertEqual(Set(list?.compactMap { $0["webhook_id"] as? String } ?? []), Set(hooks))
        XCTAssertEqual(Set(list?.compactMap { $0["download_id"] as? String } ?? []), [mine])
        XCTAssertEqual(list?.first?["event"] as? String, "created")
        XCTAssertEqual(
            (fixture.json(fixture.call("GET", "/webhooks/\(hooks[0])/deliveries"))["deliveries"]
                as? [[String: Any]])?.count, 2, "the webhook's own list has both downloads: \(other)")
        XCTAssertEqual(fixture.call("GET", "/downloads/nosuchid/deliveries").status, 404)
        XCTAssertEqual(fixture.call("GET", "/downloads/\(mine)/deliveries?limit=0").status, 422)
    }
}
