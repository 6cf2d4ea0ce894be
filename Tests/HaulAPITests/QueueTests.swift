import Foundation
import HaulCore
import HaulLoop
import XCTest
@testable import HaulAPI

/// The queue as a client reorders it: moves by action and by PATCH, the order `sort=queue` lists and the scheduler
/// starts, priorities taken on the way, and what has no place in it.
final class QueueTests: XCTestCase {
    private func add(_ fixture: APIFixture, _ name: String, paused: Bool = false) -> String {
        let body = #"{"url": "http://127.0.0.1:9/\#(name)", "start_paused": \#(paused)}"#
        return fixture.json(fixture.call("POST", "/downloads", json: body))["id"] as? String ?? ""
    }

    /// The waiting downloads in the order they start, by name.
    private func queue(_ fixture: APIFixture) -> [String] {
        let page = fixture.json(fixture.call("GET", "/downloads?state=queued,paused&sort=queue"))
        return (page["downloads"] as? [[String: Any]] ?? []).compactMap { d in
            (d["url"] as? String)?.split(separator: "/").last.map(String.init)
        }
    }

    private func move(_ fixture: APIFixture, _ ids: [String], to: String) -> [[String: Any]] {
        let list = ids.map { "\"\($0)\"" }.joined(separator: ",")
        let reply = fixture.call(
            "POST", "/downloads/actions", json: #"{"action": "move", "to": "\#(to)", "ids": [\#(list)]}"#)
        XCTAssertEqual(reply.status, 200)
        return fixture.json(reply)["results"] as? [[String: Any]] ?? []
    }

    func testMovesReorderTheQueueAndTheSchedulerStartsItsHead() throws {
        let fixture = try APIFixture(maxActive: 1)
        let running = add(fixture, "run.bin")
        var id: [String: String] = [:]
        for name in ["b", "c", "d", "e"] { id[name] = add(fixture, name) }
        XCTAssertEqual(queue(fixture), ["b", "c", "d", "e"])

        let moved = move(fixture, [id["e"]!], to: "top")
        XCTAssertEqual(moved.first?["queue_position"] as? Int, 0)
        XCTAssertEqual(queue(fixture), ["e", "b", "c", "d"])
        _ = move(fixture, [id["b"]!], to: "down")
        XCTAssertEqual(queue(fixture), ["e", "c", "b", "d"])
        _ = move(fixture, [id["c"]!, id["d"]!], to: "top")
        XCTAssertEqual(queue(fixture), ["c", "d", "e", "b"], "several to the top: in the order given")
        _ = move(fixture, [id["c"]!, id["e"]!], to: "bottom")
        XCTAssertEqual(queue(fixture), ["d", "b", "c", "e"])
        _ = move(fixture, [id["b"]!, id["c"]!], to: "up")
        XCTAssertEqual(queue(fixture), ["b", "c", "d", "e"], "each one place up, keeping their order")

        // PATCH to a place; a paused download keeps its place and can be moved too.
        XCTAssertEqual(fixture.call("PATCH", "/downloads/\(id["e"]!)", json: #"{"queue_position": 1}"#).status, 200)
        XCTAssertEqual(queue(fixture), ["b", "e", "c", "d"])
        XCTAssertEqual(fixture.call("PATCH", "/downloads/\(id["c"]!)", json: #"{"state": "paused"}"#).status, 200)
        XCTAssertEqual(queue(fixture), ["b", "e", "c", "d"])
        XCTAssertEqual(fixture.call("PATCH", "/downloads/\(id["c"]!)", json: #"{"queue_position": 0}"#).status, 200)
        XCTAssertEqual(queue(fixture), ["c", "b", "e", "d"])

        // Past a higher priority it takes that priority: the order stays what the priorities say.
        XCTAssertEqual(fixture.call("PATCH", "/downloads/\(id["d"]!)", json: #"{"priority": 5}"#).status, 200)
        XCTAssertEqual(queue(fixture), ["d", "c", "b", "e"])
        let top = move(fixture, [id["e"]!], to: "top")
        XCTAssertEqual((top.first?["download"] as? [String: Any])?["priority"] as? Int, 5)
        XCTAssertEqual(queue(fixture), ["e", "d", "c", "b"])

        // Running, finished or unknown: no place in the queue.
        let refused = move(fixture, [running, "nosuchid", id["b"]!], to: "top")
        XCTAssertEqual(refused.map { $0["status"] as? Int }, [409, 404, 200])
        XCTAssertEqual(fixture.call("PATCH", "/downloads/\(running)", json: #"{"queue_position": 0}"#).status, 409)
        for bad in [
            #"{"action": "move", "ids": ["x"]}"#, #"{"action": "move", "to": "sideways", "ids": ["x"]}"#,
            #"{"action": "pause", "to": "top", "ids": ["x"]}"#,
        ] {
            XCTAssertEqual(fixture.call("POST", "/downloads/actions", json: bad).status, 422, bad)
        }
        XCTAssertEqual(fixture.call("PATCH", "/downloads/\(id["b"]!)", json: #"{"queue_position": -1}"#).status, 422)

        XCTAssertEqual(queue(fixture), ["b", "e", "d", "c"])

        // The running one goes: the head of the queue starts.
        XCTAssertEqual(fixture.call("DELETE", "/downloads/\(running)").status, 204)
        let head = fixture.json(fixture.call("GET", "/downloads/\(id["b"]!)"))
        XCTAssertEqual(head["state"] as? String, "probing", "the first in the queue started")
        XCTAssertEqual(queue(fixture), ["e", "d", "c"])

        // What was moved is stored: the store gives the same places back.
        let waiting = Set([id["e"]!, id["d"]!, id["c"]!])
        let stored = try fixture.store.loadAll().filter { waiting.contains($0.id) }.sorted {
            ($0.priority, -$0.queueOrder) > ($1.priority, -$1.queueOrder)
        }
        XCTAssertEqual(stored.map(\.id), [id["e"]!, id["d"]!, id["c"]!])
    }

    func testAnIDPrefixFindsTheDownloadsItStarts() throws {
        let fixture = try APIFixture()
        let a = fixture.addPaused("http://127.0.0.1:9/a.bin")
        let b = fixture.addPaused("http://127.0.0.1:9/b.bin")
        let list = { (prefix: String) in
            (fixture.json(fixture.call("GET", "/downloads?id_prefix=\(prefix)"))["downloads"] as? [[String: Any]] ?? [])
                .compactMap { $0["id"] as? String }
        }
        XCTAssertEqual(list(a), [a])
        XCTAssertEqual(list(String(b.prefix(15))), [b])
        XCTAssertEqual(list(String(a.prefix(6)).uppercased()), [a], "without case, as ids are written")
        XCTAssertEqual(Set(list("")), [], "empty is refused")
        XCTAssertEqual(fixture.call("GET", "/downloads?id_prefix=").status, 422)
    }
}
