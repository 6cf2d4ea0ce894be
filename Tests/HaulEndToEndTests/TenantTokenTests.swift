import Foundation
import XCTest

/// Tokens with a root, a quota and a running limit over real HTTP: two tenants of one server neither see, change
/// nor fetch each other's downloads, their files land under their own folders, their quotas and limits hold, and an
/// event stream carries only what its token may GET.
final class TenantTokenTests: HaulTestCase {
    private let admin = "the-servers-own-token-43"

    override var serveArguments: [String] { super.serveArguments + ["--token", admin] }

    private struct Token {
        let id: String
        let secret: String
    }

    private func makeToken(_ body: [String: Any], file: StaticString = #filePath, line: UInt = #line) throws -> Token {
        let reply = try call("POST", "/tokens", admin, body)
        XCTAssertEqual(reply.status, 201, reply.text, file: file, line: line)
        return Token(id: reply.json["id"] as? String ?? "", secret: reply.json["secret"] as? String ?? "")
    }

    private func call(_ method: String, _ path: String, _ token: String, _ json: Any? = nil) throws -> Client.Reply {
        try api.request(method, path, json: json, headers: ["Authorization": "Bearer " + token])
    }

    private func add(
        _ body: [String: Any], as token: String, file: StaticString = #filePath,
        line: UInt = #line
    ) throws -> [String: Any] {
        let reply = try call("POST", "/downloads", token, body)
        XCTAssertEqual(reply.status, 201, reply.text, file: file, line: line)
        return reply.json
    }

    /// Polls `id` with `token` until it is in `state` (or another final one).
    @discardableResult
    private func wait(_ id: String, _ state: String, as token: String) throws -> [String: Any] {
        var last: [String: Any] = [:]
        try waitFor("\(id) to be \(state)") {
            last = try self.call("GET", "/downloads/\(id)", token).json
            let now = last["state"] as? String
            return now == state || now == "completed" || now == "failed"
        }
        XCTAssertEqual(last["state"] as? String, state, "\(last)")
        return last
    }

