import Foundation
import XCTest

/// `GET /metrics` as Prometheus reads it, and the log lines (`--log-format json`) an operator follows.
final class ObservabilityTests: HaulTestCase {
    override var serveArguments: [String] { super.serveArguments + ["--log-format", "json"] }

    func testMetricsPassPromtoolAndCountWhatHappened() throws {
        _ = try sandbox.makeRandomFile("www/m.bin", size: 300_000)
        let id = try add(["url": originURL("m.bin")])
        try waitForState(id, "completed")
        XCTAssertEqual(try api.get("/nope").status, 404)
        let stream = try SSEClient(port: haul.port, path: "/events")
        defer { stream.disconnect() }
        try waitFor("the stream to count") { self.metric(try self.scrape(), "haul_event_streams") == 1 }

        let text = try scrape()
        let checked = try execute("/usr/bin/promtool", ["check", "metrics"], input: Data(text.utf8))
        XCTAssertEqual(checked.status, 0, "promtool: \(checked.output)\n\(text)")
        XCTAssertEqual(metric(text, "haul_downloads{state=\"completed\"}"), 1)
        XCTAssertEqual(metric(text, "haul_downloads{state=\"failed\"}"), 0)
        XCTAssertEqual(metric(text, "haul_downloaded_bytes_total"), 300_000)
        XCTAssertEqual(metric(text, "haul_http_requests_total{method=\"POST\",route=\"/downloads\",status=\"201\"}"), 1)
        XCTAssertEqual(metric(text, "haul_http_requests_total{method=\"GET\",route=\"unmatched\",status=\"404\"}"), 1)
        XCTAssertEqual(metric(text, "haul_http_requests_total{method=\"GET\",route=\"/events\",status=\"200\"}"), 1)
        // The histogram's last bucket counts every request of its route.
        let polls = try XCTUnwrap(metric(text, "haul_http_request_duration_seconds_count{route=\"/downloads/{id}\"}"))
        XCTAssertGreaterThan(polls, 0)
        XCTAssertEqual(
            metric(text, "haul_http_request_duration_seconds_bucket{le=\"+Inf\",route=\"/downloads/{id}\"}"),
            polls)
        XCTAssertGreaterThan(try XCTUnwrap(metric(text, "process_resident_memory_bytes")), 1_000_000)
    }

    /// The log's lines as JSON objects, each checked for its time and level.
    private func logLines() throws -> [[String: Any]] {
        let log = try String(contentsOfFile: sandbox.file("haul.log"), encoding: .utf8)
        var lines: [[String: Any]] = []
        for line in log.split(separator: "\n") {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            lines.append(try XCTUnwrap(object, "not a JSON object: \(line)"))
            XCTAssertNotNil(object?["time"] as? String)
            XCTAssertNotNil(object?["level"] as? String)
        }
        return lines
    }

    func testAtInfoADownloadSaysItWasAddedAndHowItEndedAndAtDebugEveryStep() throws {
        _ = try sandbox.makeRandomFile("www/i.bin", size: 10_000)
        let id = try add(["url": originURL("i.bin")])
        try waitForState(id, "completed")
        let mine = try logLines().filter { $0["download.id"] as? String == id }
        XCTAssertEqual(mine.map { $0["msg"] as? String }, ["download added", "download completed"], "\(mine)")
        XCTAssertEqual(mine.last?["file.size"] as? String, "10000")
        XCTAssertEqual(mine.last?["level"] as? String, "info")

        haul.stop()
        try startHaul(extra: ["--log-level", "debug"])
        let again = try add(["url": originURL("i.bin"), "filename": "again.bin"])
        try waitForState(again, "completed")
        let steps = try logLines().filter { $0["download.id"] as? String == again && $0["state.to"] != nil }
        XCTAssertEqual(steps.map { $0["state.to"] as? String }, ["probing", "downloading", "verifying", "completed"])
        XCTAssertEqual(steps.dropLast().map { $0["level"] as? String }, ["debug", "debug", "debug"])
    }

    func testJSONLogHasALinePerRequestAndPerStateChange() throws {
        _ = try sandbox.makeRandomFile("www/l.bin", size: 10_000)
        let id = try add(["url": originURL("l.bin")])
        try waitForState(id, "completed")
        XCTAssertEqual(try patch(id, ["state": "paused"]).status, 409)
        let missing = try add(["url": originURL("absent.bin")])
        try waitForState(missing, "failed")
        let paused = try add(["url": originURL("l.bin"), "filename": "paused.bin", "start_paused": true])
        XCTAssertEqual(try patch(paused, ["state": "queued"]).status, 200)
        try waitForState(paused, "completed")

        let lines = try logLines()
        let requests = lines.filter { $0["msg"] as? String == "request" }
        XCTAssertTrue(
            requests.contains {
                $0["http.method"] as? String == "POST" && $0["http.path"] as? String == "/downloads"
                    && $0["http.status"] as? String == "201"
            }, "\(requests)")
        XCTAssertTrue(
            requests.contains {
                $0["http.method"] as? String == "PATCH" && $0["http.status"] as? String == "409"
            }, "\(requests)")
        let states = lines.filter { $0["download.id"] as? String == id && $0["state.to"] != nil }
            .map { $0["state.to"] as! String }
        XCTAssertEqual(states, ["completed"])
        // A client's change is an info line of its own.
        let resumed = lines.filter { $0["download.id"] as? String == paused && $0["state.to"] != nil }
        XCTAssertEqual(resumed.map { $0["state.from"] as? String }, ["paused", "verifying"], "\(resumed)")
        let failure = try XCTUnwrap(
            lines.first { $0["download.id"] as? String == missing && $0["state.to"] as? String == "failed" })
        XCTAssertEqual(failure["error.code"] as? String, "http_404")
        XCTAssertEqual(failure["level"] as? String, "warning")
    }

    private func scrape() throws -> String {
        let reply = try api.get("/metrics")
        XCTAssertEqual(reply.status, 200)
        XCTAssertEqual(reply.header("Content-Type"), "text/plain; version=0.0.4; charset=utf-8")
        return reply.text
    }

    /// The value of the sample written exactly as `series` (name and labels in the server's order).
    private func metric(_ text: String, _ series: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.dropFirst(series.count + 1))
        }
        return nil
    }
}
