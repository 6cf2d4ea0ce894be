import Foundation
import XCTest

/// aria2's JSON-RPC at /jsonrpc over real HTTP: a download's life in aria2's words (added, waiting, active,
/// complete, removed, purged), its file exact; the token as aria2's `token:` parameter; what aria2 clients may not
/// do (a `dir` outside the root, hooks, logs); GET, JSONP, batches and multicall.
final class Aria2RPCTests: HaulTestCase {
    private var nextID = 0

    /// One call's whole answer (`result` or `error`) and the HTTP status.
    private func rpc(
        _ method: String, _ params: [Any] = [], path: String = "/jsonrpc"
    ) throws
        -> (status: Int, answer: [String: Any])
    {
        nextID += 1
        let reply = try api.request(
            "POST", path,
            json: [
                "jsonrpc": "2.0", "id": "t\(nextID)", "method": method,
                "params": params,
            ])
        XCTAssertEqual(reply.header("Content-Type"), "application/json-rpc")
        let answer = reply.json
        XCTAssertEqual(answer["id"] as? String, "t\(nextID)")
        XCTAssertEqual(answer["jsonrpc"] as? String, "2.0")
        return (reply.status, answer)
    }

    private func result(
        _ method: String, _ params: [Any] = [], file: StaticString = #filePath,
        line: UInt = #line
    ) throws -> Any {
        let (status, answer) = try rpc(method, params)
        XCTAssertEqual(status, 200, "\(method): \(answer)", file: file, line: line)
        return try XCTUnwrap(answer["result"], "\(method): \(answer)", file: file, line: line)
    }

    private func error(_ method: String, _ params: [Any] = []) throws -> (code: Int, message: String) {
        let (status, answer) = try rpc(method, params)
        XCTAssertEqual(status, 400, "\(answer)")
        let error = try XCTUnwrap(answer["error"] as? [String: Any], "\(method): \(answer)")
        return (error["code"] as? Int ?? 0, error["message"] as? String ?? "")
    }

    private func status(_ gid: String) throws -> [String: Any] {
        try XCTUnwrap(try result("aria2.tellStatus", [gid]) as? [String: Any])
    }

    private func waitForStatus(_ gid: String, _ wanted: String, timeout: TimeInterval = 60) throws -> [String: Any] {
        var last: [String: Any] = [:]
        try waitFor("status \(wanted)", timeout: timeout) {
            last = try self.status(gid)
            return last["status"] as? String == wanted
        }
        return last
    }

    private func downloadCount() throws -> Int { (try api.get("/downloads").json["downloads"] as? [Any])?.count ?? -1 }

