import Foundation
import XCTest

/// Many event-stream clients, and clients that stop reading.
final class EventLoadTests: HaulTestCase {
    override var serveArguments: [String] {
        super.serveArguments + [
            "--max-active", "20", "--progress-interval", "0.01", "--slow-client-timeout", "2",
            "--max-connections-per-client", "2000",
        ]
    }

    /// Reads every client until each satisfies `condition` or `timeout` passes.
    private func pumpAll(_ clients: [SSEClient], timeout: TimeInterval, until condition: (SSEClient) -> Bool) {
        let deadline = Date().addingTimeInterval(timeout)
        var waiting = clients.filter { !condition($0) }
        while !waiting.isEmpty, Date() < deadline {
            var fds = waiting.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            _ = poll(&fds, nfds_t(fds.count), 50)
            for (client, pfd) in zip(waiting, fds) where pfd.revents != 0 { client.pump() }
            waiting = waiting.filter { !condition($0) && !$0.closed }
        }
    }

    func testAThousandClientsAllSeeTheCompletion() throws {
        try sandbox.makeRandomFile("www/shared.bin", size: 2_000_000)
        let clients = try (0..<1000).map { _ in try SSEClient(port: haul.port, path: "/events") }
        try waitFor("1000 streams", timeout: 20) { int(try api.get("/stats").json["event_streams"]) == 1000 }
        let before = haul.memory().rss
        let cpuBefore = haul.cpuSeconds()
        let started = Date()
        let id = try add(["url": originURL("shared.bin", "rate=1000000")])
        pumpAll(clients, timeout: 60) { $0.has("state", id: id, state: "completed") }
        let elapsed = Date().timeIntervalSince(started)
        let cpu = haul.cpuSeconds() - cpuBefore
        let memory = haul.memory()
        let done = clients.filter { $0.has("state", id: id, state: "completed") }.count
        XCTAssertEqual(done, 1000)
        let events = clients.map(\.events.count).reduce(0, +)
        print(
            "SSE x1000: \(events) events delivered in \(String(format: "%.2f", elapsed)) s; server RSS "
                + "\(before / 1024) MiB with 1000 idle streams, peak \(memory.peak / 1024) MiB; CPU "
                + "\(String(format: "%.2f", cpu)) s (\(String(format: "%.0f", 100 * cpu / elapsed))% of one core)")
        if !underSanitizer {
            XCTAssertLessThan(memory.peak, 256 * 1024, "1000 streams should fit in far less than 256 MiB")
        }
        clients.forEach { $0.disconnect() }
        try waitFor("the streams to be freed", timeout: 5) { int(try api.get("/stats").json["event_streams"]) == 0 }
    }

    func testAClientThatStopsReadingCostsABoundedQueueAndIsCutOff() throws {
        for n in 0..<20 { try sandbox.makeRandomFile("www/f\(n).bin", size: 4_000_000) }
        // A client whose socket takes almost nothing, and a real curl frozen with SIGSTOP.
        let stalled = try SSEClient(port: haul.port, path: "/events", receiveBuffer: 4096)
        let curl = Process()
        curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        curl.arguments = ["-sN", haul.baseURL + "/events"]
        curl.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        try curl.run()
        defer {
            kill(curl.processIdentifier, SIGKILL)
            kill(curl.processIdentifier, SIGCONT)
            curl.waitUntilExit()
        }
        let healthy = try SSEClient(port: haul.port, path: "/events")
        try waitFor("3 streams", timeout: 5) { int(try api.get("/stats").json["event_streams"]) == 3 }
        kill(curl.processIdentifier, SIGSTOP)
        let baseline = haul.memory().rss

        // Twenty downloads, each announcing progress as its bytes move (every 50 ms): 1.5 MB of events in 4 s.
        let ids = try (0..<20).map { try add(["url": originURL("f\($0).bin", "rate=1000000")]) }
        var maxQueued: Int64 = 0
        var sawSlow = false
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, !ids.allSatisfy({ id in healthy.has("state", id: id, state: "completed") }) {
            healthy.read(timeout: 0.1) { _ in false }
            let stats = try api.get("/stats").json
            maxQueued = max(maxQueued, int(stats["event_queued_bytes"]))
            sawSlow = sawSlow || int(stats["slow_event_streams"]) > 0
        }
        for id in ids { XCTAssertTrue(healthy.has("state", id: id, state: "completed"), "healthy client missed \(id)") }
        let growth = haul.memory().peak - baseline
        print("stalled SSE clients: queue peaked at \(maxQueued / 1024) KiB, server RSS grew \(growth / 1024) MiB")
        XCTAssertTrue(sawSlow, "the stalled client was never marked slow")
        // Each slow client holds at most the limit (256 KiB) plus one event; unbounded, the stalled client's queue
        // would hold every event, 1.5 MB by the end.
        XCTAssertLessThan(maxQueued, 600 * 1024)
        if !underSanitizer { XCTAssertLessThan(growth, 64 * 1024) }
        // Two seconds after it stopped draining, the client with the tiny buffer is cut off. (The frozen curl's
        // kernel buffer may still be taking everything; it costs the server nothing and stays.)
        try waitFor("the stalled stream to be closed", timeout: 10) {
            int(try api.get("/stats").json["event_streams"]) <= 2
        }
        XCTAssertTrue(stalled.read(timeout: 10) { $0.closed }, "the server ended the stalled stream")
        XCTAssertFalse(healthy.closed)
        XCTAssertEqual(try api.get("/healthz").status, 200)
    }

