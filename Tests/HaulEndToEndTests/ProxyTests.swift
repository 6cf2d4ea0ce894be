import Foundation
import XCTest

/// Downloads through real proxies on loopback: tinyproxy for HTTP (absolute-form GET for http origins, CONNECT
/// for https ones) with Basic proxy authentication, microsocks for SOCKS5 with a user name. The proxy's password
/// is never shown back.
final class ProxyTests: HaulTestCase {
    private var http: LocalProxy!
    private var socks: LocalProxy!
    private var receiver: HostileOrigin!
    private let secret = "pr0xy-s3cret"

    override var serveArguments: [String] { super.serveArguments + ["--min-split-size", "256k"] }

    override func setUpWithError() throws {
        guard LocalProxy.available(.tinyproxy), LocalProxy.available(.microsocks) else {
            throw XCTSkip("tinyproxy and microsocks are not installed (make deps)")
        }
        receiver = try HostileOrigin { _ in .send(HostileOrigin.reply("204 No Content", headers: ["Connection: close"]))
        }
        try super.setUpWithError()
        http = try LocalProxy(.tinyproxy, directory: sandbox.file("tinyproxy"), user: "alice", password: secret)
        socks = try LocalProxy(.microsocks, directory: sandbox.file("microsocks"), user: "bob", password: secret)
        // The webhook proxy is a flag: the server starts again with it.
        haul.stop(signal: SIGTERM)
        try startHaul(extra: [
            "--webhook-proxy", http.url("http", user: "alice", password: secret),
            "--no-proxy", "127.0.0.1",
        ])
    }

    override func tearDownWithError() throws {
        try super.tearDownWithError()
        http?.stop()
        socks?.stop()
        receiver?.stop()
    }

    private var port: String { String(origin.baseURL.split(separator: ":").last!) }

    /// The origin's file by name: 127.0.0.1 is on this server's --no-proxy list, localhost is not.
    private func named(_ file: String) -> String { "http://localhost:\(port)/files/\(file)" }

    /// The origin's log of requests for `name`.
    private func requests(for name: String) throws -> [[String: Any]] {
        try originRequests().filter { ($0["path"] as? String)?.hasSuffix("/" + name) == true }
    }

    private func via(_ request: [String: Any]) -> String? { (request["headers"] as? [String: String])?["via"] }

    func testAnHTTPProxyWithBasicAuthCarriesEverySegmentAndItsPasswordIsNeverShown() throws {
        let hook = try api.request(
            "POST", "/webhooks",
            json: [
                "url": receiver.baseURL + "/hook",
                "events": ["completed"],
            ])
        XCTAssertEqual(hook.status, 201, hook.text)
        let hash = try sandbox.makeRandomFile("www/h.bin", size: 3 << 20)
        let proxy = http.url("http", user: "alice", password: secret)
        let id = try add(["url": named("h.bin"), "proxy": proxy, "connections": 4])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertEqual(done["proxy"] as? String, "http://alice:***@127.0.0.1:\(http.port)")
        let seen = try requests(for: "h.bin")
        XCTAssertGreaterThan(seen.count, 1, "probe and segments")
        XCTAssertTrue(seen.allSatisfy { via($0)?.contains("tinyproxy") == true }, "every request came through: \(seen)")
        XCTAssertTrue(http.log.contains("GET http://localhost:\(port)/files/h.bin"), http.log)

        // Absent everywhere a client or an operator looks.
        try waitFor("the webhook delivery through the webhook proxy") { receiver.requests.count >= 1 }
        XCTAssertTrue(
            receiver.requests[0].headers["via"]?.contains("tinyproxy") == true,
            "\(receiver.requests[0].headers)")
        var answers = [
            try api.get("/downloads/\(id)").text, try api.get("/downloads").text,
            try api.get("/settings").text, try api.get("/metrics").text,
        ]
        _ = try api.request("PUT", "/categories/via", json: ["proxy": proxy])
        answers.append(try api.get("/categories").text)
        answers.append(try String(contentsOfFile: sandbox.file("haul.log"), encoding: .utf8))
        answers += receiver.requests.map { "\($0.headers)" + String(decoding: $0.body, as: UTF8.self) }
        for answer in answers { XCTAssertFalse(answer.contains(secret), String(answer.prefix(2000))) }
    }

