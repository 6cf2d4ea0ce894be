import Foundation
import HaulLoop
import XCTest
@testable import HaulAPI

/// What a browser may reach, in-process: browser extensions' origins answered (CORS, preflight, the aria2 front and
/// REST), `Origin: null` only with the token, JSONP and cross-site GETs of the aria2 front with no data without the
/// token, guessing stopped past the burst even inside one multicall, and a request's work bounded however it
/// nests its calls.
final class BrowserAccessTests: XCTestCase {
    private let token = "browser-access-token-0123456789"
    private let extensionOrigin = "chrome-extension://mpiodijhokgodhhofbcjdecpffjipkle"

    private func rpcBody(_ method: String, _ params: [Any] = [], token: String? = nil) -> String {
        let all: [Any] = (token.map { ["token:" + $0] } ?? []) + params
        let data = try! JSONSerialization.data(withJSONObject: [
            "jsonrpc": "2.0", "id": "1", "method": method,
            "params": all,
        ])
        return String(decoding: data, as: UTF8.self)
    }

    private func allowOrigin(_ response: HTTPResponse) -> [String] {
        response.headers.filter { $0.name == "Access-Control-Allow-Origin" }.map(\.value)
    }

    func testABrowserExtensionIsAnsweredWithAndWithoutAServerToken() throws {
        for serverToken in [nil, token] {
            let fixture = try APIFixture(
                access: AccessPolicy(
                    token: serverToken,
                    allowedHosts: AccessPolicy.loopbackHosts))
            let origin = [("Origin", extensionOrigin)]
            // The preflight a JSON POST makes first, then the call itself.
            let preflight = fixture.call(
                "OPTIONS", "/jsonrpc",
                headers: origin + [
                    ("Access-Control-Request-Method", "POST"), ("Access-Control-Request-Headers", "content-type"),
                ])
            XCTAssertEqual(preflight.status, 204)
            XCTAssertEqual(allowOrigin(preflight), [extensionOrigin])
            let added = fixture.call(
                "POST", "/jsonrpc",
                json: rpcBody(
                    "aria2.addUri",
                    [
                        ["http://127.0.0.1:9/e.bin"],
                        ["pause": "true"],
                    ],
                    token: serverToken), headers: origin)
            XCTAssertEqual(added.status, 200, String(decoding: added.body, as: UTF8.self))
            XCTAssertNotNil(fixture.json(added)["result"] as? String)
            XCTAssertEqual(allowOrigin(added), [extensionOrigin])
            // REST too, with the token where the server has one.
            let bearer = serverToken.map { [("Authorization", "Bearer " + $0)] } ?? []
            let rest = fixture.call(
                "POST", "/downloads", json: "{\"url\":\"http://127.0.0.1:9/r.bin\",\"start_paused\":true}",
                headers: origin + bearer)
            XCTAssertEqual(rest.status, 201)
            XCTAssertEqual(allowOrigin(rest), [extensionOrigin])
            // A page cannot pass for one: a web origin is still refused.
            XCTAssertEqual(
                fixture.call(
                    "POST", "/downloads", json: "{\"url\":\"http://127.0.0.1:9/w.bin\"}",
                    headers: [("Origin", "https://chrome-extension.example")] + bearer
                ).status, 403)
            if serverToken != nil {
                // Without the token an extension is refused like anyone.
                let anonymous = fixture.call("POST", "/jsonrpc", json: rpcBody("aria2.getGlobalStat"), headers: origin)
                XCTAssertEqual(
                    (fixture.json(anonymous)["error"] as? [String: Any])?["message"] as? String,
                    "Unauthorized")
            }
        }
    }

    func testOriginNullIsAnsweredOnlyToCallsCarryingTheToken() throws {
        let open = try APIFixture()
        let null = [("Origin", "null")]
        XCTAssertEqual(
            open.call("POST", "/jsonrpc", json: rpcBody("aria2.getGlobalStat"), headers: null).status, 403,
            "a server without a token answers no Origin null: any sandboxed frame can send it")
        XCTAssertEqual(
            open.call(
                "POST", "/downloads", json: "{\"url\":\"http://127.0.0.1:9/n.bin\"}",
                headers: null
            ).status, 403)

        let guarded = try APIFixture(access: AccessPolicy(token: token))
        let without = guarded.call("POST", "/jsonrpc", json: rpcBody("aria2.tellActive"), headers: null)
        XCTAssertNotNil(guarded.json(without)["error"])
        XCTAssertEqual(allowOrigin(without), [], "no data for Origin null without the token")
        let with = guarded.call("POST", "/jsonrpc", json: rpcBody("aria2.tellActive", token: token), headers: null)
        XCTAssertNotNil(guarded.json(with)["result"])
        XCTAssertEqual(allowOrigin(with), ["null"])
        let preflight = guarded.call("OPTIONS", "/jsonrpc", headers: null + [("Access-Control-Request-Method", "POST")])
        XCTAssertEqual(allowOrigin(preflight), ["null"])
        let rest = guarded.call("GET", "/stats", headers: null + [("Authorization", "Bearer " + token)])
        XCTAssertEqual(allowOrigin(rest), ["null"])
        XCTAssertEqual(allowOrigin(guarded.call("GET", "/healthz", headers: null)), [])
    }

