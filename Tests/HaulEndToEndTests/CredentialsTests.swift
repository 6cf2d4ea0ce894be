import Foundation
import XCTest

/// Origins behind a login: Basic and Digest credentials sent only to the URL's own host, a password in the URL
/// taken out of it, cookies in one jar every segment and redirect shares, User-Agent and Referer; no secret is
/// shown back or logged.
final class CredentialsTests: HaulTestCase {
    private var other: ServerProcess!

    override var serveArguments: [String] {
        super.serveArguments + ["--min-split-size", "128k", "--connections", "4", "--user-agent", "haul-test/1"]
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        other = try otherOrigin(at: "127.0.0.2", name: "other")
    }

    override func tearDownWithError() throws {
        other?.stop(signal: SIGKILL)
        try super.tearDownWithError()
    }

    private func requests(_ name: String) throws -> [[String: Any]] {
        try originRequests().filter { ($0["path"] as? String)?.hasSuffix("/" + name) == true }
    }

    private func headers(_ request: [String: Any]) -> [String: String] {
        request["headers"] as? [String: String] ?? [:]
    }

    func testBasicAndDigestOriginsGetTheirCredentialsOnEverySegment() throws {
        let hash = try sandbox.makeRandomFile("www/a.bin", size: 1 << 20)
        for kind in ["basic", "digest"] {
            let done = try waitForState(
                try add([
                    "url": originURL("a.bin", "auth=\(kind)&user=ann&pass=0p3n-s3same"),
                    "username": "ann", "password": "0p3n-s3same",
                    "filename": "\(kind).bin",
                ]), "completed")
            XCTAssertEqual(try sha256(try downloadedPath(done)), hash, kind)
            XCTAssertEqual(done["username"] as? String, "ann")
            XCTAssertNil(done["password"], "a password is never shown")
        }
        let ranged = try requests("a.bin").filter { ($0["status"] as? Int) == 206 }
        XCTAssertGreaterThan(ranged.count, 2, "segments")
        XCTAssertTrue(ranged.allSatisfy { headers($0)["authorization"] != nil })

        let refused = try waitForState(
            try add([
                "url": originURL("a.bin", "auth=digest&user=ann&pass=0p3n-s3same"),
                "username": "ann", "password": "wrong", "filename": "w.bin",
            ]),
            "failed")
        XCTAssertEqual((refused["error"] as? [String: Any])?["code"] as? String, "auth_failed", "\(refused)")
        XCTAssertEqual(int(refused["attempts"]), 1, "refused credentials are not tried again")
    }

    func testANetrcFileGivesCredentialsToTheHostItNames() throws {
        let hash = try sandbox.makeRandomFile("www/n.bin", size: 3000)
        let netrc = sandbox.file("netrc")
        try "machine 127.0.0.1 login nat password n3trc-pw\n".write(toFile: netrc, atomically: true, encoding: .utf8)
        haul.stop(signal: SIGTERM)
        try startHaul(extra: ["--netrc-file", netrc])
        for kind in ["basic", "digest"] {
            let done = try waitForState(
                try add([
                    "url": originURL("n.bin", "auth=\(kind)&user=nat&pass=n3trc-pw"),
                    "filename": "\(kind).bin",
                ]), "completed")
            XCTAssertEqual(try sha256(try downloadedPath(done)), hash, kind)
        }
    }

    func testAPasswordInTheURLIsTakenOutOfItAndNeverShownOrLogged() throws {
        let hash = try sandbox.makeRandomFile("www/u.bin", size: 4000)
        let port = origin.baseURL.split(separator: ":").last!
        let id = try add([
            "url": "http://bo:hunter2-url@127.0.0.1:\(port)/files/u.bin?auth=basic&user=bo&pass=hunter2-url"
        ])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertEqual(
            done["url"] as? String, "http://127.0.0.1:\(port)/files/u.bin?auth=basic&user=bo&pass=hunter2-url")
        XCTAssertEqual(done["username"] as? String, "bo")
        let cookie = try waitForState(
            try add([
                "url": originURL("u.bin", "needcookie=sid=c00kie-v4lue"),
                "cookies": "sid=c00kie-v4lue; other=s3cr3t-two", "filename": "c.bin",
            ]),
            "completed")
        XCTAssertEqual(try sha256(try downloadedPath(cookie)), hash)
        let texts = [
            try api.get("/downloads/\(id)").text, try api.get("/downloads").text,
            try api.get("/metrics").text,
            try String(contentsOfFile: sandbox.file("haul.log"), encoding: .utf8),
        ]
        for text in texts {
            // The query of this test's URL names the password too: only the user information counts here.
            XCTAssertFalse(text.contains("bo:hunter2"), String(text.prefix(2000)))
            // The one cookie the URL does not name.
            XCTAssertFalse(text.contains("s3cr3t-two"), String(text.prefix(2000)))
        }
    }

    func testARedirectToAnotherHostCarriesNoCredentials() throws {
        let hash = try sandbox.makeRandomFile("www/r.bin", size: 3000)
        let otherPort = other.baseURL.split(separator: ":").last!
        let target = "http://127.0.0.2:\(otherPort)/files/r.bin"
        let url =
            origin.baseURL + "/redirect-to?url=" + target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let done = try waitForState(
            try add([
                "url": url, "username": "ann", "password": "s3cret",
                "headers": ["Authorization": "Bearer t0ken"],
            ]), "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        let reply = try Client(base: other.baseURL).get("/_requests")
        let seen = (try JSONSerialization.jsonObject(with: reply.body)) as? [[String: Any]] ?? []
        XCTAssertFalse(seen.isEmpty)
        for request in seen { XCTAssertNil(headers(request)["authorization"], "\(request)") }
    }

    func testACookieSetByARedirectReachesEverySegment() throws {
        let hash = try sandbox.makeRandomFile("www/k.bin", size: 1 << 20)
        let target = originURL("k.bin", "needcookie=session=42")
        let url =
            origin.baseURL + "/redirect-to?setcookie=session=42&url="
            + target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let done = try waitForState(
            try add([
                "url": url, "filename": "k.bin", "referer": "https://from.example/page",
                "user_agent": "MyBrowser/2",
            ]), "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        let served = try requests("k.bin")
        XCTAssertGreaterThan(served.count, 2, "probe and segments")
        for request in served {
            XCTAssertEqual(headers(request)["cookie"], "session=42", "\(request)")
            XCTAssertEqual(headers(request)["referer"], "https://from.example/page")
            XCTAssertEqual(headers(request)["user-agent"], "MyBrowser/2")
        }
        XCTAssertEqual(done["user_agent"] as? String, "MyBrowser/2")

        // A cookies.txt, and the server's --user-agent for a download that names none.
        let jar = "# Netscape HTTP Cookie File\n127.0.0.1\tFALSE\t/\tFALSE\t0\tsession\t42\n"
        let fromFile = try waitForState(try add(["url": target, "cookies": jar, "filename": "k2.bin"]), "completed")
        XCTAssertEqual(try sha256(try downloadedPath(fromFile)), hash)
        XCTAssertEqual(headers(try requests("k.bin").last!)["user-agent"], "haul-test/1")
        let refused = try api.request("POST", "/downloads", json: ["url": target, "cookies": "a=1\u{1}"])
        XCTAssertEqual(refused.status, 422, refused.text)
    }
}
