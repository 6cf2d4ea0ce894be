import Foundation
import XCTest

/// With two loops, a status read of a download at rest is answered on the API's own loop from the answer the engine
/// put up, with no turn of the engine's: the same bytes, never older than the last change a client was told of,
/// and only where the gate would have let it through unchanged (the server's token, from an address not blocked
/// for wrong ones; no Origin to answer).
final class ReadsBesideTests: HaulTestCase {
    let token = "beside-token-for-the-tests"
    var bearer: [String: String] { ["Authorization": "Bearer \(token)"] }

    override var serveArguments: [String] {
        super.serveArguments + [
            "--threads", "2", "--token", token, "--cors-origin", "http://dash.example", "--qbittorrent-list-all",
        ]
    }

    private func read(_ id: String, headers: [String: String] = [:]) throws -> Client.Reply {
        try api.request("GET", "/downloads/\(id)", headers: bearer.merging(headers) { _, new in new })
    }

    /// Status reads answered beside the engine's loop so far (`/metrics`, answered after every read before it).
    private func answeredBeside() throws -> Int {
        let text = try api.request("GET", "/metrics", headers: bearer).text
        let name = "haul_http_requests_answered_beside_total "
        let line = try XCTUnwrap(text.split(separator: "\n").first { $0.hasPrefix(name) })
        return Int(Double(line.dropFirst(name.count)) ?? -1)
    }

    func testAReadBesideIsTheEnginesAnswerAndNeverOlderThanAChange() throws {
        let digest = try sandbox.makeRandomFile("www/rest.bin", size: 600_000)
        let id = try add(["url": originURL("rest.bin", "rate=300000"), "start_paused": true], bearer: bearer)
        let first = try read(id)
        XCTAssertEqual(first.status, 200)
        let before = try answeredBeside()
        let again = try read(id)
        XCTAssertEqual(try answeredBeside(), before + 1, "the second read of a paused download is answered beside")
        XCTAssertEqual(again.body, first.body)
        XCTAssertEqual(again.header("ETag"), first.header("ETag"))
        XCTAssertEqual(again.header("Content-Type"), "application/json")
        XCTAssertEqual(again.header("Referrer-Policy"), "no-referrer")
        let notModified = try read(id, headers: ["If-None-Match": try XCTUnwrap(first.header("ETag"))])
        XCTAssertEqual(notModified.status, 304)
        XCTAssertEqual(notModified.header("ETag"), first.header("ETag"))
        XCTAssertEqual(try answeredBeside(), before + 2)

        // Each change is seen by the read right after its answer.
        for priority in 1...5 {
            let changed = try api.request(
                "PATCH", "/downloads/\(id)", json: ["priority": priority, "tags": "p\(priority)"], headers: bearer)
            XCTAssertEqual(changed.status, 200)
            for _ in 0..<3 {
                let now = try read(id).json
                XCTAssertEqual(int(now["priority"]), Int64(priority))
                XCTAssertEqual(now["tags"] as? String, "p\(priority)")
            }
        }
        let afterChanges = try answeredBeside()
        XCTAssertGreaterThanOrEqual(afterChanges, before + 2 + 5 * 2, "reads after each change's first")

        // Running, it is read from the engine: its bytes move, then it completes.
        let resumed = try api.request("PATCH", "/downloads/\(id)", json: ["state": "queued"], headers: bearer)
        XCTAssertEqual(resumed.status, 200)
        XCTAssertNotEqual(try read(id).json["state"] as? String, "paused")
        var seen: Set<Int64> = []
        try waitFor("the download to complete", timeout: 30) {
            let now = try read(id).json
            seen.insert(int(now["received_bytes"]))
            return now["state"] as? String == "completed"
        }
        XCTAssertGreaterThan(seen.count, 2, "the reads followed its progress: \(seen.sorted())")
        let done = try read(id).json
        XCTAssertEqual(int(done["received_bytes"]), 600_000)
        XCTAssertEqual(try sha256(try downloadedPath(done)), digest)

        // Removed: the next read is the engine's 404, not the answer put up.
        XCTAssertEqual(try read(id).status, 200)
        XCTAssertEqual(try api.request("DELETE", "/downloads/\(id)", headers: bearer).status, 204)
        XCTAssertEqual(try read(id).status, 404)
    }

