import Foundation
import HaulCore
import HaulLoop
import XCTest
@testable import HaulAPI

/// Tokens with a scope: made, listed and revoked by an admin; each refused with 403 exactly on the routes its scope
/// does not reach, as the operation table says, so a route added later without a scope fails here.
final class TokenScopeTests: XCTestCase {
    private let admin = "the-admin-token-0123456789"

    private func make(
        _ fixture: APIFixture, _ name: String, _ scope: String,
        expiresAt: String? = nil
    ) throws -> (id: String, secret: String) {
        var body = #"{"name": "\#(name)", "scope": "\#(scope)""#
        if let expiresAt { body += #", "expires_at": "\#(expiresAt)""# }
        let reply = fixture.call("POST", "/tokens", json: body + "}", headers: [("Authorization", "Bearer " + admin)])
        XCTAssertEqual(reply.status, 201, String(decoding: reply.body, as: UTF8.self))
        let json = fixture.json(reply)
        return (try XCTUnwrap(json["id"] as? String), try XCTUnwrap(json["secret"] as? String))
    }

    func testEachScopeIsRefusedExactlyWhereTheOperationTableSaysItDoesNotReach() throws {
        let fixture = try APIFixture(access: AccessPolicy(token: admin))
        var secrets: [Scope: String] = [:]
        for scope in Scope.allCases { secrets[scope] = try make(fixture, "for \(scope.name)", scope.name).secret }
        XCTAssertTrue(secrets.values.allSatisfy { $0.hasPrefix("haul_") && $0.utf8.count == 69 })
        var checked = 0
        for route in fixture.api.routeTable where !route.open {
            let target = route.path.replacingOccurrences(of: "{id}", with: "nothere00000000")
                .replacingOccurrences(of: "{name}", with: "nothere")
            let body: String? = ["POST", "PATCH", "PUT"].contains(route.method) ? "{}" : nil
            for scope in Scope.allCases {
                let reply = fixture.call(
                    route.method, target, json: body,
                    headers: [("Authorization", "Bearer " + secrets[scope]!)])
                let needed = try XCTUnwrap(route.operation.scope)
                let text = String(decoding: reply.body, as: UTF8.self)
                if needed > scope {
                    XCTAssertEqual(reply.status, 403, "\(route.method) \(route.path) with \(scope.name): \(text)")
                    XCTAssertTrue(text.contains("insufficient-scope"), text)
                } else {
                    XCTAssertNotEqual(reply.status, 403, "\(route.method) \(route.path) with \(scope.name): \(text)")
                    XCTAssertNotEqual(reply.status, 401, "\(route.method) \(route.path) with \(scope.name): \(text)")
                }
                checked += 1
            }
        }
        XCTAssertGreaterThan(checked, 100)
    }

    func testTokensAreListedWithoutSecretsAndRevokedAtOnce() throws {
        let fixture = try APIFixture(access: AccessPolicy(token: admin))
        let reader = try make(fixture, "wall dashboard", "read")
        let stats = { fixture.call("GET", "/stats", headers: [("Authorization", "Bearer " + reader.secret)]).status }
        XCTAssertEqual(stats(), 200)
        let listed = fixture.call("GET", "/tokens", headers: [("Authorization", "Bearer " + admin)])
        let text = String(decoding: listed.body, as: UTF8.self)
        XCTAssertTrue(text.contains("wall dashboard") && text.contains(#""scope":"read""#), text)
        XCTAssertFalse(text.contains(reader.secret) || text.contains("secret"), "secrets are shown once")
        XCTAssertEqual(
            fixture.call("GET", "/tokens", headers: [("Authorization", "Bearer " + reader.secret)]).status, 403)
        XCTAssertEqual(
            fixture.call("DELETE", "/tokens/" + reader.id, headers: [("Authorization", "Bearer " + admin)])
                .status, 204)
        XCTAssertEqual(stats(), 401, "revoked: refused at its next request")
        XCTAssertEqual(
            fixture.call("DELETE", "/tokens/" + reader.id, headers: [("Authorization", "Bearer " + admin)])
                .status, 404)
        // An expiry passes: refused from then on.
        let brief = try make(fixture, "brief", "read", expiresAt: Timestamp.rfc3339(Date().addingTimeInterval(60)))
        XCTAssertEqual(
            fixture.call("GET", "/stats", headers: [("Authorization", "Bearer " + brief.secret)]).status, 200)
        fixture.clock.advance(120)
        XCTAssertEqual(
            fixture.call("GET", "/stats", headers: [("Authorization", "Bearer " + brief.secret)]).status, 401)
    }

    func testATokenIsMadeOnlyWhereItMeansSomethingAndChecked() throws {
        let open = try APIFixture()
        XCTAssertEqual(
            open.call("POST", "/tokens", json: #"{"name": "x", "scope": "read"}"#).status, 409,
            "without --token everyone is admin")
        let fixture = try APIFixture(access: AccessPolicy(token: admin))
        let auth = [("Authorization", "Bearer " + admin)]
        for body in [
            #"{"name": "x", "scope": "root"}"#, #"{"scope": "read"}"#, #"{"name": "", "scope": "read"}"#,
            #"{"name": "x", "scope": "read", "expires_at": "tomorrow"}"#,
            #"{"name": "x", "scope": "read", "expires_at": "2001-01-01T00:00:00Z"}"#,
            #"{"name": "x", "scope": "read", "owner": "me"}"#,
        ] {
            XCTAssertEqual(fixture.call("POST", "/tokens", json: body, headers: auth).status, 422, body)
        }
        XCTAssertEqual(API.rfc3339("2027-01-31T18:00:00+02:00")?.timeIntervalSince1970, 1_801_418_400 - 7200)
        XCTAssertEqual(API.rfc3339("2027-01-31T16:00:00.5Z")?.timeIntervalSince1970, 1_801_418_400 - 7200 + 0.5)
        XCTAssertNil(API.rfc3339("2027-13-01T00:00:00Z"))
    }

    func testWrongScopedSecretsCountAgainstTheAddressAndThenNoneIsLookedAt() throws {
        let fixture = try APIFixture(access: AccessPolicy(token: admin))
        let reader = try make(fixture, "wall", "read")
        // Guesses shaped like scoped tokens are wrong tokens like any other: counted per address, then 429.
        var statuses: [Int] = []
        for index in 0..<12 {
            let guess = "haul_" + String(repeating: String(index % 10), count: 64)
            statuses.append(fixture.call("GET", "/stats", headers: [("Authorization", "Bearer " + guess)]).status)
        }
        XCTAssertEqual(Set(statuses.prefix(10)), [401])
        XCTAssertEqual(statuses.last, 429)
        // Past the burst the right secret is not looked at either, from that address; from another it passes.
        XCTAssertEqual(
            fixture.call("GET", "/stats", headers: [("Authorization", "Bearer " + reader.secret)]).status, 429)
        XCTAssertEqual(
            fixture.call(
                "GET", "/stats", headers: [("Authorization", "Bearer " + reader.secret)],
                peer: "10.9.9.9"
            ).status, 200)
        // A secret one character off is not it.
        var near = reader.secret
        near.removeLast()
        near += reader.secret.hasSuffix("0") ? "1" : "0"
        XCTAssertNotEqual(
            fixture.call(
                "GET", "/stats", headers: [("Authorization", "Bearer " + near)],
                peer: "10.9.9.9"
            ).status, 200)
    }
}
