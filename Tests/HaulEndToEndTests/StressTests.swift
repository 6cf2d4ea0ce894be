import Foundation
import XCTest

/// Many clients at once, each adding (one by one or by batch), pausing, resuming, reading (the REST API, aria2's
/// JSON-RPC, qBittorrent's API) and removing downloads while transfers run: every answer is one a client can act on,
/// and every file kept is exact at the end, with nothing left beside it.
final class StressTests: HaulTestCase {
    override var serveArguments: [String] {
        super.serveArguments + ["--max-active", "16", "--progress-interval", "0.05"]
    }

    /// What a client saw go wrong, gathered from every client's thread.
    private final class Findings: @unchecked Sendable {
        private let lock = NSLock()
        private var problems: [String] = []
        private var kept: [String: String] = [:]
        private var removed: [String] = []
        private var pausedMidway = 0

        func problem(_ text: String) { lock.withLock { problems.append(text) } }
        func keep(_ id: String, name: String) { lock.withLock { kept[id] = name } }
        func remove(_ id: String) { lock.withLock { removed.append(id) } }
        func pausedWithPart() { lock.withLock { pausedMidway += 1 } }
        var result: (problems: [String], kept: [String: String], removed: [String], pausedMidway: Int) {
            lock.withLock { (problems, kept, removed, pausedMidway) }
        }
    }

    /// An event-stream client read on a thread of its own until told which downloads' ends to wait for; the
    /// client is handed back once the thread has stopped.
    private final class StreamReader: @unchecked Sendable {
        private let client: SSEClient
        private let lock = NSLock()
        private var awaited: (ids: [String], deadline: Date)?
        private let stopped = DispatchSemaphore(value: 0)

        init(port: UInt16) throws {
            client = try SSEClient(port: port, path: "/events")
            Thread.detachNewThread { [self] in
                while !client.closed {
                    if let (ids, deadline) = lock.withLock({ awaited }),
                        Date() > deadline || ids.allSatisfy({ client.has("state", id: $0, state: "completed") })
                    {
                        break
                    }
                    _ = client.read(timeout: 0.05) { _ in false }
                }
                stopped.signal()
            }
        }

        func finish(when completed: [String], deadline: Date) -> SSEClient {
            lock.withLock { awaited = (completed, deadline) }
            stopped.wait()
            return client
        }
    }