    /// The ids a page of the list shows, with each one's fields.
    private func page(_ target: String) throws -> (sequence: Int64, downloads: [String: [String: Any]], ids: [String]) {
        let reply = try api.request("GET", target, headers: bearer)
        XCTAssertEqual(reply.status, 200, reply.text)
        let list = try XCTUnwrap(reply.json["downloads"] as? [[String: Any]])
        let ids = list.compactMap { $0["id"] as? String }
        return (int(reply.json["sequence"]), Dictionary(uniqueKeysWithValues: zip(ids, list)), ids)
    }

    /// A page of the list whose downloads all rest is answered beside from its second read, with the engine's
    /// bytes; whatever could change it (a change of a download it shows or not, an add, a removal, an event, which
    /// moves the page's sequence) is seen by the read right after its answer; a page showing a running download
    /// follows its bytes.
    func testAPageBesideIsTheEnginesAnswerAndNeverOlderThanAChange() throws {
        var ids: [String] = []
        for index in 0..<3 {
            ids.append(try add(["url": originURL("page\(index).bin"), "start_paused": true], bearer: bearer))
        }
        let all = "/downloads?limit=10"
        let first = try api.request("GET", all, headers: bearer)
        XCTAssertEqual(first.status, 200)
        let before = try answeredBeside()
        let again = try api.request("GET", all, headers: bearer)
        XCTAssertEqual(try answeredBeside(), before + 1, "the second read of a page at rest is answered beside")
        XCTAssertEqual(again.body, first.body)
        XCTAssertEqual(again.header("ETag"), first.header("ETag"))
        XCTAssertEqual(again.header("Content-Type"), "application/json")
        let tag = try XCTUnwrap(first.header("ETag"))
        let notModified = try api.request("GET", all, headers: bearer.merging(["If-None-Match": tag]) { $1 })
        XCTAssertEqual(notModified.status, 304)
        XCTAssertEqual(try answeredBeside(), before + 2)

        // A page of one: a change of a download it does not show is in the delta from the page's sequence.
        let one = "/downloads?limit=1"
        let firstOfOne = try page(one)
        XCTAssertEqual(firstOfOne.ids, [ids[0]])
        let besideBefore = try answeredBeside()
        XCTAssertEqual(try page(one).sequence, firstOfOne.sequence)
        XCTAssertEqual(try answeredBeside(), besideBefore + 1)
        XCTAssertEqual(
            try api.request("PATCH", "/downloads/\(ids[2])", json: ["priority": 4], headers: bearer).status, 200)
        XCTAssertEqual(try page(one).ids, [ids[0]])
        let delta = try page("/downloads?changed_since=\(firstOfOne.sequence)")
        XCTAssertEqual(delta.ids, [ids[2]])
        XCTAssertEqual(int(delta.downloads[ids[2]]?["priority"]), 4)

        // A change of a download it shows, an add and a removal, each seen by the next read, twice.
        XCTAssertEqual(
            try api.request("PATCH", "/downloads/\(ids[0])", json: ["tags": "changed"], headers: bearer).status,
            200)
        for _ in 0..<2 { XCTAssertEqual(try page(all).downloads[ids[0]]?["tags"] as? String, "changed") }
        let added = try add(["url": originURL("page3.bin"), "start_paused": true], bearer: bearer)
        for _ in 0..<2 { XCTAssertEqual(try page(all).ids, ids + [added]) }
        XCTAssertEqual(try api.request("DELETE", "/downloads/\(ids[1])", headers: bearer).status, 204)
        for _ in 0..<2 { XCTAssertEqual(try page(all).ids, [ids[0], ids[2], added]) }

        // Running, its page follows its bytes to the end.
        let digest = try sandbox.makeRandomFile("www/page-run.bin", size: 600_000)
        let running = try add(["url": originURL("page-run.bin", "rate=300000")], bearer: bearer)
        var seen: Set<Int64> = []
        try waitFor("the download to complete", timeout: 30) {
            let now = try XCTUnwrap(try page(all).downloads[running])
            seen.insert(int(now["received_bytes"]))
            return now["state"] as? String == "completed"
        }
        XCTAssertGreaterThan(seen.count, 2, "the pages followed its progress: \(seen.sorted())")
        let done = try XCTUnwrap(try page(all).downloads[running])
        XCTAssertEqual(int(done["received_bytes"]), 600_000)
        XCTAssertEqual(try sha256(try downloadedPath(done)), digest)
    }