    func testAnHTTPSOriginGoesThroughACONNECTTunnel() throws {
        guard Nginx.available else { throw XCTSkip("nginx is not installed") }
        let nginx = try Nginx(
            root: sandbox.file("www"), prefix: sandbox.file("nginx"),
            tls: try sandbox.selfSignedCertificate())
        defer { withExtendedLifetime(nginx) {} }
        let hash = try sandbox.makeRandomFile("www/t.bin", size: 1 << 20)
        let tlsPort = nginx.baseURL.split(separator: ":").last!
        let done = try waitForState(
            try add([
                "url": "https://localhost:\(tlsPort)/t.bin", "insecure": true,
                "proxy": http.url("http", user: "alice", password: secret),
            ]), "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertTrue(http.log.contains("CONNECT localhost:\(tlsPort)"), http.log)
    }

    func testSocks5hSendsTheNameAndSocks5TheAddress() throws {
        let hash = try sandbox.makeRandomFile("www/s.bin", size: 1 << 20)
        let url = named("s.bin")
        let remote = try waitForState(
            try add([
                "url": url, "filename": "s5h.bin", "connections": 2,
                "proxy": socks.url("socks5h", user: "bob", password: secret),
            ]),
            "completed")
        XCTAssertEqual(try sha256(try downloadedPath(remote)), hash)
        XCTAssertTrue(socks.log.contains("connected to localhost:\(port)"), "the proxy got the name: \(socks.log)")
        let local = try waitForState(
            try add([
                "url": url, "filename": "s5.bin",
                "proxy": socks.url("socks5", user: "bob", password: secret),
            ]),
            "completed")
        XCTAssertEqual(try sha256(try downloadedPath(local)), hash)
        XCTAssertTrue(socks.log.contains("connected to 127.0.0.1:\(port)"), "Haul sent the address: \(socks.log)")
        XCTAssertEqual(try requests(for: "s.bin").filter { via($0) != nil }.count, 0, "SOCKS adds nothing")
    }

    func testAWrongPasswordIsProxyAuthFailedAndAnUnreachableProxyIsRetried() throws {
        try sandbox.makeRandomFile("www/w.bin", size: 1000)
        for proxy in [
            http.url("http", user: "alice", password: "wrong"),
            socks.url("socks5h", user: "bob", password: "wrong"),
        ] {
            let failed = try waitForState(
                try add([
                    "url": named("w.bin"), "proxy": proxy,
                    "filename": "w\(proxy.count).bin",
                ]), "failed")
            let error = failed["error"] as? [String: Any]
            XCTAssertEqual(error?["code"] as? String, "proxy_auth_failed", "\(proxy): \(failed)")
            XCTAssertEqual(int(failed["attempts"]), 1, "a refused password is not tried again")
        }
        let unreachable = try waitForState(
            try add([
                "url": named("w.bin"), "filename": "u.bin",
                "proxy": "socks5h://127.0.0.1:9",
            ]), "failed")
        XCTAssertEqual((unreachable["error"] as? [String: Any])?["code"] as? String, "proxy_unreachable")
        XCTAssertEqual(int(unreachable["attempts"]), 4, "retried up to --max-attempts")
        XCTAssertEqual(try requests(for: "w.bin").count, 0, "nothing reached the origin")
    }

    func testTheSettingsProxyIsInheritedThroughCategoriesAndNoneAndNoProxyGoDirect() throws {
        try sandbox.makeRandomFile("www/i.bin", size: 2000)
        let proxy = http.url("http", user: "alice", password: secret)
        let changed = try api.request("PATCH", "/settings", json: ["proxy": proxy])
        XCTAssertEqual(changed.status, 200, changed.text)
        XCTAssertEqual(changed.json["proxy"] as? String, "http://alice:***@127.0.0.1:\(http.port)")
        XCTAssertEqual(try api.request("PUT", "/categories/direct", json: ["proxy": "none"]).status, 201)
        XCTAssertEqual(
            try api.request(
                "PUT", "/categories/socks",
                json: [
                    "proxy": socks.url("socks5", user: "bob", password: secret)
                ]
            ).status, 201)

        let inherited = try waitForState(try add(["url": named("i.bin"), "filename": "a.bin"]), "completed")
        XCTAssertTrue(inherited["proxy"] is NSNull, "the download names none of its own: \(inherited)")
        _ = try waitForState(try add(["url": named("i.bin"), "filename": "b.bin", "proxy": "none"]), "completed")
        _ = try waitForState(
            try add(["url": named("i.bin"), "filename": "c.bin", "category": "direct"]),
            "completed")
        _ = try waitForState(
            try add(["url": named("i.bin"), "filename": "d.bin", "category": "socks"]),
            "completed")
        let seen = try requests(for: "i.bin").map { via($0) != nil }
        // Each download probes and fetches: the first through tinyproxy, the others not (socks adds no Via).
        XCTAssertEqual(seen.filter { $0 }.count, seen.count / 4, "\(seen)")
        XCTAssertTrue(socks.log.contains("connected to 127.0.0.1:\(port)"), socks.log)

        // --no-proxy: a host on the list is reached directly, whatever the settings say.
        _ = try waitForState(try add(["url": originURL("i.bin"), "filename": "e.bin"]), "completed")
        let after = try requests(for: "i.bin").map { via($0) != nil }
        XCTAssertGreaterThan(after.count, seen.count)
        XCTAssertEqual(after.filter { $0 }.count, seen.filter { $0 }.count, "127.0.0.1 went direct")

        // Back to the flag (none): direct.
        XCTAssertEqual(
            try api.request("PATCH", "/settings", json: ["proxy": NSNull()]).json["proxy"] as? String,
            "none")
        let refused = try api.request("PATCH", "/settings", json: ["proxy": "ftp://x"])
        XCTAssertEqual(refused.status, 422, refused.text)
    }
}

/// A server under `--deny-private-networks` whose operator's proxy is microsocks on 127.0.0.2 (outside any
/// exception), with user bob.
class SocksGuardTestCase: HaulTestCase {
    var socks: LocalProxy!
    /// Flags beside `--proxy`.
    var proxyArguments: [String] { [] }