    func testADownloadsLifeInAria2sWords() throws {
        let hash = try sandbox.makeRandomFile("www/rpc.bin", size: 3 << 20 + 17)
        let gid = try XCTUnwrap(
            try result(
                "aria2.addUri",
                [
                    [originURL("rpc.bin")],
                    [
                        "split": "4", "max-connection-per-server": "4",
                        "out": "named.bin", "header": ["X-From: aria2"],
                        "dir": sandbox.file("downloads") + "/sub",
                    ],
                ]) as? String)
        XCTAssertTrue(gid.range(of: "^[0-9a-f]{16}$", options: .regularExpression) != nil, gid)
        let done = try waitForStatus(gid, "complete")
        XCTAssertEqual(try sha256(sandbox.file("downloads/sub/named.bin")), hash)
        // Every number a decimal string; the path absolute under the root; pieces from the segments.
        XCTAssertEqual(done["totalLength"] as? String, String(3 << 20 + 17))
        XCTAssertEqual(done["completedLength"] as? String, String(3 << 20 + 17))
        XCTAssertEqual(done["numPieces"] as? String, "4")
        XCTAssertEqual(done["pieceLength"] as? String, "1048576")
        XCTAssertEqual(done["bitfield"] as? String, "f0")
        XCTAssertEqual(done["errorCode"] as? String, "0")
        XCTAssertEqual(done["errorMessage"] as? String, "", "aria2 sends an empty errorMessage with no error")
        XCTAssertEqual(done["dir"] as? String, sandbox.file("downloads") + "/sub")
        let file = try XCTUnwrap((done["files"] as? [[String: Any]])?.first)
        XCTAssertEqual(file["path"] as? String, sandbox.file("downloads/sub/named.bin"))
        XCTAssertEqual(file["index"] as? String, "1")
        XCTAssertEqual((file["uris"] as? [[String: Any]])?.first?["uri"] as? String, originURL("rpc.bin"))
        let request = try XCTUnwrap(try originRequests().last { ($0["path"] as? String)?.hasSuffix("rpc.bin") == true })
        XCTAssertEqual((request["headers"] as? [String: String])?["x-from"], "aria2")
        // The same download over REST: one server, two wire formats.
        let listed = try XCTUnwrap(api.get("/downloads").json["downloads"] as? [[String: Any]])
        XCTAssertEqual(listed.first?["connections"] as? Int, 4)

        // keys, tellStopped from the end, getGlobalStat.
        let some = try XCTUnwrap(try result("aria2.tellStatus", [gid, ["gid", "status"]]) as? [String: Any])
        XCTAssertEqual(Set(some.keys), ["gid", "status"])
        let stopped = try XCTUnwrap(try result("aria2.tellStopped", [-1, 10, ["gid"]]) as? [[String: Any]])
        XCTAssertEqual(stopped.map { $0["gid"] as? String }, [gid])
        let stat = try XCTUnwrap(try result("aria2.getGlobalStat") as? [String: Any])
        XCTAssertEqual(stat["numStopped"] as? String, "1")
        XCTAssertEqual(try error("aria2.pause", [gid]).message, "GID#\(gid) cannot be paused now")
        XCTAssertEqual(try result("aria2.removeDownloadResult", [gid]) as? String, "OK")
        XCTAssertEqual(try error("aria2.tellStatus", [gid]).message, "GID \(gid) is not found")
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: sandbox.file("downloads/sub/named.bin")),
            "a result is forgotten, its file kept")
    }

    func testWaitingPausedRemovedAndTheQueue() throws {
        let gids = try (0..<3).map { n in
            try XCTUnwrap(
                try result("aria2.addUri", [["http://127.0.0.1:9/later-\(n).iso"], ["pause": "true"]])
                    as? String)
        }
        func waiting(_ offset: Int, _ count: Int) throws -> [String] {
            try XCTUnwrap(try result("aria2.tellWaiting", [offset, count, ["gid"]]) as? [[String: Any]])
                .compactMap { $0["gid"] as? String }
        }
        XCTAssertEqual(try waiting(0, 10), gids)
        XCTAssertEqual(try waiting(-1, 2), [gids[2], gids[1]], "from the end, backwards, as aria2")
        XCTAssertEqual(try waiting(1, 1), [gids[1]])
        XCTAssertEqual(try result("aria2.changePosition", [gids[2], 0, "POS_SET"]) as? Int, 0)
        XCTAssertEqual(try waiting(0, 10), [gids[2], gids[0], gids[1]])
        XCTAssertEqual(try result("aria2.changePosition", [gids[2], 1, "POS_CUR"]) as? Int, 1)
        XCTAssertEqual(try waiting(0, 10), [gids[0], gids[2], gids[1]])
        XCTAssertEqual(try status(gids[0])["status"] as? String, "paused")
        XCTAssertEqual(
            try result("aria2.changeOption", [gids[0], ["max-download-limit": "1M", "split": "3"]])
                as? String, "OK")
        let options = try XCTUnwrap(try result("aria2.getOption", [gids[0]]) as? [String: Any])
        XCTAssertEqual(options["max-download-limit"] as? String, String(1 << 20))
        XCTAssertEqual(options["split"] as? String, "3")
        XCTAssertEqual(try result("aria2.remove", [gids[1]]) as? String, gids[1])
        let removed = try status(gids[1])
        XCTAssertEqual(removed["status"] as? String, "removed")
        let stopped = try XCTUnwrap(try result("aria2.tellStopped", [0, 10, ["gid", "status"]]) as? [[String: Any]])
        XCTAssertEqual(stopped.map { $0["status"] as? String }, ["removed"])
        XCTAssertEqual(try result("aria2.unpauseAll") as? String, "OK")
        try waitFor("both to try") {
            try gids.filter { $0 != gids[1] }.allSatisfy { try self.status($0)["status"] as? String != "paused" }
        }
        XCTAssertEqual(try result("aria2.pauseAll") as? String, "OK")
        try waitFor("both paused again") {
            try [gids[0], gids[2]].allSatisfy {
                let state = try self.status($0)["status"] as? String
                return state == "paused" || state == "error"
            }
        }
        XCTAssertEqual(try result("aria2.purgeDownloadResult") as? String, "OK")
        XCTAssertEqual(try error("aria2.tellStatus", [gids[1]]).message, "GID \(gids[1]) is not found")
    }

    func testAriaNgsSettingsEitherTakeEffectOrSayWhyNot() throws {
        // getGlobalOption: every option Haul has an equivalent for, with its values.
        let global = try XCTUnwrap(try result("aria2.getGlobalOption") as? [String: Any])
        for (name, value) in [
            ("max-concurrent-downloads", "5"), ("split", "8"), ("max-connection-per-server", "16"),
            ("max-tries", "4"), ("retry-wait", "0"), ("timeout", "60"), ("min-split-size", "4194304"),
            ("dir", sandbox.file("downloads")),
        ] {
            XCTAssertEqual(global[name] as? String, value, name)
        }
        XCTAssertNotNil(global["user-agent"] as? String)
        // What can change does, and reads back so.
        XCTAssertEqual(
            try result(
                "aria2.changeGlobalOption",
                [
                    [
                        "max-concurrent-downloads": "3",
                        "max-overall-download-limit": "2M",
                    ]
                ]) as? String, "OK")
        let changed = try XCTUnwrap(try result("aria2.getGlobalOption") as? [String: Any])
        XCTAssertEqual(changed["max-concurrent-downloads"] as? String, "3")
        XCTAssertEqual(changed["max-overall-download-limit"] as? String, String(2 << 20))
        XCTAssertEqual(try api.get("/settings").json["max_active"] as? Int, 3)
        // What Haul has but cannot change while it runs, and what it does not have: refused by name, nothing
        // applied (max-concurrent-downloads stays 3).
        for (option, words) in [
            ("max-tries", "--max-attempts"), ("timeout", "--stall-timeout"),
            ("user-agent", "--user-agent"), ("bt-max-peers", "not supported"),
            ("no-such-option", "not an aria2 option"),
        ] {
            let refused = try error("aria2.changeGlobalOption", [[option: "7", "max-concurrent-downloads": "4"]])
            XCTAssertTrue(refused.message.contains(option) && refused.message.contains(words), refused.message)
        }
        XCTAssertEqual(try api.get("/settings").json["max_active"] as? Int, 3)

        // A download's options: its own and what it inherits, in aria2's names.
        let gid = try XCTUnwrap(
            try result(
                "aria2.addUri",
                [
                    ["http://127.0.0.1:9/opts.iso"],
                    [
                        "pause": "true", "out": "o.iso", "referer": "http://r.example/",
                        "user-agent": "agent/1", "split": "4",
                        "header": ["Cookie: a=1"],
                    ],
                ]) as? String)
        let options = try XCTUnwrap(try result("aria2.getOption", [gid]) as? [String: Any])
        for (name, value) in [
            ("out", "o.iso"), ("referer", "http://r.example/"), ("user-agent", "agent/1"),
            ("split", "4"), ("max-connection-per-server", "4"), ("max-tries", "4"),
            ("dir", sandbox.file("downloads")),
        ] {
            XCTAssertEqual(options[name] as? String, value, name)
        }
        XCTAssertEqual(options["header"] as? [String], ["Cookie: ***"], "header values are never shown")
        // changeOption: what PATCH may change applies; the rest is refused by name.
        XCTAssertEqual(try result("aria2.changeOption", [gid, ["max-download-limit": "64K"]]) as? String, "OK")
        XCTAssertEqual(try status(gid)["status"] as? String, "paused")
        XCTAssertEqual(
            (try result("aria2.getOption", [gid]) as? [String: Any])?["max-download-limit"] as? String,
            "65536")
        for (option, words) in [
            ("user-agent", "cannot be changed once"), ("max-tries", "the server's"),
            ("bt-max-peers", "not supported"), ("dir", "cannot be changed once"),
            ("on-download-complete", "not allowed"),
        ] {
            let refused = try error("aria2.changeOption", [gid, [option: "x"]])
            XCTAssertTrue(refused.message.contains(option) && refused.message.contains(words), refused.message)
        }
    }

    func testAGIDIsTheCallersIfItChoseOneAndSurvivesARestart() throws {
        let chosen = "00c0ffee00c0ffee"
        XCTAssertEqual(
            try result("aria2.addUri", [["http://127.0.0.1:9/a.iso"], ["gid": chosen, "pause": "true"]])
                as? String, chosen)
        XCTAssertEqual(
            try error("aria2.addUri", [["http://127.0.0.1:9/b.iso"], ["gid": chosen]]).message,
            "GID \(chosen) is not unique.")
        XCTAssertEqual(try error("aria2.addUri", [["http://127.0.0.1:9/b.iso"], ["gid": "xyz"]]).code, 1)
        let made = try XCTUnwrap(
            try result("aria2.addUri", [["http://127.0.0.1:9/c.iso"], ["pause": "true"]]) as? String)
        XCTAssertEqual(haul.stop(signal: SIGTERM), 0)
        try startHaul()
        for gid in [chosen, made] {
            XCTAssertEqual(try status(gid)["status"] as? String, "paused", "GID \(gid) after a restart")
        }
    }

    func testWhatAnAria2ClientMayNotDo() throws {
        let url = "http://127.0.0.1:9/x.iso"
        XCTAssertTrue(try error("aria2.addUri", [[url], ["dir": "/etc"]]).message.contains("outside the download"))
        XCTAssertTrue(try error("aria2.addUri", [[url], ["dir": "../up"]]).message.hasPrefix("directory:"))
        for option in [
            "on-download-complete", "on-download-error", "log", "save-session", "input-file",
            "rpc-secret", "save-cookies",
        ] {
            XCTAssertEqual(
                try error("aria2.addUri", [[url], [option: "/bin/sh"]]).message,
                "option \(option) is not allowed through the RPC", option)
            XCTAssertEqual(
                try error("aria2.changeGlobalOption", [[option: "/tmp/x"]]).message,
                "option \(option) is not allowed through the RPC", option)
        }
        XCTAssertTrue(try error("aria2.addUri", [["file:///etc/passwd"]]).message.contains("scheme"))
        XCTAssertEqual(try error("aria2.addTorrent", ["AAAA"]).code, 1)
        XCTAssertEqual(
            try error("aria2.shutdown").message,
            "shutdown is refused: start Haul with --rpc-allow-shutdown to allow it")
        XCTAssertEqual(try error("aria2.nope").message, "No such method: aria2.nope")
        XCTAssertEqual(try error("aria2.tellStatus", ["zz"]).message, "Invalid GID zz")
        XCTAssertEqual(try downloadCount(), 0, "nothing was added")
        // Not JSON: -32700 with 500, as aria2.
        let parse = try api.request("POST", "/jsonrpc", body: Data("{nope".utf8))
        XCTAssertEqual(parse.status, 500)
        XCTAssertEqual((parse.json["error"] as? [String: Any])?["code"] as? Int, -32700)
        // A batch of more than 1,000 calls is refused whole.
        let many = (0..<1001).map { ["jsonrpc": "2.0", "id": $0, "method": "aria2.getVersion"] as [String: Any] }
        let refused = try api.request("POST", "/jsonrpc", json: many)
        XCTAssertEqual((refused.json["error"] as? [String: Any])?["code"] as? Int, -32600)
    }

    func testGETJSONPBatchesAndMulticall() throws {
        let params = Data(try JSONSerialization.data(withJSONObject: [0, 5])).base64EncodedString()
        let got = try api.get("/jsonrpc?method=aria2.tellWaiting&id=9&params=\(params)")
        XCTAssertEqual(got.status, 200)
        XCTAssertEqual((got.json["result"] as? [Any])?.count, 0)
        // JSONP is read by a script tag on any page: a server without a token wraps no answer in one.
        let jsonp = try api.get("/jsonrpc?method=aria2.getVersion&id=1&jsoncallback=cb_1")
        XCTAssertEqual(jsonp.header("Content-Type"), "application/json-rpc")
        XCTAssertFalse(jsonp.text.hasPrefix("cb_1("), jsonp.text)
        XCTAssertTrue(jsonp.text.contains("needs the token"), jsonp.text)
        XCTAssertEqual(try api.get("/jsonrpc?method=aria2.getVersion&id=1&jsoncallback=alert(1)//").status, 400)
        // A GET may not change anything without the server's token: a page can make a browser send one.
        let add = Data(try JSONSerialization.data(withJSONObject: [["http://127.0.0.1:9/x"]])).base64EncodedString()
        let write = try api.get("/jsonrpc?method=aria2.addUri&id=2&params=\(add)")
        XCTAssertEqual(write.status, 400)
        XCTAssertTrue(((write.json["error"] as? [String: Any])?["message"] as? String ?? "").contains("POST"))
        XCTAssertEqual(try downloadCount(), 0)

        let batch = try api.request(
            "POST", "/jsonrpc",
            json: [
                ["jsonrpc": "2.0", "id": 1, "method": "aria2.getVersion"],
                [
                    "jsonrpc": "2.0", "id": 2, "method": "system.multicall",
                    "params": [[["methodName": "aria2.getGlobalStat"], ["methodName": "aria2.nope"]]],
                ],
            ])
        XCTAssertEqual(batch.status, 200)
        let answers = try XCTUnwrap(try JSONSerialization.jsonObject(with: batch.body) as? [[String: Any]])
        XCTAssertEqual(answers.map { $0["id"] as? Int }, [1, 2])
        XCTAssertEqual((answers[0]["result"] as? [String: Any])?["version"] as? String, "1.36.0")
        let multi = try XCTUnwrap(answers[1]["result"] as? [Any])
        XCTAssertNotNil((multi[0] as? [Any])?.first as? [String: Any])
        XCTAssertEqual((multi[1] as? [String: Any])?["message"] as? String, "No such method: aria2.nope")
        let methods = try XCTUnwrap(try result("system.listMethods") as? [String])
        XCTAssertTrue(methods.contains("aria2.addUri") && methods.contains("system.multicall"))
    }

    func testTheTokenIsAria2sTokenParameter() throws {
        haul.stop(signal: SIGTERM)
        let token = "aria2-secret-token-42"
        try startHaul(extra: ["--token", token])
        XCTAssertEqual(try error("aria2.getVersion").message, "Unauthorized")
        XCTAssertEqual(try error("aria2.getVersion", ["token:wrong-one"]).message, "Unauthorized")
        XCTAssertNotNil(try result("aria2.getVersion", ["token:" + token]) as? [String: Any])
        XCTAssertNotNil(try result("system.listMethods") as? [Any], "system.* needs no token, as in aria2")
        // A GET with the token may change things: a page cannot know it.
        let params = Data(
            try JSONSerialization.data(withJSONObject: [
                "token:" + token, ["http://127.0.0.1:9/x"],
                ["pause": "true"],
            ])
        ).base64EncodedString()
        let added = try api.get("/jsonrpc?method=aria2.addUri&id=3&params=\(params)")
        XCTAssertEqual(added.status, 200, added.text)
        // JSONP for a call that carries the token.
        let version = Data(try JSONSerialization.data(withJSONObject: ["token:" + token])).base64EncodedString()
        let jsonp = try api.get("/jsonrpc?method=aria2.getVersion&id=1&params=\(version)&jsoncallback=cb_1")
        XCTAssertEqual(jsonp.header("Content-Type"), "text/javascript")
        XCTAssertTrue(jsonp.text.hasPrefix("cb_1({") && jsonp.text.hasSuffix("});"), jsonp.text)
        // Wrong tokens count against the address as wrong bearer tokens do: past the burst, even REST is refused.
        for _ in 0..<10 { _ = try rpc("aria2.getVersion", ["token:guess"]) }
        XCTAssertEqual(try api.request("GET", "/stats", headers: ["Authorization": "Bearer guess"]).status, 429)
    }

    func testTheRPCListenAddressServesTheSameAPI() throws {
        haul.stop(signal: SIGTERM)
        let port = try Nginx.freePort()
        try startHaul(extra: ["--rpc-listen", "127.0.0.1:\(port)"])
        let other = Client(base: "http://127.0.0.1:\(port)")
        let reply = try other.request(
            "POST", "/jsonrpc",
            json: [
                "jsonrpc": "2.0", "id": 1,
                "method": "aria2.getVersion",
            ])
        XCTAssertEqual(reply.status, 200)
        XCTAssertEqual((reply.json["result"] as? [String: Any])?["version"] as? String, "1.36.0")
    }
}