    /// One aria2 call by POST: `params` after the token (`token` nil: none), with `headers`.
    private func rpc(
        _ method: String, _ params: [Any], id: Any = "t", token: String? = nil, headers: [String: String] = [:]
    ) throws -> Client.Reply {
        let given: [Any] = (token.map { ["token:\($0)"] } ?? []) + params
        return try api.request(
            "POST", "/jsonrpc", json: ["jsonrpc": "2.0", "id": id, "method": method, "params": given],
            headers: headers)
    }

    /// aria2's `tellStatus` about a download at rest is answered beside from the second call, with the engine's
    /// bytes and the call's own id and keys; each change is seen by the call right after its answer; a call the
    /// gate must see (no token, a wrong one, an Origin, a batch) is the engine's, and a removed download's too.
    func testAria2sTellStatusBesideIsTheEnginesAnswerAndNeverOlderThanAChange() throws {
        let digest = try sandbox.makeRandomFile("www/rpc.bin", size: 600_000)
        let source = originURL("rpc.bin", "rate=300000")
        let added = try rpc("aria2.addUri", [[source], ["pause": "true"]], token: token)
        let gid = try XCTUnwrap(added.json["result"] as? String, added.text)
        func tell(
            _ keys: [String]? = nil, id: Any = "t", token: String? = token, headers: [String: String] = [:]
        )
            throws -> Client.Reply
        {
            try rpc("aria2.tellStatus", [gid] + (keys.map { [$0] } ?? []), id: id, token: token, headers: headers)
        }
        func status(_ reply: Client.Reply) -> [String: Any] { reply.json["result"] as? [String: Any] ?? [:] }

        let first = try tell()
        XCTAssertEqual(first.status, 200, first.text)
        XCTAssertEqual(status(first)["status"] as? String, "paused")
        let before = try answeredBeside()
        let again = try tell()
        XCTAssertEqual(try answeredBeside(), before + 1, "the second call about a paused download is answered beside")
        XCTAssertEqual(again.body, first.body)
        XCTAssertEqual(again.header("Content-Type"), "application/json-rpc")
        XCTAssertEqual(again.header("Referrer-Policy"), "no-referrer")
        let some = try tell(["status", "gid", "nope", "totalLength"], id: 7)
        XCTAssertEqual(try answeredBeside(), before + 2)
        XCTAssertEqual(some.json["id"] as? Int, 7)
        XCTAssertEqual(Set(status(some).keys), ["status", "gid", "totalLength"])
        // The engine's answer to the same call (an Origin takes it there) has the same bytes.
        let engines = try tell(
            ["status", "gid", "nope", "totalLength"], id: 7, headers: ["Origin": "http://dash.example"])
        XCTAssertEqual(try answeredBeside(), before + 2)
        XCTAssertEqual(some.body, engines.body)

        // What the gate must see goes to the engine, answered as before.
        XCTAssertEqual(try tell(token: nil).json["error"].map { _ in 1 }, 1, "no token: Unauthorized")
        XCTAssertEqual(try tell(token: "wrong").status, 400)
        let cors = try tell(headers: ["Origin": "http://dash.example"])
        XCTAssertEqual(status(cors)["gid"] as? String, gid)
        XCTAssertEqual(cors.header("Access-Control-Allow-Origin"), "http://dash.example")
        let batch = try api.request(
            "POST", "/jsonrpc",
            json: [["jsonrpc": "2.0", "id": 1, "method": "aria2.tellStatus", "params": ["token:\(token)", gid]]])
        XCTAssertEqual(batch.status, 200)
        XCTAssertEqual(try answeredBeside(), before + 2)

        // Each change is seen by the call right after its answer: unpaused, it runs and completes.
        XCTAssertEqual(try rpc("aria2.unpause", [gid], token: token).json["result"] as? String, gid)
        XCTAssertNotEqual(status(try tell())["status"] as? String, "paused")
        var seen: Set<String> = []
        try waitFor("the download to complete", timeout: 30) {
            let now = status(try tell())
            seen.insert(now["completedLength"] as? String ?? "")
            return now["status"] as? String == "complete"
        }
        XCTAssertGreaterThan(seen.count, 2, "the calls followed its progress: \(seen.sorted())")
        let done = status(try tell())
        XCTAssertEqual(done["completedLength"] as? String, "600000")
        let files = try XCTUnwrap(done["files"] as? [[String: Any]])
        XCTAssertEqual(try sha256(try XCTUnwrap(files.first?["path"] as? String)), digest)
        let beside = try answeredBeside()
        XCTAssertEqual(try tell().body, try tell().body)
        XCTAssertGreaterThanOrEqual(try answeredBeside(), beside + 1, "a complete download is answered beside")

        // Removed: the engine's answer, not the status put up.
        XCTAssertEqual(try rpc("aria2.removeDownloadResult", [gid], token: token).json["result"] as? String, "OK")
        let gone = try tell()
        XCTAssertEqual(gone.status, 400)
        XCTAssertEqual((gone.json["error"] as? [String: Any])?["message"] as? String, "GID \(gid) is not found")
    }