    /// Adds `count` paused downloads through one `curl -K` process (one keep-alive connection, fast).
    private func addPaused(_ count: Int) throws {
        let config = (0..<count).map { n in
            "url = \"\(haul.baseURL)/downloads\"\nrequest = \"POST\"\nheader = \"Content-Type: application/json\"\n"
                + "data = \"{\\\"url\\\": \\\"http://127.0.0.1:9/many/\(n).bin\\\", \\\"start_paused\\\": true}\"\n"
                + "output = \"/dev/null\"\n"
        }.joined(separator: "next\n")
        try Data(config.utf8).write(to: URL(fileURLWithPath: sandbox.file("add.cfg")))
        try runCommand("/usr/bin/curl", ["-sS", "--fail-with-body", "-K", sandbox.file("add.cfg")])
        XCTAssertEqual(int(try api.get("/stats").json["downloads"]), Int64(count))
    }

    func testSnapshotsOfManyDownloadsAreWrittenAsTheClientsRead() throws {
        // Stalled clients are not cut off during this test (testAClientThatStopsReading... covers that): a slow
        // machine (a sanitizer) must not lose the first before the last has connected.
        haul.stop()
        try startHaul(extra: ["--slow-client-timeout", "120"])
        try addPaused(3000)
        // Thirty clients ask for everything since event 1 (long forgotten: a snapshot) and then read nothing.
        let stalled = try (0..<30).map { _ in
            try SSEClient(port: haul.port, path: "/events", headers: ["Last-Event-ID": "1"], receiveBuffer: 4096)
        }
        try waitFor("30 streams", timeout: 60) { int(try api.get("/stats").json["event_streams"]) >= 30 }
        // Each stalled client is marked slow once its queue reaches the limit: then nothing more is queued for it.
        try waitFor("30 slow streams", timeout: 60) { int(try api.get("/stats").json["slow_event_streams"]) >= 30 }
        let queued = int(try api.get("/stats").json["event_queued_bytes"])
        // One snapshot of 3,000 downloads is about 2 MB; all of it queued for 30 clients would be 60 MB. Written a
        // piece at a time, each client holds at most the slow-client limit (256 KiB) and one piece.
        XCTAssertLessThan(queued, 30 * 400 * 1024, "\(queued) bytes queued for 30 clients that read nothing")

        // A client that reads gets the whole snapshot as one event, then live events after it.
        let reader = try SSEClient(port: haul.port, path: "/events", headers: ["Last-Event-ID": "1"])
        XCTAssertTrue(reader.read(timeout: 30) { $0.events.count >= 1 })
        let snapshot = try XCTUnwrap(reader.events.first)
        XCTAssertEqual(snapshot.event, "snapshot")
        let downloads = try XCTUnwrap(snapshot.json["downloads"] as? [[String: Any]], String(snapshot.data.prefix(200)))
        XCTAssertEqual(downloads.count, 3000)
        XCTAssertEqual(Set(downloads.compactMap { $0["id"] as? String }).count, 3000)
        let id = try XCTUnwrap(downloads.last?["id"] as? String)
        XCTAssertEqual(try api.request("DELETE", "/downloads/\(id)").status, 204)
        XCTAssertTrue(reader.read(timeout: 10) { $0.has("removed") })

        // When the stalled ones go, what they held goes with them.
        stalled.forEach { $0.disconnect() }
        try waitFor("the stalled streams to be freed", timeout: 20) {
            let stats = try api.get("/stats").json
            return int(stats["event_streams"]) <= 1 && int(stats["event_queued_bytes"]) < 400 * 1024
        }
    }
}