    private func ids(_ reply: Client.Reply) -> Set<String> {
        Set((reply.json["downloads"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String })
    }

    func testTwoTenantsNeitherSeeNorTouchEachOthersDownloads() throws {
        let alice = try makeToken(["name": "alice", "scope": "add", "root": "alice", "quota_bytes": 10_000_000])
        let bob = try makeToken(["name": "bob", "scope": "add", "root": "bob", "quota_bytes": 10_000_000])
        let aliceHash = try sandbox.makeRandomFile("www/a.bin", size: 100_000)
        let bobHash = try sandbox.makeRandomFile("www/b.bin", size: 120_000)
        let mine = try add(["url": originURL("a.bin")], as: alice.secret)
        let theirs = try add(["url": originURL("b.bin"), "directory": "sub"], as: bob.secret)
        let (aliceID, bobID) = (mine["id"] as? String ?? "", theirs["id"] as? String ?? "")
        XCTAssertNil(mine["owner"], "an add token is not shown owners")
        try wait(aliceID, "completed", as: alice.secret)
        let done = try wait(bobID, "completed", as: bob.secret)
        XCTAssertEqual(done["path"] as? String, "bob/sub/b.bin")
        XCTAssertEqual(try sha256(sandbox.file("downloads/alice/a.bin")), aliceHash)
        XCTAssertEqual(try sha256(sandbox.file("downloads/bob/sub/b.bin")), bobHash)

        // Alice sees her own only, and Bob's is not there for her whatever she asks.
        XCTAssertEqual(ids(try call("GET", "/downloads", alice.secret)), [aliceID])
        XCTAssertEqual(ids(try call("GET", "/downloads?state=completed&sort=-size", alice.secret)), [aliceID])
        for (method, path, body) in [
            ("GET", "/downloads/\(bobID)", nil), ("GET", "/downloads/\(bobID)/file", nil),
            ("GET", "/downloads/\(bobID)/events", nil),
            ("PATCH", "/downloads/\(bobID)", ["state": "paused"]),
            ("DELETE", "/downloads/\(bobID)?delete_file=true", nil),
        ] as [(String, String, Any?)] {
            XCTAssertEqual(try call(method, path, alice.secret, body).status, 404, "\(method) \(path)")
        }
        let acted = try call("POST", "/downloads/actions", alice.secret, ["action": "remove", "ids": [bobID]])
        XCTAssertEqual((acted.json["results"] as? [[String: Any]])?.first?["status"] as? Int, 404, acted.text)
        XCTAssertEqual(try call("GET", "/stats", alice.secret).json["downloads"] as? Int, 1)
        let file = try call("GET", "/downloads/\(aliceID)/file", alice.secret)
        XCTAssertEqual(file.status, 200)
        let fetched = sandbox.file("fetched.bin")
        try file.body.write(to: URL(fileURLWithPath: fetched))
        XCTAssertEqual(try sha256(fetched), aliceHash)
        XCTAssertTrue(FileManager.default.fileExists(atPath: sandbox.file("downloads/bob/sub/b.bin")))

        // The admin sees both, with who added each; the token's own listing says what it holds.
        XCTAssertEqual(try call("GET", "/downloads/\(bobID)", admin).json["owner"] as? String, "bob")
        let me = try call("GET", "/token", alice.secret).json
        XCTAssertEqual(me["root"] as? String, "alice")
        XCTAssertEqual(me["scope"] as? String, "add")
        XCTAssertEqual(me["used_bytes"] as? Int, 100_000)

        // Paths cannot leave the root; a category outside it is refused, one inside it is used.
        XCTAssertEqual(
            try call(
                "POST", "/downloads", alice.secret,
                [
                    "url": originURL("a.bin"),
                    "directory": "../x",
                ]
            ).status, 422)
        XCTAssertEqual(try call("PUT", "/categories/films", admin, ["directory": "films"]).status, 201)
        XCTAssertEqual(try call("PUT", "/categories/alicefilms", admin, ["directory": "alice/films"]).status, 201)
        let outside = try call("POST", "/downloads", alice.secret, ["url": originURL("a.bin"), "category": "films"])
        XCTAssertEqual(outside.status, 422, outside.text)
        XCTAssertTrue(outside.text.contains("outside the token's root"), outside.text)
        let inside = try add(["url": originURL("a.bin"), "category": "alicefilms"], as: alice.secret)
        let filed = try wait(inside["id"] as? String ?? "", "completed", as: alice.secret)
        XCTAssertEqual(filed["path"] as? String, "alice/films/a.bin")
        XCTAssertEqual(try sha256(sandbox.file("downloads/alice/films/a.bin")), aliceHash)

        // The aria2 front keeps the same walls.
        let rpc = { (token: String, method: String, params: [Any]) throws -> [String: Any] in
            try self.api.request(
                "POST", "/jsonrpc",
                json: [
                    "jsonrpc": "2.0", "id": 1, "method": method,
                    "params": ["token:" + token] + params,
                ]
            ).json
        }
        let stopped = try XCTUnwrap(try rpc(alice.secret, "aria2.tellStopped", [0, 100])["result"] as? [[String: Any]])
        XCTAssertEqual(stopped.count, 2)
        let listedByBob = try XCTUnwrap(
            try rpc(bob.secret, "aria2.tellStopped", [0, 100])["result"] as? [[String: Any]])
        let gid = try XCTUnwrap(listedByBob.first?["gid"] as? String)
        XCTAssertNotNil(try rpc(alice.secret, "aria2.tellStatus", [gid])["error"], "alice must not read bob's GID")
        XCTAssertNotNil(try rpc(alice.secret, "aria2.removeDownloadResult", [gid])["error"])
        // Alice's dir is her root, as aria2 clients read it and send it back.
        let global = try XCTUnwrap(try rpc(alice.secret, "aria2.getGlobalOption", [])["result"] as? [String: Any])
        let aliceDir = try XCTUnwrap(global["dir"] as? String)
        XCTAssertTrue(aliceDir.hasSuffix("/downloads/alice"), aliceDir)
        let viaRPC = try XCTUnwrap(
            try rpc(
                alice.secret, "aria2.addUri",
                [[originURL("a.bin")], ["dir": aliceDir + "/rpc", "pause": "true"]])["result"]
                as? String)
        let added = try XCTUnwrap(
            try rpc(alice.secret, "aria2.tellStatus", [viaRPC, ["dir"]])["result"] as? [String: Any])
        XCTAssertEqual(added["dir"] as? String, aliceDir + "/rpc")
        XCTAssertNotNil(
            try rpc(
                alice.secret, "aria2.addUri",
                [
                    [originURL("a.bin")],
                    ["dir": sandbox.file("downloads/bob")],
                ])["error"],
            "a dir outside her root is refused")
        XCTAssertEqual(try call("GET", "/downloads/\(bobID)", admin).status, 200)

        // Revocation counts at the next request.
        XCTAssertEqual(try call("DELETE", "/tokens/\(bob.id)", admin).status, 204)
        XCTAssertEqual(try call("GET", "/downloads", bob.secret).status, 401)
    }

    func testTheCLIMakesATenantAndListsWhatItHolds() throws {
        let created = try haulCommand(
            [
                "token", "create", "frank", "--scope", "add", "--root", "frank", "--quota", "1M",
                "--max-active", "2",
            ], environment: ["HAUL_TOKEN": admin])
        XCTAssertEqual(created.status, 0, created.output)
        let secretLine = created.stdout.split(separator: "\n").first { $0.hasPrefix("secret ") } ?? ""
        let secret = String(secretLine.split(separator: " ").last ?? "")
        let hash = try sandbox.makeRandomFile("www/f.bin", size: 30_000)
        let added = try haulCommand(["add", originURL("f.bin"), "--wait"], environment: ["HAUL_TOKEN": secret])
        XCTAssertEqual(added.status, 0, added.output)
        XCTAssertEqual(try sha256(sandbox.file("downloads/frank/f.bin")), hash)
        let listed = try haulCommand(["token", "ls"], environment: ["HAUL_TOKEN": admin])
        XCTAssertTrue(listed.stdout.contains("root frank") && listed.stdout.contains("max-active 2"), listed.stdout)
        XCTAssertTrue(listed.stdout.contains("quota 29.3 KiB/1.00 MiB"), listed.stdout)
        let bad = try haulCommand(["token", "create", "x", "--quota", "lots"], environment: ["HAUL_TOKEN": admin])
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue(bad.stderr.contains("--quota"), bad.stderr)
    }

    func testAnAddTokenWithoutARootSeesAllButChangesOnlyItsOwn() throws {
        let adder = try makeToken(["name": "extension", "scope": "add"])
        _ = try sandbox.makeRandomFile("www/c.bin", size: 10_000)
        let theirs = try call("POST", "/downloads", admin, ["url": originURL("c.bin"), "start_paused": true])
        let theirsID = theirs.json["id"] as? String ?? ""
        XCTAssertEqual(try call("GET", "/downloads/\(theirsID)", adder.secret).status, 200)
        let refused = try call("PATCH", "/downloads/\(theirsID)", adder.secret, ["state": "queued"])
        XCTAssertEqual(refused.status, 403, refused.text)
        XCTAssertEqual(refused.json["type"] as? String, "urn:haul:problem:not-owner")
        XCTAssertEqual(try call("DELETE", "/downloads/\(theirsID)", adder.secret).status, 403)
        let own = try add(["url": originURL("c.bin"), "directory": "mine", "start_paused": true], as: adder.secret)
        let ownID = own["id"] as? String ?? ""
        XCTAssertEqual(try call("PATCH", "/downloads/\(ownID)", adder.secret, ["priority": 3]).status, 200)
        XCTAssertEqual(try call("DELETE", "/downloads/\(ownID)", adder.secret).status, 204)
        XCTAssertEqual(try call("GET", "/downloads/\(theirsID)", admin).json["state"] as? String, "paused")
        // Each change is logged with the token's id and name, never its secret; a plain read is not.
        let log = try String(contentsOfFile: sandbox.file("haul.log"), encoding: .utf8)
        let changes = log.split(separator: "\n").filter { $0.contains(adder.id) }
        XCTAssertTrue(changes.contains { $0.contains("DELETE") && $0.contains("extension") }, log)
        XCTAssertFalse(changes.contains { $0.contains("\"GET\"") || $0.contains("http.method=GET") }, log)
        XCTAssertFalse(log.contains(adder.secret))
    }

    func testTheQuotaHoldsAtPostAndWhenTheOriginsSizePassesIt() throws {
        let carol = try makeToken(["name": "carol", "scope": "add", "root": "carol", "quota_bytes": 150_000])
        _ = try sandbox.makeRandomFile("www/big.bin", size: 200_000)
        let hash = try sandbox.makeRandomFile("www/small.bin", size: 100_000)
        _ = try sandbox.makeRandomFile("www/more.bin", size: 100_000)

        let told = try call("POST", "/downloads", carol.secret, ["url": originURL("big.bin"), "size": 200_000])
        XCTAssertEqual(told.status, 507, told.text)
        XCTAssertEqual(told.json["type"] as? String, "urn:haul:problem:quota-exceeded")

        // The origin's size is over the quota: failed before a byte is written.
        let big = try add(["url": originURL("big.bin")], as: carol.secret)
        let failed = try wait(big["id"] as? String ?? "", "failed", as: carol.secret)
        XCTAssertEqual((failed["error"] as? [String: Any])?["code"] as? String, "quota_exceeded", "\(failed)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.file("downloads/carol/big.bin")))

        let small = try add(["url": originURL("small.bin")], as: carol.secret)
        try wait(small["id"] as? String ?? "", "completed", as: carol.secret)
        XCTAssertEqual(try sha256(sandbox.file("downloads/carol/small.bin")), hash)
        // 100,000 held: another 100,000 passes the quota, whether its size is announced or not.
        let more = try add(["url": originURL("more.bin")], as: carol.secret)
        let over = try wait(more["id"] as? String ?? "", "failed", as: carol.secret)
        XCTAssertEqual((over["error"] as? [String: Any])?["code"] as? String, "quota_exceeded")
        let unknown = try add(
            ["url": originURL("more.bin", "nolength=1"), "filename": "unknown.bin"],
            as: carol.secret)
        let grew = try wait(unknown["id"] as? String ?? "", "failed", as: carol.secret)
        XCTAssertEqual((grew["error"] as? [String: Any])?["code"] as? String, "quota_exceeded", "\(grew)")
        XCTAssertEqual(
            try call(
                "POST", "/downloads", carol.secret,
                [
                    "url": originURL("more.bin"),
                    "size": 60_000,
                ]
            ).status, 507)
        // The admin has no quota.
        let admins = try call("POST", "/downloads", admin, ["url": originURL("big.bin")])
        XCTAssertEqual(admins.status, 201)
        try wait(admins.json["id"] as? String ?? "", "completed", as: admin)
    }

    func testDownloadsOfUnknownSizeRunningTogetherStayUnderTheQuota() throws {
        // Three files of 400,000 bytes with no Content-Length under a 1,000,000 quota, running at once (each
        // trickled, so they grow side by side): all three cannot fit; whichever would pass the quota fails, and
        // what the token holds never passes it. By REST, by batch and by aria2's addUri alike.
        let dave = try makeToken(["name": "dave", "scope": "add", "root": "dave", "quota_bytes": 1_000_000])
        for name in ["u1.bin", "u2.bin", "u3.bin"] { _ = try sandbox.makeRandomFile("www/" + name, size: 400_000) }
        let url = { (name: String) in self.originURL(name, "nolength=1&norange=1&rate=400000") }
        _ = try add(["url": url("u1.bin")], as: dave.secret)
        let batch = try call("POST", "/downloads", dave.secret, ["downloads": [["url": url("u2.bin")]]])
        XCTAssertEqual(batch.status, 200, batch.text)
        let rpc = try api.request(
            "POST", "/jsonrpc",
            json: [
                "jsonrpc": "2.0", "id": "1", "method": "aria2.addUri",
                "params": ["token:" + dave.secret, [url("u3.bin")]],
            ])
        XCTAssertNotNil(rpc.json["result"] as? String, rpc.text)
        // The token's root: it sees its own three only.
        let ids = (try call("GET", "/downloads", dave.secret).json["downloads"] as? [[String: Any]] ?? [])
            .compactMap { $0["id"] as? String }
        XCTAssertEqual(ids.count, 3)
        var ended: [[String: Any]] = []
        try waitFor("the three to end", timeout: 60) {
            ended = try ids.map { try self.call("GET", "/downloads/\($0)", dave.secret).json }
            return ended.allSatisfy { $0["state"] as? String == "completed" || $0["state"] as? String == "failed" }
        }
        let failed = ended.filter { $0["state"] as? String == "failed" }
        XCTAssertFalse(failed.isEmpty, "three files of 400,000 bytes all fitted a 1,000,000 quota: \(ended)")
        for download in failed {
            XCTAssertEqual((download["error"] as? [String: Any])?["code"] as? String, "quota_exceeded", "\(download)")
        }
        let held = ended.reduce(Int64(0)) { $0 + int($1["received_bytes"]) }
        XCTAssertLessThanOrEqual(held, 1_000_000, "\(ended)")
        XCTAssertLessThanOrEqual(int(try call("GET", "/token", dave.secret).json["used_bytes"]), 1_000_000)
    }

    func testMaxActiveHoldsWithoutHoldingUpOthers() throws {
        let dave = try makeToken(["name": "dave", "scope": "add", "root": "dave", "max_active": 1])
        _ = try sandbox.makeRandomFile("www/slow.bin", size: 120_000)
        let hash = try sandbox.makeRandomFile("www/quick.bin", size: 50_000)
        var daves: [String] = []
        for index in 0..<3 {
            daves.append(
                try add(
                    ["url": originURL("slow.bin", "rate=40000"), "filename": "slow\(index).bin"],
                    as: dave.secret)["id"] as? String ?? "")
        }
        // Added after Dave's three, it does not wait for them.
        let quick = try call("POST", "/downloads", admin, ["url": originURL("quick.bin")])
        let quickID = quick.json["id"] as? String ?? ""
        try wait(quickID, "completed", as: admin)
        XCTAssertEqual(try sha256(sandbox.file("downloads/quick.bin")), hash)
        var sawOneRunning = false
        for _ in 0..<20 {
            let states = try daves.map { try call("GET", "/downloads/\($0)", dave.secret).json["state"] as? String }
            let running = states.filter { ["probing", "downloading", "verifying"].contains($0 ?? "") }.count
            XCTAssertLessThanOrEqual(running, 1, "\(states)")
            if running == 1 { sawOneRunning = true }
            Thread.sleep(forTimeInterval: 0.1)
        }
        XCTAssertTrue(sawOneRunning)
        // As the running one ends, the next of Dave's starts.
        try wait(daves[0], "completed", as: dave.secret)
        try waitFor("the second of Dave's to start") {
            let state = try self.call("GET", "/downloads/\(daves[1])", dave.secret).json["state"] as? String
            return state == "downloading" || state == "completed"
        }
        for id in daves { _ = try call("DELETE", "/downloads/\(id)?delete_file=true", dave.secret) }
    }

    func testAStreamCarriesOnlyWhatItsTokenMayGet() throws {
        let erin = try makeToken(["name": "erin", "scope": "add", "root": "erin"])
        let reader = try makeToken(["name": "wall", "scope": "read"])
        _ = try sandbox.makeRandomFile("www/e.bin", size: 20_000)
        let erinStream = try SSEClient(
            port: haul.port, path: "/events",
            headers: ["Authorization": "Bearer " + erin.secret])
        // A ticket Erin asks for opens the stream as Erin, walls included.
        let ticket = try XCTUnwrap(
            try call("POST", "/tickets", erin.secret, ["path": "/events"]).json["ticket"] as? String)
        let ticketStream = try SSEClient(port: haul.port, path: "/events?ticket=" + ticket)
        let readerStream = try SSEClient(
            port: haul.port, path: "/events",
            headers: ["Authorization": "Bearer " + reader.secret])
        let adminStream = try SSEClient(
            port: haul.port, path: "/events",
            headers: ["Authorization": "Bearer " + admin])
        let others = try call("POST", "/downloads", admin, ["url": originURL("e.bin")]).json["id"] as? String ?? ""
        let own = try add(["url": originURL("e.bin")], as: erin.secret)["id"] as? String ?? ""
        try wait(own, "completed", as: erin.secret)
        try wait(others, "completed", as: admin)
        _ = try call("DELETE", "/downloads/\(others)", admin)
        for stream in [erinStream, ticketStream] {
            XCTAssertTrue(stream.read { $0.has("state", id: own, state: "completed") })
            XCTAssertFalse(stream.events.contains { $0.data.contains(others) }, "\(stream.events.map(\.data))")
        }
        XCTAssertTrue(readerStream.read { $0.has("removed", id: others) })
        XCTAssertTrue(readerStream.events.contains { $0.data.contains(own) })
        XCTAssertFalse(readerStream.events.contains { $0.data.contains("\"owner\"") }, "owners are for managers")
        XCTAssertTrue(adminStream.read { $0.has("state", id: own, state: "completed") })
        XCTAssertTrue(adminStream.events.contains { $0.data.contains("\"owner\":\"erin\"") })
        // Polling deltas keep the same walls: another's removal is not listed.
        let delta = try call("GET", "/downloads?changed_since=0", erin.secret).json
        XCTAssertEqual((delta["removed"] as? [String]) ?? [], [])
        XCTAssertEqual(try call("GET", "/downloads/\(others)/events", erin.secret).status, 404)
    }

    /// The file route on an unfinished download has the finished file's access: a tenant reads its own download
    /// while it arrives, and another tenant's is not found.
    func testATenantReadsItsOwnUnfinishedFileAndNotAnothers() throws {
        let alice = try makeToken(["name": "alice", "scope": "add", "root": "alice"])
        let bob = try makeToken(["name": "bob", "scope": "add", "root": "bob"])
        _ = try sandbox.makeRandomFile("www/slow.bin", size: 1_000_000)
        let data = try Data(contentsOf: URL(fileURLWithPath: sandbox.file("www/slow.bin")))
        let mine = try add(["url": originURL("slow.bin", "rate=300000"), "connections": 1], as: alice.secret)
        let id = mine["id"] as? String ?? ""
        try waitFor("bytes on disk") {
            (try self.call("GET", "/downloads/\(id)", alice.secret).json["contiguous_bytes"] as? Int ?? 0) >= 10
        }
        let part = try api.request(
            "GET", "/downloads/\(id)/file", headers: ["Authorization": "Bearer " + alice.secret, "Range": "bytes=0-9"])
        XCTAssertEqual(part.status, 206, part.text)
        XCTAssertEqual(part.body, data.prefix(10))
        XCTAssertEqual(part.header("Cache-Control"), "no-store")
        let theirs = try api.request(
            "GET", "/downloads/\(id)/file", headers: ["Authorization": "Bearer " + bob.secret, "Range": "bytes=0-9"])
        XCTAssertEqual(theirs.status, 404, theirs.text)
        XCTAssertEqual(try call("PATCH", "/downloads/\(id)", alice.secret, ["state": "paused"]).status, 200)
    }
}