    override func setUpWithError() throws {
        guard LocalProxy.available(.microsocks) else { throw XCTSkip("microsocks is not installed (make deps)") }
        try super.setUpWithError()
        socks = try LocalProxy(
            .microsocks, directory: sandbox.file("microsocks"), host: "127.0.0.2", user: "bob",
            password: "pw")
        haul.stop(signal: SIGTERM)
        try startHaul(extra: ["--proxy", socks.url("socks5h", user: "bob", password: "pw")] + proxyArguments)
    }

    override func tearDownWithError() throws {
        socks?.stop()
        try super.tearDownWithError()
    }
}

/// `--no-proxy` and the proxy's own address under `--deny-private-networks`: the operator's proxy (on 127.0.0.2,
/// outside the exceptions) is used, the origin is still checked, and a refused origin never reaches the proxy.
final class ProxyAddressGuardTests: SocksGuardTestCase {
    private var inner: ServerProcess!

    override var serveArguments: [String] {
        super.serveArguments + ["--deny-private-networks", "--allow-networks", "127.0.0.1/32"]
    }

    override var proxyArguments: [String] { ["--no-proxy", "example.invalid,10.0.0.0/8"] }

    override func setUpWithError() throws {
        try super.setUpWithError()
        inner = try otherOrigin(at: "127.0.0.3", name: "inner")
    }

    override func tearDownWithError() throws {
        inner?.stop(signal: SIGKILL)
        try super.tearDownWithError()
    }

    func testTheOperatorsProxyIsUsedAndPrivateTargetsNeverReachIt() throws {
        let hash = try sandbox.makeRandomFile("www/g.bin", size: 1 << 20)
        let done = try waitForState(try add(["url": originURL("g.bin")]), "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        let port = origin.baseURL.split(separator: ":").last!
        XCTAssertTrue(socks.log.contains("connected to 127.0.0.1:\(port)"), socks.log)

        let innerPort = inner.baseURL.split(separator: ":").last!
        let privateTarget = "http://127.0.0.3:\(innerPort)/files/g.bin"
        let escaped = privateTarget.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        for (url, name) in [
            (privateTarget, "p1.bin"), ("http://169.254.169.254/latest/meta-data/", "p2.bin"),
            ("http://[::1]:\(innerPort)/files/g.bin", "p3.bin"),
            (origin.baseURL + "/redirect-to?url=" + escaped, "p4.bin"),
        ] {
            let failed = try waitForState(try add(["url": url, "filename": name]), "failed")
            let error = failed["error"] as? [String: Any]
            XCTAssertEqual(error?["code"] as? String, "blocked_address", "\(url): \(failed)")
            XCTAssertEqual(int(failed["attempts"]), 1)
        }
        XCTAssertFalse(
            socks.log.contains("127.0.0.3") || socks.log.contains("169.254") || socks.log.contains("::1"),
            "a private target reached the proxy: \(socks.log)")
        XCTAssertEqual(try Client(base: inner.baseURL).get("/_requests").text, "[]")

        // A proxy a download names for itself is held to the guard (127.0.0.2 is not an exception), unless it is
        // the operator's.
        let same = try waitForState(
            try add([
                "url": originURL("g.bin"), "filename": "o.bin",
                "proxy": socks.url("socks5h", user: "bob", password: "pw"),
            ]), "completed")
        XCTAssertEqual(try sha256(try downloadedPath(same)), hash)
        let named = try waitForState(
            try add([
                "url": originURL("g.bin"), "filename": "n.bin",
                "proxy": socks.url("socks5", user: "bob", password: "pw"),
            ]), "failed")
        let error = named["error"] as? [String: Any]
        XCTAssertEqual(error?["code"] as? String, "blocked_address", "\(named)")
        XCTAssertTrue((error?["message"] as? String ?? "").contains("proxy at 127.0.0.2"), "\(named)")
    }
}

/// Under `--deny-private-networks` with no exception, a name that resolves to a private address is refused before
/// the proxy hears of it, as a literal one is: Haul resolves it itself.
final class ProxyNameGuardTests: SocksGuardTestCase {
    override var serveArguments: [String] { super.serveArguments + ["--deny-private-networks"] }

