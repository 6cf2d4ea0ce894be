import Foundation
import XCTest

/// A change is visible to every read that starts after its answer: the download's status, the list and its
/// filter by state, and the fronts that read the same downloads (aria2's JSON-RPC). Asked at once, with no wait between
/// the change's answer and the reads, cycle after cycle: whichever loop or snapshot answers a read, it is never
/// older than the last change a client was told of.
final class ReadAfterChangeTests: HaulTestCase {
    // Two loops on any machine: status reads of downloads at rest are answered on the API's own loop.
    override var serveArguments: [String] { super.serveArguments + ["--threads", "2"] }

    private func rpc(_ method: String, _ params: [Any] = []) throws -> [[String: Any]] {
        let reply = try api.request(
            "POST", "/jsonrpc", json: ["jsonrpc": "2.0", "id": "r", "method": method, "params": params])
        XCTAssertEqual(reply.status, 200, reply.text)
        return reply.json["result"] as? [[String: Any]] ?? []
    }

    /// aria2's status of each download it lists, by the URL it fetches.
    private func aria2Statuses() throws -> [String: String] {
        var statuses: [String: String] = [:]
        for entry in try rpc("aria2.tellActive") + rpc("aria2.tellWaiting", [0, 1000])
            + rpc("aria2.tellStopped", [0, 1000])
        {
            let files = entry["files"] as? [[String: Any]] ?? []
            let uris = files.first?["uris"] as? [[String: Any]] ?? []
            if let uri = uris.first?["uri"] as? String { statuses[uri] = entry["status"] as? String }
        }
        return statuses
    }

    private func listed(_ query: String) throws -> [String: [String: Any]] {
        let reply = try api.get("/downloads?limit=1000" + query)
        XCTAssertEqual(reply.status, 200, reply.text)
        var byID: [String: [String: Any]] = [:]
        for download in reply.json["downloads"] as? [[String: Any]] ?? [] {
            if let id = download["id"] as? String { byID[id] = download }
        }
        return byID
    }

    func testEveryReadStartedAfterAChangesAnswerSeesIt() throws {
        try sandbox.makeRandomFile("www/slow.bin", size: 4_000_000)
        // Trickled, so a resumed download is still running when the next change comes.
        let urls = (0..<6).map { originURL("slow.bin", "rate=200000&n=\($0)") }
        var ids: [String] = []
        for (n, url) in urls.enumerated() {
            let id = try add(["url": url, "filename": "f\(n).bin", "start_paused": true])
            // Added: every read knows it, paused.
            XCTAssertEqual(try download(id)["state"] as? String, "paused")
            XCTAssertEqual(try listed("")[id]?["state"] as? String, "paused")
            XCTAssertNotNil(try listed("&state=paused")[id])
            XCTAssertEqual(try aria2Statuses()[url], "paused")
            ids.append(id)
        }
        for cycle in 0..<8 {
            for (id, url) in zip(ids, urls) {
                XCTAssertEqual(try patch(id, ["state": "queued"]).status, 200)
                let resumed = try download(id)["state"] as? String
                XCTAssertNotEqual(resumed, "paused", "cycle \(cycle): the status read before the resume")
                XCTAssertNil(try listed("&state=paused")[id], "cycle \(cycle): listed as paused after its resume")
                XCTAssertNotEqual(try aria2Statuses()[url], "paused", "cycle \(cycle): aria2 read before the resume")

                XCTAssertEqual(try patch(id, ["state": "paused"]).status, 200)
                XCTAssertEqual(try download(id)["state"] as? String, "paused", "cycle \(cycle)")
                // Read again, at rest: from the answer the first read put up.
                XCTAssertEqual(try download(id)["state"] as? String, "paused", "cycle \(cycle)")
                XCTAssertNotNil(try listed("&state=paused")[id], "cycle \(cycle): not listed as paused")
                XCTAssertEqual(try aria2Statuses()[url], "paused", "cycle \(cycle)")

                let tags = "cycle\(cycle)"
                XCTAssertEqual(try patch(id, ["priority": cycle, "tags": tags]).status, 200)
                for _ in 0..<2 {
                    let read = try download(id)
                    XCTAssertEqual(int(read["priority"]), Int64(cycle), "cycle \(cycle)")
                    XCTAssertEqual(read["tags"] as? String, tags, "cycle \(cycle)")
                }
                let entry = try listed("&state=paused")[id]
                XCTAssertEqual(int(entry?["priority"]), Int64(cycle), "cycle \(cycle): the list read before it")
                XCTAssertEqual(entry?["tags"] as? String, tags, "cycle \(cycle): the list read before it")
            }
        }
        for (id, url) in zip(ids, urls) {
            XCTAssertEqual(try api.request("DELETE", "/downloads/\(id)?delete_file=true").status, 204)
            XCTAssertEqual(try api.get("/downloads/\(id)").status, 404)
            XCTAssertNil(try listed("")[id])
            XCTAssertNil(try aria2Statuses()[url])
        }
        XCTAssertEqual(int(try api.get("/stats").json["downloads"]), 0)
        // Reads of the paused downloads were answered beside the engine's loop, and none was stale.
        let metrics = try api.get("/metrics").text
        let beside = metrics.split(separator: "\n").first { $0.hasPrefix("haul_http_requests_answered_beside_total ") }
        XCTAssertGreaterThan(Double(beside?.split(separator: " ").last ?? "") ?? 0, 0, String(beside ?? ""))
    }
}
