import Foundation
import HaulCore
import HaulLoop
import XCTest
@testable import HaulAPI

/// A long list: search, sort, strict query parameters, and actions on many downloads at once.
final class ListAndActionTests: XCTestCase {
    private func ids(_ fixture: APIFixture, _ target: String) -> [String] {
        (fixture.json(fixture.call("GET", target))["downloads"] as? [[String: Any]] ?? []).compactMap {
            $0["id"] as? String
        }
    }

    private func add(_ fixture: APIFixture, _ url: String, _ extra: String = "") -> String {
        fixture.json(fixture.call("POST", "/downloads", json: #"{"url":"\#(url)","start_paused":true\#(extra)}"#))["id"]
            as? String ?? ""
    }

    /// Removing most of a long list (in slices, the order's entries swept out as they go) leaves the rest listed
    /// in creation order, page by page, and new ones after them.
    func testTheListKeepsItsOrderAcrossManyRemovals() throws {
        let fixture = try APIFixture()
        let items = (0..<700).map { "{\"url\":\"http://127.0.0.1:9/o\($0).bin\",\"start_paused\":true}" }
        let added = fixture.json(
            fixture.call("POST", "/downloads", json: "{\"downloads\":[\(items.joined(separator: ","))]}"))
        let all = (added["results"] as? [[String: Any]] ?? []).compactMap {
            ($0["download"] as? [String: Any])?["id"] as? String
        }
        XCTAssertEqual(all.count, 700)
        let doomed = all.enumerated().filter { $0.offset % 7 != 0 }.map(\.element)
        let body = "{\"action\":\"remove\",\"ids\":[\(doomed.map { "\"\($0)\"" }.joined(separator: ","))]}"
        XCTAssertEqual(fixture.json(fixture.call("POST", "/downloads/actions", json: body))["succeeded"] as? Int, 600)
        let kept = all.enumerated().filter { $0.offset % 7 == 0 }.map(\.element)
        var listed: [String] = []
        var cursor: String?
        repeat {
            let page = fixture.json(fixture.call("GET", "/downloads?limit=30" + (cursor.map { "&cursor=\($0)" } ?? "")))
            listed += (page["downloads"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
            cursor = (page["next_cursor"] as? String) ?? (page["next_cursor"] as? Int).map(String.init)
        } while cursor != nil
        XCTAssertEqual(listed, kept)
        let later = add(fixture, "http://127.0.0.1:9/later.bin")
        XCTAssertEqual(ids(fixture, "/downloads?limit=1000"), kept + [later])
        XCTAssertEqual(fixture.json(fixture.call("GET", "/stats"))["downloads"] as? Int, 101)
    }

    func testSearchAndSort() throws {
        let fixture = try APIFixture()
        let b = add(fixture, "http://127.0.0.1:9/b-Ubuntu.iso")
        let a = add(fixture, "http://127.0.0.1:9/pub/file.bin", #","filename":"Alpha ubuntu.txt""#)
        let c = add(fixture, "http://u:secret@127.0.0.1:9/c.tar")
        XCTAssertEqual(ids(fixture, "/downloads?q=UBUNTU"), [b, a], "name and URL, without case, in creation order")
        XCTAssertEqual(ids(fixture, "/downloads?q=pub%2Ffile"), [a])
        XCTAssertEqual(ids(fixture, "/downloads?q=secret"), [], "a password in a URL is not searched")
        XCTAssertEqual(ids(fixture, "/downloads?sort=name"), [a, b, c])
        XCTAssertEqual(ids(fixture, "/downloads?sort=-name"), [c, b, a])
        XCTAssertEqual(ids(fixture, "/downloads?sort=-created"), [c, a, b])
        XCTAssertEqual(ids(fixture, "/downloads?sort=size"), [b, a, c], "unknown sizes tie: creation order")
        // Pages of a sort go by position.
        let first = fixture.json(fixture.call("GET", "/downloads?sort=-name&limit=2"))
        XCTAssertEqual((first["downloads"] as? [[String: Any]])?.compactMap { $0["id"] as? String }, [c, b])
        let cursor = try XCTUnwrap(first["next_cursor"] as? String)
        XCTAssertEqual(ids(fixture, "/downloads?sort=-name&limit=2&cursor=\(cursor)"), [a])
        XCTAssertEqual(ids(fixture, "/downloads?cursor=\(cursor)"), [c], "a position in creation order is one too")
        XCTAssertEqual(fixture.call("GET", "/downloads?cursor=x1").status, 422)
        XCTAssertEqual(ids(fixture, "/downloads?sort=name&state=paused&q=ubuntu"), [a, b])
        for bad in ["sort=colour", "sort=--name", "q=", "q=" + String(repeating: "x", count: 201)] {
            XCTAssertEqual(fixture.call("GET", "/downloads?" + bad).status, 422, bad)
        }
    }

    func testUnknownQueryParametersAreRefused() throws {
        let fixture = try APIFixture()
        let id = add(fixture, "http://127.0.0.1:9/x.bin")
        for target in [
            "/downloads?staet=paused", "/downloads/\(id)?verbose=1", "/stats?x=1", "/settings?all=1",
            "/downloads?state=paused&extra=", "/events?access_token=x&since=1",
        ] {
            let reply = fixture.call("GET", target)
            XCTAssertEqual(reply.status, 400, target)
            XCTAssertTrue((fixture.json(reply)["detail"] as? String ?? "").hasPrefix("unknown query parameter"), target)
        }
        XCTAssertEqual(fixture.call("DELETE", "/downloads/\(id)?delete_files=true").status, 400)
        XCTAssertEqual(fixture.call("GET", "/downloads?state=paused&limit=5&q=x&sort=-size").status, 200)
        XCTAssertEqual(fixture.call("GET", "/healthz?probe=1").status, 200, "a liveness probe may add what it likes")
        XCTAssertEqual(fixture.call("GET", "/?utm=1").status, 200, "and so may a link to the dashboard")
    }

    func testActionsOnManyDownloadsAtOnce() throws {
        let fixture = try APIFixture()
        let all = (0..<5).map { add(fixture, "http://127.0.0.1:9/\($0).bin") }
        let resumed = fixture.json(
            fixture.call(
                "POST", "/downloads/actions",
                json: #"{"action":"resume","ids":["\#(all[0])","nope","\#(all[1])"]}"#))
        XCTAssertEqual((resumed["results"] as? [[String: Any]])?.map { $0["status"] as? Int }, [200, 404, 200])
        XCTAssertEqual(resumed["succeeded"] as? Int, 2)
        XCTAssertEqual(resumed["failed"] as? Int, 1)
        XCTAssertNotEqual(fixture.engine.snapshot(all[0])?.download.state, .paused)

        // By state: every paused one removed, nothing else.
        let removed = fixture.json(
            fixture.call(
                "POST", "/downloads/actions",
                json: #"{"action":"remove","state":["paused"]}"#))
        XCTAssertEqual(removed["succeeded"] as? Int, 3)
        XCTAssertEqual(
            Set((removed["results"] as? [[String: Any]])?.compactMap { $0["id"] as? String } ?? []),
            Set(all[2...]))
        XCTAssertEqual(fixture.engine.count, 2)
        for bad in [
            #"{"action":"explode","ids":["a"]}"#, #"{"action":"pause"}"#, #"{"action":"pause","ids":[]}"#,
            #"{"action":"pause","ids":["a"],"state":["paused"]}"#,
            #"{"action":"pause","ids":["a"],"delete_file":true}"#,
            #"{"action":"remove","state":["sleeping"]}"#, #"{"action":"pause","ids":[1]}"#,
        ] {
            XCTAssertEqual(fixture.call("POST", "/downloads/actions", json: bad).status, 422, bad)
        }
    }
}