    /// A small generator with a fixed seed per client, so a failing run can be read again.
    private struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    func testManyClientsChangingAndReadingWhileTransfersRunLeaveEveryFileExact() throws {
        let clients = 8
        let perClient = 6
        var digests: [String: String] = [:]
        var sizes = SplitMix(state: 47)
        for client in 0..<clients {
            for n in 0..<perClient {
                // From a part of one connection to several ranges at once (the origin trickles each connection).
                let name = "c\(client)-\(n).bin"
                digests[name] = try sandbox.makeRandomFile(
                    "www/" + name, size: Int.random(in: 20_000...3_000_000, using: &sizes))
            }
        }
        let findings = Findings()
        let api = self.api!
        // One more client follows the event stream throughout, on a thread of its own.
        let stream = try StreamReader(port: haul.port)
        let origin = origin.baseURL

        DispatchQueue.concurrentPerform(iterations: clients) { client in
            var random = SplitMix(state: UInt64(client) &+ 1)
            func check(_ reply: Client.Reply?, _ what: String, _ allowed: Set<Int>) {
                guard let reply else { return findings.problem("\(what): no answer") }
                if !allowed.contains(reply.status) {
                    findings.problem("\(what): \(reply.status) \(reply.text.prefix(300))")
                } else if reply.status >= 400, reply.header("Content-Type") != "application/problem+json" {
                    findings.problem("\(what): \(reply.status) without a problem document")
                }
            }
            /// Reads `id` and notes a problem unless it is paused (`paused`) or not.
            func readState(_ id: String, _ name: String, _ what: String, paused: Bool) {
                let reply = try? api.get("/downloads/\(id)")
                check(reply, "\(what) of \(name)", [200])
                guard let reply, reply.status == 200 else { return }
                let state = reply.json["state"] as? String
                if (state == "paused") != paused {
                    findings.problem(
                        "\(what) of \(name): state \(state ?? "none"), expected \(paused ? "" : "not ")paused")
                }
            }
            var mine: [(id: String, name: String)] = []
            let names = (0..<perClient).map { "c\(client)-\($0).bin" }
            func source(_ name: String) -> [String: Any] { ["url": origin + "/files/" + name + "?rate=3000000"] }
            if client % 2 == 0 {
                // Half the clients add theirs one by one, the others by batch.
                for name in names {
                    let reply = try? api.request("POST", "/downloads", json: source(name))
                    check(reply, "add \(name)", [201])
                    if let id = reply?.json["id"] as? String { mine.append((id, name)) }
                }
            } else {
                let reply = try? api.request("POST", "/downloads", json: ["downloads": names.map(source)])
                check(reply, "add by batch", [200])
                let results = reply?.json["results"] as? [[String: Any]] ?? []
                for (name, result) in zip(names, results) {
                    if result["status"] as? Int != 201 { findings.problem("batch added \(name): \(result)") }
                    if let id = (result["download"] as? [String: Any])?["id"] as? String { mine.append((id, name)) }
                }
            }
            if mine.count != names.count { findings.problem("client \(client) added \(mine.count) of \(names.count)") }
            // The rounds begin once bytes flow (a batch is added in a moment), so pauses find transfers running.
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline, ((try? api.get("/stats"))?.json["received_bytes"] as? Int ?? 0) == 0 {
                usleep(5_000)
            }
            // Rounds of what clients do: read one, read pages, pause, resume, and now and then remove one.
            for round in 0..<30 where !mine.isEmpty {
                let pick = Int.random(in: 0..<mine.count, using: &random)
                let (id, name) = mine[pick]
                switch Int.random(in: 0..<12, using: &random) {
                case 0, 1:
                    let reply = try? api.get("/downloads/\(id)")
                    check(reply, "read \(name)", [200])
                    if let reply, reply.status == 200, reply.json["id"] as? String != id {
                        findings.problem("read \(name) answered \(reply.text.prefix(200))")
                    }
                case 2:
                    let reply = try? api.get("/downloads?limit=100")
                    check(reply, "page", [200])
                    if let reply, reply.status == 200, reply.json["downloads"] as? [Any] == nil {
                        findings.problem("page without downloads: \(reply.text.prefix(200))")
                    }
                case 3:
                    check(try? api.get("/downloads?state=downloading,queued&limit=100"), "page by state", [200])
                case 4:
                    check(try? api.get("/stats"), "stats", [200])
                case 10:
                    // The fronts other clients use read the same downloads: aria2's JSON-RPC and qBittorrent's API.
                    let reply = try? api.request(
                        "POST", "/jsonrpc",
                        json: ["jsonrpc": "2.0", "id": "\(client)", "method": "aria2.tellActive", "params": []])
                    check(reply, "aria2.tellActive", [200])
                    if let reply, reply.status == 200, reply.json["result"] as? [Any] == nil {
                        findings.problem("aria2.tellActive: \(reply.text.prefix(200))")
                    }
                case 11:
                    let reply = try? api.get("/api/v2/torrents/info")
                    check(reply, "torrents/info", [200])
                    let listed = reply.flatMap { try? JSONSerialization.jsonObject(with: $0.body) } as? [Any]
                    if let reply, reply.status == 200, listed == nil {
                        findings.problem("torrents/info: \(reply.text.prefix(200))")
                    }
                case 5, 6:
                    // A download that completed meanwhile cannot be paused: 409, and that is an answer.
                    let reply = try? api.request("PATCH", "/downloads/\(id)", json: ["state": "paused"])
                    check(reply, "pause \(name)", [200, 409])
                    if let reply, reply.status == 200, (reply.json["received_bytes"] as? Int ?? 0) > 0 {
                        findings.pausedWithPart()
                    }
                    // Only this client changes its downloads: every read after the pause's answer sees it paused
                    // (the second, of a download at rest, may be answered beside the engine's loop).
                    if let reply, reply.status == 200 {
                        for read in 0..<2 { readState(id, name, "read \(read) after the pause", paused: true) }
                    }
                case 7, 8:
                    let reply = try? api.request("PATCH", "/downloads/\(id)", json: ["state": "queued"])
                    check(reply, "resume \(name)", [200, 409])
                    if let reply, reply.status == 200 { readState(id, name, "read after the resume", paused: false) }
                default:
                    // One in four clients' picks of a removal go through; the rest read the events' counters.
                    if round % 4 == client % 4 {
                        check(
                            try? api.request("DELETE", "/downloads/\(id)?delete_file=true"), "remove \(name)", [204])
                        findings.remove(id)
                        mine.remove(at: pick)
                    } else {
                        check(try? api.get("/downloads/\(id)"), "read \(name)", [200])
                    }
                }
            }
            // Everything the client still holds goes on to the end.
            for (id, name) in mine {
                check(
                    try? api.request("PATCH", "/downloads/\(id)", json: ["state": "queued"]), "last resume \(name)",
                    [200, 409])
                findings.keep(id, name: name)
            }
        }

        let (problems, kept, removed, pausedMidway) = findings.result
        XCTAssertEqual(problems, [])
        XCTAssertFalse(kept.isEmpty)
        XCTAssertFalse(removed.isEmpty, "the rounds should have removed some downloads")
        XCTAssertGreaterThan(pausedMidway, 0, "some pauses should have stopped a transfer with bytes kept")
        var paths: Set<String> = []
        for (id, name) in kept {
            let done = try waitForState(id, "completed", timeout: 120)
            let path = try downloadedPath(done)
            XCTAssertEqual(try sha256(path), digests[name], name)
            paths.insert((path as NSString).lastPathComponent)
        }
        for id in removed {
            XCTAssertEqual(try api.get("/downloads/\(id)").status, 404, id)
        }
        // The stream, read all along, told of every download's end: completed for those kept, removed for the others.
        let events = stream.finish(when: Array(kept.keys), deadline: Date().addingTimeInterval(10))
        XCTAssertFalse(events.closed, "the event stream was cut off")
        for id in kept.keys { XCTAssertTrue(events.has("state", id: id, state: "completed"), id) }
        for id in removed { XCTAssertTrue(events.has("removed", id: id), id) }
        events.disconnect()
        // No part file, journal or copy left beside the files kept: a removal took its file with it.
        let left = try FileManager.default.contentsOfDirectory(atPath: sandbox.file("downloads"))
        XCTAssertEqual(Set(left), paths)
        let stats = try api.get("/stats").json
        XCTAssertEqual(int(stats["active"]), 0, "\(stats)")
        XCTAssertEqual(int(stats["downloads"]), Int64(kept.count), "\(stats)")
        XCTAssertEqual(int(stats["completed"]), Int64(kept.count), "\(stats)")
    }
}
