import Foundation
import XCTest

/// Categories over real HTTP: a folder of their own under the root, the defaults of their downloads, one speed
/// limit over all of them, and filters (list, events, webhooks, clean-up) by category.
final class CategoryTests: HaulTestCase {
    private func put(_ name: String, _ body: [String: Any]) throws -> Client.Reply {
        try api.request("PUT", "/categories/\(name)", json: body)
    }

    func testACategoryGivesItsDownloadsItsFolderAndDefaults() throws {
        let made = try put("films", ["directory": "media/films", "connections": 2, "priority": 5])
        XCTAssertEqual(made.status, 201, made.text)
        XCTAssertEqual(made.header("Location"), "/categories/films")
        XCTAssertEqual(try put("films", ["directory": "media/films", "connections": 2, "priority": 5]).status, 200)
        XCTAssertEqual(try put("tv", [:]).json["directory"] as? String, "tv", "the folder defaults to the name")

        let film = try sandbox.makeRandomFile("www/film.bin", size: 400_000)
        let show = try sandbox.makeRandomFile("www/show.bin", size: 300_000)
        let filmID = try add(["url": originURL("film.bin"), "category": "films"])
        let extraID = try add([
            "url": originURL("film.bin"), "category": "films", "directory": "2026",
            "connections": 3, "priority": -1,
        ])
        let showID = try add(["url": originURL("show.bin"), "category": "tv"])
        let done = try waitForState(filmID, "completed")
        XCTAssertEqual(done["category"] as? String, "films")
        XCTAssertEqual(done["path"] as? String, "media/films/film.bin")
        XCTAssertEqual(int(done["connections"]), 2)
        XCTAssertEqual(int(done["priority"]), 5)
        XCTAssertEqual(try sha256(sandbox.file("downloads/media/films/film.bin")), film)
        // A download's own choices win; its directory is under the category's.
        let extra = try waitForState(extraID, "completed")
        XCTAssertEqual(extra["path"] as? String, "media/films/2026/film.bin")
        XCTAssertEqual(int(extra["connections"]), 3)
        XCTAssertEqual(int(extra["priority"]), -1)
        XCTAssertEqual(try sha256(try downloadedPath(try waitForState(showID, "completed"))), show)
        let paused = try add(["url": "http://127.0.0.1:9/later.bin", "category": "films", "start_paused": true])

        // A category is made before it is used.
        let unknown = try api.request("POST", "/downloads", json: ["url": originURL("film.bin"), "category": "music"])
        XCTAssertEqual(unknown.status, 409, unknown.text)
        XCTAssertTrue((unknown.json["detail"] as? String ?? "").contains("PUT /categories/music"), unknown.text)
        XCTAssertEqual(
            try api.request(
                "POST", "/downloads",
                json: [
                    "url": originURL("film.bin"),
                    "category": "../x",
                ]
            ).status, 422)

        let listed = try api.get("/downloads?category=films").json["downloads"] as? [[String: Any]] ?? []
        XCTAssertEqual(Set(listed.compactMap { $0["id"] as? String }), [filmID, extraID, paused])
        XCTAssertEqual(
            (try api.get("/categories").json["categories"] as? [[String: Any]])?
                .compactMap { $0["name"] as? String }, ["films", "tv"])

        // Clean-up of one category's finished downloads: the paused one and the other category's stay.
        XCTAssertEqual(try api.request("DELETE", "/downloads?category=films").status, 422, "state is required")
        let cleaned = try api.request("DELETE", "/downloads?category=films&state=completed")
        XCTAssertEqual(cleaned.status, 200, cleaned.text)
        XCTAssertEqual(Set(cleaned.json["removed"] as? [String] ?? []), [filmID, extraID])
        XCTAssertEqual(try api.get("/downloads/\(filmID)").status, 404)
        XCTAssertEqual(try api.get("/downloads/\(showID)").status, 200)
        XCTAssertEqual(try api.get("/downloads/\(paused)").status, 200)
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: sandbox.file("downloads/media/films/film.bin")),
            "a finished file stays without delete_file")

        // Forgotten, the category leaves its downloads their name and folder; a new one cannot use it.
        XCTAssertEqual(try api.request("DELETE", "/categories/films").status, 204)
        XCTAssertEqual(try api.get("/categories/films").status, 404)
        XCTAssertEqual(try download(paused)["category"] as? String, "films")
        XCTAssertEqual(
            try api.request(
                "POST", "/downloads",
                json: [
                    "url": originURL("show.bin"),
                    "category": "films",
                ]
            ).status, 409)
        // Kept across a restart.
        haul.stop()
        try startHaul()
        XCTAssertEqual(try api.get("/categories/tv").json["directory"] as? String, "tv")
        XCTAssertEqual(try download(showID)["category"] as? String, "tv")
    }

    func testOneSpeedLimitHoldsOverAllTheDownloadsOfACategory() throws {
        XCTAssertEqual(try put("slow", ["max_speed": 500_000]).status, 201)
        let hashes = try (0..<2).map { try sandbox.makeRandomFile("www/c\($0).bin", size: 8 << 20) }
        let started = Date()
        let ids = try (0..<2).map { try add(["url": originURL("c\($0).bin"), "category": "slow"]) }
        // Measured once more than the buckets' bursts has come (unlimited, all 16 MiB would be there at once).
        var received: Int64 = 0
        try waitFor("1.2 MB") {
            received = try ids.map { int(try download($0)["received_bytes"]) }.reduce(0, +)
            return received >= 1_200_000
        }
        let elapsed = Date().timeIntervalSince(started)
        // Both together within the category's rate (plus the buckets' bursts); unlimited, loopback moves the
        // 16 MiB in well under a second.
        XCTAssertLessThan(Double(received), 500_000 * elapsed + 600_000, "\(received) bytes in \(elapsed) s")
        XCTAssertGreaterThan(received, 0)
        // Lifted: they go on at full speed. (A connection stopped at the end of its split range on bytes that
        // curl_easy_pause gave back used to sit until an unrelated curl timer, 30 s after the start, with the
        // download complete: not a speed, a stall, so it has a bound here.)
        XCTAssertEqual(try put("slow", ["max_speed": NSNull()]).status, 200)
        for (id, hash) in zip(ids, hashes) {
            XCTAssertEqual(try sha256(try downloadedPath(try waitForState(id, "completed", timeout: 20))), hash)
        }
    }

    func testEventStreamsFollowOneCategory() throws {
        XCTAssertEqual(try put("films", [:]).status, 201)
        let events = try SSEClient(port: haul.port, path: "/events?category=films")
        // Subscribed once its answer began: what is added from now on is on the stream.
        XCTAssertTrue(events.read(timeout: 10) { $0.status != 0 })
        let outside = try add(["url": "http://127.0.0.1:9/a.bin", "start_paused": true])
        let inside = try add(["url": "http://127.0.0.1:9/b.bin", "start_paused": true, "category": "films"])
        XCTAssertEqual(try api.request("DELETE", "/downloads/\(inside)").status, 204)
        XCTAssertEqual(try api.request("DELETE", "/downloads/\(outside)").status, 204)
        // A last one of the category: events come in order, so anything about the other would be before it.
        let last = try add(["url": "http://127.0.0.1:9/c.bin", "start_paused": true, "category": "films"])
        XCTAssertTrue(events.read(timeout: 10) { $0.has("created", id: last) })
        let about = events.events.compactMap { event -> String? in
            event.event == "created" || event.event == "removed" ? "\(event.event):\(event.json["id"] ?? "")" : nil
        }
        XCTAssertEqual(about, ["created:\(inside)", "removed:\(inside)", "created:\(last)"])
        XCTAssertEqual(try api.get("/events?category=../x").status, 422)
    }
}
