import Foundation
import XCTest

/// Server-sent events: what a dashboard sees live, and what it gets back after a reconnect.
final class EventStreamTests: HaulTestCase {
    func testAStreamShowsCreatedProgressAndTheCompletion() throws {
        try sandbox.makeRandomFile("www/live.bin", size: 1_500_000)
        let client = try SSEClient(port: haul.port, path: "/events")
        XCTAssertTrue(client.read(timeout: 5) { $0.status == 200 })
        let started = Date()
        let id = try add(["url": originURL("live.bin", "rate=1000000")])
        XCTAssertTrue(client.read { $0.has("state", id: id, state: "completed") }, "\(client.events.map(\.event))")
        let elapsed = Date().timeIntervalSince(started)
        let kinds = client.events.map(\.event)
        XCTAssertEqual(kinds.first, "created")
        let progress = client.events.filter { $0.event == "progress" }
        XCTAssertGreaterThanOrEqual(progress.count, 3, "\(kinds)")
        // Coalesced: at most 4 a second (plus the final one and one per state change).
        XCTAssertLessThanOrEqual(Double(progress.count), 4 * elapsed + 4, "\(progress.count) in \(elapsed) s")
        // The last progress event before completion carries every byte.
        let lastIndex = try XCTUnwrap(client.events.lastIndex { $0.event == "state" })
        let finalProgress = try XCTUnwrap(client.events[..<lastIndex].last { $0.event == "progress" })
        XCTAssertEqual(int(finalProgress.json["received_bytes"]), 1_500_000)
        // Ids grow by one per event, server-wide.
        let ids = client.events.compactMap { $0.id.flatMap { Int64($0) } }
        XCTAssertEqual(ids.count, client.events.count)
        XCTAssertEqual(ids, Array(ids.first!..<(ids.first! + Int64(ids.count))))
        // Secrets stay out of events too.
        XCTAssertTrue(client.events.allSatisfy { $0.json["headers"] == nil })
    }

    func testReconnectingWithLastEventIDDeliversExactlyTheMissedEvents() throws {
        try sandbox.makeRandomFile("www/gap.bin", size: 1_200_000)
        let witness = try SSEClient(port: haul.port, path: "/events")
        let dropper = try SSEClient(port: haul.port, path: "/events")
        XCTAssertTrue(witness.read(timeout: 5) { $0.status == 200 })
        XCTAssertTrue(dropper.read(timeout: 5) { $0.status == 200 })
        let id = try add(["url": originURL("gap.bin", "rate=800000")])
        XCTAssertTrue(dropper.read { $0.events.count >= 3 })
        let lastSeen = try XCTUnwrap(dropper.events[2].id)
        dropper.disconnect()
        XCTAssertTrue(witness.read { $0.has("state", id: id, state: "completed") })
        // The last progress event follows the state's in the same turn, and may come in a later write.
        witness.read(timeout: 0.3) { _ in false }

        // By header, and by query parameter for EventSource polyfills that cannot set headers.
        for request in [("/events", ["Last-Event-ID": lastSeen]), ("/events?last_event_id=\(lastSeen)", [:])] {
            let again = try SSEClient(port: haul.port, path: request.0, headers: request.1)
            let missed = witness.events.drop { $0.id != lastSeen }.dropFirst()
            XCTAssertTrue(again.read(timeout: 5) { $0.events.count >= missed.count })
            XCTAssertEqual(again.events, Array(missed))
            // And nothing more.
            again.read(timeout: 0.3) { _ in false }
            XCTAssertEqual(again.events.count, missed.count)
        }
    }

    func testAClientTooFarBehindGetsOneSnapshot() throws {
        try sandbox.makeRandomFile("www/s.bin", size: 1000)
        let id = try add(["url": originURL("s.bin")])
        _ = try waitForState(id, "completed")
        let client = try SSEClient(port: haul.port, path: "/events", headers: ["Last-Event-ID": "1"])
        XCTAssertTrue(client.read(timeout: 5) { $0.events.count >= 1 })
        let snapshot = try XCTUnwrap(client.events.first)
        XCTAssertEqual(snapshot.event, "snapshot")
        let downloads = try XCTUnwrap(snapshot.json["downloads"] as? [[String: Any]])
        XCTAssertEqual(downloads.map { $0["id"] as? String }, [id])
        XCTAssertEqual(downloads.first?["state"] as? String, "completed")
        XCTAssertNotNil(snapshot.id, "a snapshot carries the id to resume from")
    }