    func testJSONPAndCrossSiteGETsGetNoDataWithoutTheToken() throws {
        let fixture = try APIFixture(access: AccessPolicy(allowedHosts: AccessPolicy.loopbackHosts))
        _ = fixture.addPaused("http://127.0.0.1:9/signed.bin?X-Amz-Signature=secret")
        let params = Data(try JSONSerialization.data(withJSONObject: [0, 100])).base64EncodedString()
        let target = "/jsonrpc?method=aria2.tellWaiting&id=1&params=\(params)"
        // A script tag on another site: JSONP, or a plain GET the browser marks as cross-site or that names
        // another page as its Referer.
        for (query, headers) in [
            ("&jsoncallback=steal", [(String, String)]()),
            ("", [("Sec-Fetch-Site", "cross-site")]), ("", [("Sec-Fetch-Site", "same-site")]),
            ("", [("Referer", "https://evil.example/page.html")]),
        ] {
            let answer = fixture.call("GET", target + query, headers: headers)
            let text = String(decoding: answer.body, as: UTF8.self)
            XCTAssertFalse(text.contains("signed.bin"), "\(query) \(headers): \(text)")
            XCTAssertFalse(text.hasPrefix("steal("), text)
        }
        // curl, or this server's own page, still reads.
        XCTAssertTrue(String(decoding: fixture.call("GET", target).body, as: UTF8.self).contains("signed.bin"))
        XCTAssertTrue(
            String(
                decoding: fixture.call(
                    "GET", target,
                    headers: [
                        ("Sec-Fetch-Site", "same-origin"),
                        ("Referer", "http://127.0.0.1:8080/"),
                    ]
                ).body,
                as: UTF8.self
            ).contains("signed.bin"))

        // With a token, a call that carries it is answered by JSONP.
        let guarded = try APIFixture(access: AccessPolicy(token: token))
        _ = guarded.addPaused("http://127.0.0.1:9/mine.bin", headers: [("Authorization", "Bearer " + token)])
        let withToken = Data(try JSONSerialization.data(withJSONObject: ["token:" + token, 0, 100]))
            .base64EncodedString()
        let jsonp = guarded.call(
            "GET", "/jsonrpc?method=aria2.tellWaiting&id=1&params=\(withToken)&jsoncallback=cb",
            headers: [("Sec-Fetch-Site", "cross-site")])
        let text = String(decoding: jsonp.body, as: UTF8.self)
        XCTAssertTrue(text.hasPrefix("cb(") && text.contains("mine.bin"), text)
    }

    func testGuessesInsideOneMulticallStopAtTheBurst() throws {
        let fixture = try APIFixture(access: AccessPolicy(token: token))
        // 999 wrong secrets and the right one: after ten, none is looked at, the right one neither.
        var calls: [[String: Any]] = (0..<999).map { index in
            ["methodName": "aria2.getGlobalStat", "params": ["token:guess-\(index)"]]
        }
        calls.insert(["methodName": "aria2.getGlobalStat", "params": ["token:" + token]], at: 500)
        let body = String(
            decoding: try JSONSerialization.data(withJSONObject: [
                "jsonrpc": "2.0", "id": "m", "method": "system.multicall", "params": [calls],
            ]), as: UTF8.self)
        let answer = fixture.json(fixture.call("POST", "/jsonrpc", json: body))
        let results = try XCTUnwrap(answer["result"] as? [Any])
        XCTAssertEqual(results.count, 1000)
        XCTAssertTrue(results[500] is [String: Any], "the right secret was looked at past the burst: \(results[500])")
        XCTAssertEqual((results[500] as? [String: Any])?["message"] as? String, "Unauthorized")
        XCTAssertEqual(
            fixture.call("GET", "/stats", headers: [("Authorization", "Bearer " + token)]).status, 429,
            "REST counts the same attempts")
        XCTAssertEqual(
            fixture.call(
                "GET", "/stats", headers: [("Authorization", "Bearer " + token)],
                peer: "10.1.1.1"
            ).status, 200)
    }

    func testARequestsWorkIsBoundedAcrossBatchesAndMulticalls() throws {
        let fixture = try APIFixture()
        for index in 0..<20 { _ = fixture.addPaused("http://127.0.0.1:9/held-\(index).bin") }
        // 18 multicalls of 1,000 tellWaiting(0, 1000) each: 360,000 statuses asked for in a 1 MiB body.
        let inner = Array(
            repeating: ["methodName": "aria2.tellWaiting", "params": [0, 1000]] as [String: Any],
            count: 1000)
        let batch: [[String: Any]] = (0..<18).map { index in
            ["jsonrpc": "2.0", "id": "b\(index)", "method": "system.multicall", "params": [inner]]
        }
        let body = String(decoding: try JSONSerialization.data(withJSONObject: batch), as: UTF8.self)
        XCTAssertLessThan(body.utf8.count, 1 << 20)
        let answer = fixture.call("POST", "/jsonrpc", json: body)
        XCTAssertLessThan(answer.body.count, 8 << 20, "the answer is bounded")
        let text = String(decoding: answer.body, as: UTF8.self)
        XCTAssertTrue(text.contains("over its budget"), String(text.suffix(300)))
        // The front answers the next request as usual.
        let next = fixture.json(fixture.call("POST", "/jsonrpc", json: rpcBody("aria2.tellWaiting", [0, 5])))
        XCTAssertEqual((next["result"] as? [Any])?.count, 5)
    }
}