    /// qBittorrent's `torrents/info` from a session the server's token logged in (as Sonarr and Radarr call it)
    /// is answered beside from its second GET while what it lists rests, with the engine's bytes, and keeps the
    /// session alive; each change is seen by the GET right after its answer; a Referer, a wrong bearer, no
    /// credentials or a logged-out session are the engine's to answer.
    func testQBittorrentsTorrentsInfoBesideIsTheEnginesAnswerAndNeverOlderThanAChange() throws {
        let login = try api.request(
            "POST", "/api/v2/auth/login", body: Data("username=admin&password=\(token)".utf8),
            headers: ["Content-Type": "application/x-www-form-urlencoded"])
        XCTAssertEqual(login.text, "Ok.")
        let cookie = try XCTUnwrap(login.header("Set-Cookie")?.split(separator: ";").first.map(String.init))
        let session = ["Cookie": cookie]
        let digest = try sandbox.makeRandomFile("www/qbit.bin", size: 600_000)
        let id = try add(["url": originURL("qbit.bin", "rate=300000"), "start_paused": true], bearer: bearer)
        let target = "/api/v2/torrents/info?sort=name"
        func info(_ headers: [String: String] = session) throws -> Client.Reply {
            try api.request("GET", target, headers: headers)
        }
        func items(_ reply: Client.Reply) throws -> [[String: Any]] {
            try XCTUnwrap(try JSONSerialization.jsonObject(with: reply.body) as? [[String: Any]], reply.text)
        }

        let first = try info()
        XCTAssertEqual(first.status, 200, first.text)
        XCTAssertEqual(try items(first).first?["state"] as? String, "pausedDL")
        let before = try answeredBeside()
        let again = try info()
        XCTAssertEqual(try answeredBeside(), before + 1, "the second GET of a list at rest is answered beside")
        XCTAssertEqual(again.body, first.body)
        XCTAssertEqual(again.header("Content-Type"), "application/json")
        XCTAssertEqual(try info(bearer).body, first.body)
        XCTAssertEqual(try answeredBeside(), before + 2, "the server's token as a bearer, beside")

        // What its CSRF check or the gate must see goes to the engine.
        XCTAssertEqual(try info(session.merging(["Referer": "http://evil.example/"]) { $1 }).status, 401)
        // (The test's client sends the session's cookie with any request: these go on a connection of their own.)
        for fields in ["Authorization: Bearer wrong\r\n", "Cookie: SID=none\r\n", ""] {
            let answer = RawConnection.exchange(
                port: haul.port,
                "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\(fields)\r\n")
            XCTAssertTrue(answer.hasPrefix("HTTP/1.1 403"), answer)
        }
        XCTAssertEqual(try answeredBeside(), before + 2)

        // Each change is seen by the GET right after its answer.
        XCTAssertEqual(
            try api.request("PATCH", "/downloads/\(id)", json: ["tags": "seen"], headers: bearer).status, 200)
        for _ in 0..<2 { XCTAssertEqual(try items(try info()).first?["tags"] as? String, "seen") }
        XCTAssertEqual(
            try api.request("PATCH", "/downloads/\(id)", json: ["state": "queued"], headers: bearer).status, 200)
        XCTAssertNotEqual(try items(try info()).first?["state"] as? String, "pausedDL")
        var seen: Set<Int64> = []
        try waitFor("the download to complete", timeout: 30) {
            let now = try XCTUnwrap(try items(try info()).first)
            seen.insert(int(now["completed"]))
            return (now["progress"] as? Double) == 1
        }
        XCTAssertGreaterThan(seen.count, 2, "the GETs followed its progress: \(seen.sorted())")
        XCTAssertEqual(try sha256(try downloadedPath(try read(id).json)), digest)
        let besideDone = try answeredBeside()
        XCTAssertEqual(try info().body, try info().body)
        XCTAssertGreaterThanOrEqual(try answeredBeside(), besideDone + 1, "a list of a finished download, beside")

        // Logged out, its session is the engine's to refuse.
        XCTAssertEqual(try api.request("POST", "/api/v2/auth/logout", headers: session).status, 200)
        XCTAssertEqual(try info().status, 403)
    }