    func testADownloadStreamFollowsOneDownloadAndEndsWhenItIsRemoved() throws {
        try sandbox.makeRandomFile("www/one.bin", size: 1000)
        try sandbox.makeRandomFile("www/other.bin", size: 1000)
        let id = try add(["url": originURL("one.bin"), "start_paused": true])
        XCTAssertEqual(try api.get("/downloads/nope/events").status, 404)
        let client = try SSEClient(port: haul.port, path: "/downloads/\(id)/events")
        XCTAssertTrue(client.read(timeout: 5) { $0.status == 200 })
        let other = try add(["url": originURL("other.bin")])
        _ = try waitForState(other, "completed")
        XCTAssertEqual(try patch(id, ["priority": 3]).status, 200)
        XCTAssertTrue(client.read(timeout: 5) { $0.events.count >= 1 })
        XCTAssertEqual(try api.request("DELETE", "/downloads/\(id)").status, 204)
        XCTAssertTrue(client.read(timeout: 5) { $0.closed }, "the stream ends with its download")
        XCTAssertTrue(client.events.allSatisfy { $0.json["id"] as? String == id }, "\(client.events)")
        XCTAssertEqual(client.events.last?.event, "removed")
    }

    func testADownloadStreamStartsWithWhereTheDownloadStands() throws {
        try sandbox.makeRandomFile("www/done.bin", size: 2000)
        try sandbox.makeRandomFile("www/slow.bin", size: 400_000)
        let done = try add(["url": originURL("done.bin")])
        _ = try waitForState(done, "completed")
        let finished = try SSEClient(port: haul.port, path: "/downloads/\(done)/events")
        XCTAssertTrue(finished.read(timeout: 5) { $0.events.count >= 1 })
        let first = try XCTUnwrap(finished.events.first)
        XCTAssertEqual(first.event, "state")
        XCTAssertEqual(first.json["state"] as? String, "completed")
        XCTAssertEqual(first.json["id"] as? String, done)
        XCTAssertEqual(
            first.id.flatMap { Int64($0) }, int(try api.get("/stats").json["sequence"]),
            "numbered with the current sequence: a reconnect from it misses nothing")

        let running = try add(["url": originURL("slow.bin", "rate=200000")])
        try waitForState(running, "downloading")
        let follower = try SSEClient(port: haul.port, path: "/downloads/\(running)/events")
        XCTAssertTrue(follower.read(timeout: 5) { $0.has("state", id: running, state: "completed") })
        XCTAssertEqual(follower.events.first?.event, "state")
        XCTAssertEqual(follower.events.first?.json["state"] as? String, "downloading")
        XCTAssertGreaterThan(int(follower.events.first?.json["received_bytes"]), -1)
        // A reconnect with Last-Event-ID replays what was missed instead.
        let resumed = try SSEClient(
            port: haul.port, path: "/downloads/\(done)/events",
            headers: ["Last-Event-ID": first.id ?? ""])
        resumed.read(timeout: 0.5) { _ in false }
        XCTAssertTrue(resumed.events.isEmpty, "\(resumed.events)")
    }

    func testEachStateIsAnnouncedBeforeItsProgressAndUpdatedAtFollowsProgress() throws {
        try sandbox.makeRandomFile("www/order.bin", size: 1_000_000)
        let client = try SSEClient(port: haul.port, path: "/events")
        XCTAssertTrue(client.read(timeout: 5) { $0.status == 200 })
        let id = try add(["url": originURL("order.bin", "rate=400000"), "connections": 2])
        XCTAssertTrue(client.read { $0.has("state", id: id, state: "completed") })
        var announced: String?
        var stamps: [String] = []
        for event in client.events where event.json["id"] as? String == id {
            let state = event.json["state"] as? String
            switch event.event {
            case "created", "state": announced = state
            case "progress":
                XCTAssertEqual(state, announced, "a progress event in \(state ?? "?") before its state event")
                if state == "downloading", let stamp = event.json["updated_at"] as? String { stamps.append(stamp) }
            default: break
            }
        }
        XCTAssertGreaterThanOrEqual(stamps.count, 3)
        XCTAssertEqual(stamps, stamps.sorted())
        XCTAssertGreaterThanOrEqual(Set(stamps).count, stamps.count - 1, "updated_at moves with the bytes: \(stamps)")
    }

    func testDisconnectsAreNoticedAtOnce() throws {
        let clients = try (0..<50).map { _ in try SSEClient(port: haul.port, path: "/events") }
        try waitFor("50 streams", timeout: 5) { int(try api.get("/stats").json["event_streams"]) == 50 }
        clients.forEach { $0.disconnect() }
        try waitFor("the streams to be freed", timeout: 1) { int(try api.get("/stats").json["event_streams"]) == 0 }
    }
}

/// Heartbeats keep a quiet stream open past the server's own idle timeout.
final class EventHeartbeatTests: HaulTestCase {
    override var serveArguments: [String] {
        super.serveArguments + ["--http-timeout", "2", "--sse-heartbeat", "0.5"]
    }

