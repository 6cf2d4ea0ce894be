import Foundation
import XCTest

/// Tokens with a scope over real HTTP: made and revoked from the command line, used by the CLI, the REST API and
/// the aria2 front, each refused beyond its scope.
final class ScopedTokenTests: HaulTestCase {
    private let admin = "the-servers-own-token-42"

    override var serveArguments: [String] { super.serveArguments + ["--token", admin] }

    func testAReadTokenFromTheCLILooksButChangesNothingAndIsRevokedAtOnce() throws {
        let created = try haulCommand(
            ["token", "create", "wall dashboard", "--scope", "read"],
            environment: ["HAUL_TOKEN": admin])
        XCTAssertEqual(created.status, 0, created.output)
        // Labelled, the secret said to be shown once.
        let lines = created.stdout.split(separator: "\n")
        XCTAssertEqual(lines.count, 2, created.stdout)
        XCTAssertTrue(lines[0].hasPrefix("id ") && lines[1].hasPrefix("secret "), created.stdout)
        let (id, secret) = (String(lines[0].split(separator: " ").last!), String(lines[1].split(separator: " ").last!))
        XCTAssertTrue(secret.hasPrefix("haul_"), created.stdout)
        XCTAssertTrue(created.stderr.contains("shown this once"), created.stderr)
        let listed = try haulCommand(["token", "ls"], environment: ["HAUL_TOKEN": admin])
        XCTAssertTrue(listed.stdout.contains("read") && listed.stdout.contains("wall dashboard"), listed.stdout)
        XCTAssertFalse(listed.stdout.contains(secret))

        _ = try sandbox.makeRandomFile("www/t.bin", size: 1000)
        XCTAssertEqual(try haulCommand(["ls"], environment: ["HAUL_TOKEN": secret]).status, 0)
        let refused = try haulCommand(["add", originURL("t.bin")], environment: ["HAUL_TOKEN": secret])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("read scope"), refused.stderr)
        XCTAssertEqual(
            try api.request(
                "POST", "/downloads", json: ["url": originURL("t.bin")],
                headers: ["Authorization": "Bearer " + secret]
            ).status, 403)
        // The aria2 front takes it as token: and holds it to the same scope.
        let rpc = { (method: String, params: [Any]) throws -> [String: Any] in
            try self.api.request(
                "POST", "/jsonrpc",
                json: [
                    "jsonrpc": "2.0", "id": 1, "method": method,
                    "params": ["token:" + secret] + params,
                ]
            ).json
        }
        XCTAssertNotNil(try rpc("aria2.tellActive", [])["result"])
        let add = try XCTUnwrap(try rpc("aria2.addUri", [[originURL("t.bin")]])["error"] as? [String: Any])
        XCTAssertEqual(add["message"] as? String, "the token has the read scope; aria2.addUri needs add")

        let removed = try haulCommand(["token", "rm", id], environment: ["HAUL_TOKEN": admin])
        XCTAssertEqual(removed.status, 0, removed.output)
        XCTAssertEqual(try api.request("GET", "/downloads", headers: ["Authorization": "Bearer " + secret]).status, 401)
    }

    func testAnAddTokenAddsAndAManageTokenChangesSettings() throws {
        let make = { (scope: String) throws -> String in
            let reply = try self.api.request(
                "POST", "/tokens", json: ["name": scope, "scope": scope],
                headers: ["Authorization": "Bearer " + self.admin])
            XCTAssertEqual(reply.status, 201, reply.text)
            return reply.json["secret"] as? String ?? ""
        }
        let adder = try make("add")
        let manager = try make("manage")
        let hash = try sandbox.makeRandomFile("www/a.bin", size: 100_000)
        let added = try haulCommand(["add", originURL("a.bin"), "--wait"], environment: ["HAUL_TOKEN": adder])
        XCTAssertEqual(added.status, 0, added.output)
        XCTAssertEqual(try sha256(sandbox.file("downloads/a.bin")), hash)
        let patch = { (token: String) in
            try self.api.request(
                "PATCH", "/settings", json: ["max_active": 2], headers: ["Authorization": "Bearer " + token])
        }
        XCTAssertEqual(try patch(adder).status, 403)
        XCTAssertEqual(try patch(manager).status, 200)
        XCTAssertEqual(try api.request("GET", "/webhooks", headers: ["Authorization": "Bearer " + manager]).status, 403)
    }
}