    /// A change of the settings or of a category takes every answer down (a front may show what it works out with
    /// them): the read right after it is the engine's, the next one beside again.
    func testSettingsAndCategoriesTakeEveryAnswerDown() throws {
        let id = try add(["url": originURL("settings.bin"), "start_paused": true], bearer: bearer)
        XCTAssertEqual(try read(id).status, 200)
        var before = try answeredBeside()
        XCTAssertEqual(try read(id).status, 200)
        XCTAssertEqual(try answeredBeside(), before + 1)
        let changes: [(String, String, [String: Any])] = [
            ("PATCH", "/settings", ["max_active": 3]), ("PUT", "/categories/films", ["directory": "films"]),
        ]
        for (method, path, body) in changes {
            XCTAssertLessThan(try api.request(method, path, json: body, headers: bearer).status, 300, path)
            before = try answeredBeside()
            XCTAssertEqual(try read(id).status, 200)
            XCTAssertEqual(try answeredBeside(), before, "the read after \(path) is the engine's")
            XCTAssertEqual(try read(id).status, 200)
            XCTAssertEqual(try answeredBeside(), before + 1)
        }
    }

    func testWhatTheGateMustSeeGoesToTheEngine() throws {
        let id = try add(["url": originURL("gate.bin"), "start_paused": true], bearer: bearer)
        XCTAssertEqual(try read(id).status, 200)
        XCTAssertEqual(try read(id).status, 200)
        let before = try answeredBeside()
        // No token, a wrong one, an Origin to answer, a query (this route takes none): each answered as before, by
        // the engine.
        XCTAssertEqual(try api.get("/downloads/\(id)").status, 401)
        XCTAssertEqual(
            try api.request("GET", "/downloads/\(id)", headers: ["Authorization": "Bearer nope"]).status, 401)
        let cors = try read(id, headers: ["Origin": "http://dash.example"])
        XCTAssertEqual(cors.status, 200)
        XCTAssertEqual(cors.header("Access-Control-Allow-Origin"), "http://dash.example")
        XCTAssertEqual(try api.request("GET", "/downloads/\(id)?x=1", headers: bearer).status, 400)
        XCTAssertEqual(try answeredBeside(), before)

        // Past the burst of wrong tokens the address gets 429, the right token too, beside or not.
        for _ in 0..<12 {
            _ = try api.request("GET", "/downloads/\(id)", headers: ["Authorization": "Bearer wrong"])
        }
        XCTAssertEqual(try read(id).status, 429)
        XCTAssertEqual(try api.request("GET", "/stats", headers: bearer).status, 429)
    }
}

extension HaulTestCase {
    /// POSTs a download with `headers` and returns its id, requiring 201.
    func add(_ body: [String: Any], bearer headers: [String: String]) throws -> String {
        let reply = try api.request("POST", "/downloads", json: body, headers: headers)
        XCTAssertEqual(reply.status, 201, reply.text)
        return try XCTUnwrap(reply.json["id"] as? String)
    }
}