    func testAnIdleStreamOutlivesTheHTTPTimeout() throws {
        let client = try SSEClient(port: haul.port, path: "/events")
        client.read(timeout: 3.5) { _ in false }
        XCTAssertFalse(client.closed, "an idle stream was cut")
        XCTAssertGreaterThanOrEqual(client.comments, 4)
        try sandbox.makeRandomFile("www/h.bin", size: 100)
        let id = try add(["url": originURL("h.bin")])
        XCTAssertTrue(client.read(timeout: 5) { $0.has("created", id: id) })
    }
}

/// Polling that costs nothing when nothing changed.
final class PollingTests: HaulTestCase {
    func testIfNoneMatchAnswers304UntilSomethingChanges() throws {
        try sandbox.makeRandomFile("www/c.bin", size: 100)
        let id = try add(["url": originURL("c.bin"), "start_paused": true])
        for path in ["/downloads/\(id)", "/downloads"] {
            let first = try api.get(path)
            let tag = try XCTUnwrap(first.header("ETag"), path)
            let same = try api.request("GET", path, headers: ["If-None-Match": tag])
            XCTAssertEqual(same.status, 304, path)
            XCTAssertEqual(same.body.count, 0)
            XCTAssertEqual(try api.request("GET", path, headers: ["If-None-Match": "W/\(tag)"]).status, 304)
            XCTAssertEqual(try api.request("GET", path, headers: ["If-None-Match": "\"other\""]).status, 200)
        }
        let tags = try ["/downloads/\(id)", "/downloads"].map { try XCTUnwrap(try api.get($0).header("ETag")) }
        XCTAssertEqual(try patch(id, ["priority": 9]).status, 200)
        for (path, tag) in zip(["/downloads/\(id)", "/downloads"], tags) {
            let changed = try api.request("GET", path, headers: ["If-None-Match": tag])
            XCTAssertEqual(changed.status, 200, path)
            XCTAssertNotEqual(changed.header("ETag"), tag)
        }
    }

    func testChangedSinceReturnsOnlyTheDelta() throws {
        try sandbox.makeRandomFile("www/d.bin", size: 100)
        let a = try add(["url": originURL("d.bin"), "filename": "a", "start_paused": true])
        let c = try add(["url": originURL("d.bin"), "filename": "c", "start_paused": true])
        _ = try add(["url": originURL("d.bin"), "filename": "untouched", "start_paused": true])
        let since = int(try api.get("/downloads").json["sequence"])
        XCTAssertGreaterThan(since, 0)
        let b = try add(["url": originURL("d.bin"), "filename": "b", "start_paused": true])
        XCTAssertEqual(try patch(a, ["priority": 1]).status, 200)
        XCTAssertEqual(try api.request("DELETE", "/downloads/\(c)").status, 204)
        let delta = try api.get("/downloads?changed_since=\(since)").json
        let changed = (delta["downloads"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
        XCTAssertEqual(Set(changed), [a, b])
        XCTAssertEqual(delta["removed"] as? [String], [c])
        XCTAssertEqual(delta["reset"] as? Bool, false)
        XCTAssertGreaterThan(int(delta["sequence"]), since)
        // Once announced (progress ticks run four times a second), nothing is newer than the latest sequence.
        var nothing: [String: Any] = [:]
        try waitFor("every change announced") {
            let latest = int(try api.get("/downloads").json["sequence"])
            nothing = try api.get("/downloads?changed_since=\(latest)").json
            return (nothing["downloads"] as? [Any])?.isEmpty == true
        }
        XCTAssertEqual((nothing["downloads"] as? [Any])?.count, 0)
        XCTAssertEqual((nothing["removed"] as? [Any])?.count, 0)
        // From before this server started: everything, flagged as a reset.
        let old = try api.get("/downloads?changed_since=0").json
        XCTAssertEqual(old["reset"] as? Bool, true)
        XCTAssertEqual((old["downloads"] as? [Any])?.count, 3)
    }

    func testStatsCountsDownloadsByState() throws {
        try sandbox.makeRandomFile("www/e.bin", size: 100)
        _ = try add(["url": originURL("e.bin"), "filename": "p", "start_paused": true])
        let done = try add(["url": originURL("e.bin"), "filename": "d"])
        _ = try waitForState(done, "completed")
        let stats = try api.get("/stats").json
        XCTAssertEqual(int(stats["downloads"]), 2)
        XCTAssertEqual(int(stats["paused"]), 1)
        XCTAssertEqual(int(stats["completed"]), 1)
        XCTAssertEqual(int(stats["active"]), 0)
        XCTAssertEqual(int(stats["received_bytes"]), 100)
    }
}