    func testANameResolvingToLoopbackIsRefusedBeforeTheProxy() throws {
        try sandbox.makeRandomFile("www/l.bin", size: 1000)
        let port = origin.baseURL.split(separator: ":").last!
        let failed = try waitForState(try add(["url": "http://localhost:\(port)/files/l.bin"]), "failed")
        let error = failed["error"] as? [String: Any]
        XCTAssertEqual(error?["code"] as? String, "blocked_address", "\(failed)")
        XCTAssertTrue((error?["message"] as? String ?? "").contains("(localhost)"), "\(failed)")
        XCTAssertEqual(socks.log, "", "the proxy heard nothing")
        XCTAssertEqual(try originRequests().count, 0)
    }
}

/// `--proxy-from-env`: then, and only then, `http_proxy` is the proxy of downloads no setting gives one, and
/// `no_proxy` is honoured.
final class ProxyFromEnvironmentTests: HaulTestCase {
    private var http: LocalProxy?

    override var serveEnvironment: [String: String]? {
        var environment = ProcessInfo.processInfo.environment
        for name in ["https_proxy", "all_proxy", "HTTPS_PROXY", "ALL_PROXY", "HTTP_PROXY"] { environment[name] = nil }
        environment["http_proxy"] = http?.url("http", user: "env", password: "pw")
        environment["no_proxy"] = "127.0.0.1"
        return environment
    }

    override func setUpWithError() throws {
        guard LocalProxy.available(.tinyproxy) else { throw XCTSkip("tinyproxy is not installed (make deps)") }
        try super.setUpWithError()
        http = try LocalProxy(.tinyproxy, directory: sandbox.file("tinyproxy"), user: "env", password: "pw")
        haul.stop(signal: SIGTERM)
        try startHaul(extra: ["--proxy-from-env"])
    }

    override func tearDownWithError() throws {
        http?.stop()
        try super.tearDownWithError()
    }

    func testTheEnvironmentsProxyAndNoProxyAreRead() throws {
        try sandbox.makeRandomFile("www/e.bin", size: 5000)
        let port = origin.baseURL.split(separator: ":").last!
        _ = try waitForState(
            try add(["url": "http://localhost:\(port)/files/e.bin", "filename": "p.bin"]), "completed")
        _ = try waitForState(try add(["url": originURL("e.bin"), "filename": "d.bin"]), "completed")
        let vias = try originRequests().map { (($0["headers"] as? [String: String])?["via"] ?? "") }
        XCTAssertEqual(vias.count, 2, "\(vias)")
        XCTAssertTrue(vias[0].contains("tinyproxy"), "http_proxy carried the first: \(vias)")
        XCTAssertEqual(vias[1], "", "no_proxy sent 127.0.0.1 directly")
        XCTAssertEqual(try api.get("/settings").json["proxy"] as? String, "none", "the settings name none")
    }
}

/// A proxy named through the API by a scoped token is no operator's: under `--deny-private-networks` it is held to
/// the address policy as a download's own is, so a `manage` token cannot name a proxy on loopback (PATCH
/// /settings, a category's, aria2's `all-proxy`) and reach what the policy keeps out. The server's own token still
/// names a trusted one.
final class ScopedProxyTests: HaulTestCase {
    private let admin = "scoped-proxy-admin-token-0123"
    private var socks: LocalProxy!

    override var serveArguments: [String] {
        super.serveArguments + ["--token", admin, "--deny-private-networks", "--allow-networks", "127.0.0.1/32"]
    }

    override func setUpWithError() throws {
        guard LocalProxy.available(.microsocks) else { throw XCTSkip("microsocks is not installed (make deps)") }
        try super.setUpWithError()
        socks = try LocalProxy(
            .microsocks, directory: sandbox.file("microsocks"), host: "127.0.0.2", user: "bob",
            password: "pw")
    }

    override func tearDownWithError() throws {
        socks?.stop()
        try super.tearDownWithError()
    }

    private func call(_ method: String, _ path: String, _ token: String, _ json: Any? = nil) throws -> Client.Reply {
        try api.request(method, path, json: json, headers: ["Authorization": "Bearer " + token])
    }

    private func fetch(_ name: String, as token: String, _ extra: [String: Any] = [:]) throws -> [String: Any] {
        let reply = try call(
            "POST", "/downloads", token,
            ["url": originURL("s.bin"), "filename": name]
                .merging(extra) { _, new in new })
        XCTAssertEqual(reply.status, 201, reply.text)
        let id = try XCTUnwrap(reply.json["id"] as? String)
        var last: [String: Any] = [:]
        try waitFor("\(name) to end") {
            last = try self.call("GET", "/downloads/\(id)", self.admin).json
            return last["state"] as? String == "completed" || last["state"] as? String == "failed"
        }
        return last
    }

    private func code(_ download: [String: Any]) -> String? {
        (download["error"] as? [String: Any])?["code"] as? String
    }

    func testAProxyAScopedTokenNamesIsHeldToTheAddressPolicy() throws {
        let hash = try sandbox.makeRandomFile("www/s.bin", size: 200_000)
        let made = try call("POST", "/tokens", admin, ["name": "ops", "scope": "manage"])
        XCTAssertEqual(made.status, 201, made.text)
        let manager = try XCTUnwrap(made.json["secret"] as? String)
        let proxy = socks.url("socks5", user: "bob", password: "pw")

        // The settings' proxy, named by the manage token: the download goes nowhere near it.
        XCTAssertEqual(try call("PATCH", "/settings", manager, ["proxy": proxy]).status, 200)
        let bySettings = try fetch("settings.bin", as: manager)
        XCTAssertEqual(code(bySettings), "blocked_address", "\(bySettings)")
        XCTAssertTrue(
            ((bySettings["error"] as? [String: Any])?["message"] as? String ?? "").contains("proxy at 127.0.0.2"))
        // The same through aria2's all-proxy.
        let rpc = try api.request(
            "POST", "/jsonrpc",
            json: [
                "jsonrpc": "2.0", "id": "1",
                "method": "aria2.changeGlobalOption",
                "params": ["token:" + manager, ["all-proxy": proxy]],
            ])
        XCTAssertEqual(rpc.json["result"] as? String, "OK", rpc.text)
        XCTAssertEqual(code(try fetch("aria2.bin", as: manager)), "blocked_address")
        // A category's.
        XCTAssertEqual(try call("PATCH", "/settings", admin, ["proxy": NSNull()]).status, 200)
        XCTAssertEqual(try call("PUT", "/categories/via", manager, ["proxy": proxy]).status, 201)
        XCTAssertEqual(code(try fetch("category.bin", as: manager, ["category": "via"])), "blocked_address")
        XCTAssertFalse(socks.log.contains("connected to"), "a scoped token's proxy was used: \(socks.log)")

        // The server's own token names the operator's proxy: trusted, used, the file exact.
        XCTAssertEqual(try call("PATCH", "/settings", admin, ["proxy": proxy]).status, 200)
        let trusted = try fetch("trusted.bin", as: admin)
        XCTAssertEqual(trusted["state"] as? String, "completed", "\(trusted)")
        XCTAssertEqual(try sha256(try downloadedPath(trusted)), hash)
        XCTAssertTrue(socks.log.contains("connected to"), socks.log)
        // Restarted, the settings keep who named their proxy: the manager's is still held to the policy.
        XCTAssertEqual(try call("PATCH", "/settings", manager, ["proxy": proxy]).status, 200)
        haul.stop(signal: SIGTERM)
        try startHaul()
        XCTAssertEqual(code(try fetch("restarted.bin", as: admin)), "blocked_address")
    }
}
