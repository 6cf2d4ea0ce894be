import Foundation
import HaulCore
import HaulLoop
import XCTest
@testable import HaulAPI

/// POST /downloads with `{"downloads": [...]}`: each download answered on its own, or all-or-nothing.
final class BatchTests: XCTestCase {
    private func batch(
        _ fixture: APIFixture, _ items: [String], atomic: Bool? = nil,
        headers: [(String, String)] = []
    ) -> HTTPResponse {
        let atomicMember = atomic.map { ",\"atomic\":\($0)" } ?? ""
        return fixture.call(
            "POST", "/downloads", json: "{\"downloads\":[\(items.joined(separator: ","))]\(atomicMember)}",
            headers: headers)
    }

    private func results(_ fixture: APIFixture, _ response: HTTPResponse) -> [[String: Any]] {
        fixture.json(response)["results"] as? [[String: Any]] ?? []
    }

    func testEachDownloadIsAnsweredOnItsOwn() throws {
        let fixture = try APIFixture()
        let existing = fixture.addPaused("http://127.0.0.1:9/old.bin")
        let response = batch(
            fixture,
            [
                #"{"url":"http://127.0.0.1:9/a.bin","start_paused":true}"#,
                #"{"url":"gopher://127.0.0.1/b.bin"}"#,
                #"{"url":"http://127.0.0.1:9/old.bin","start_paused":true}"#,
                #"{"url":"http://127.0.0.1:9/a.bin","start_paused":true}"#,
                #""not an object""#,
                #"{"url":"http://127.0.0.1:9/c.bin","connections":99,"colour":"red"}"#,
            ])
        XCTAssertEqual(response.status, 200)
        let body = fixture.json(response)
        let list = results(fixture, response)
        XCTAssertEqual(list.map { $0["status"] as? Int }, [201, 422, 200, 200, 422, 422])
        let first = try XCTUnwrap(list[0]["download"] as? [String: Any])
        XCTAssertEqual(first["state"] as? String, "paused")
        XCTAssertEqual((list[2]["download"] as? [String: Any])?["id"] as? String, existing, "the unfinished one")
        XCTAssertEqual(
            (list[3]["download"] as? [String: Any])?["id"] as? String, first["id"] as? String,
            "twice in one batch is one download")
        let problem = try XCTUnwrap(list[5]["problem"] as? [String: Any])
        XCTAssertEqual(
            (problem["errors"] as? [[String: Any]])?.compactMap { $0["field"] as? String },
            ["colour", "connections"])
        XCTAssertEqual(problem["type"] as? String, "urn:haul:problem:validation")
        XCTAssertEqual(body["created"] as? Int, 1)
        XCTAssertEqual(body["existing"] as? Int, 2)
        XCTAssertEqual(body["failed"] as? Int, 3)
        XCTAssertEqual(fixture.engine.count, 2)
    }

    func testAnAtomicBatchAddsAllOrNone() throws {
        let fixture = try APIFixture()
        let refused = batch(
            fixture,
            [
                #"{"url":"http://127.0.0.1:9/a.bin"}"#, #"{"url":"gopher://x/"}"#,
                #"{"url":"http://127.0.0.1:9/c.bin","size":-1}"#,
            ], atomic: true)
        XCTAssertEqual(refused.status, 422)
        let problem = fixture.json(refused)
        XCTAssertEqual(
            (problem["errors"] as? [[String: Any]])?.compactMap { $0["field"] as? String },
            ["downloads[1].url", "downloads[2].size"])
        XCTAssertEqual(fixture.engine.count, 0, "nothing added")

        let added = batch(
            fixture,
            [
                #"{"url":"http://127.0.0.1:9/a.bin","start_paused":true}"#,
                #"{"url":"http://127.0.0.1:9/b.bin","start_paused":true}"#,
            ], atomic: true)
        XCTAssertEqual(added.status, 201)
        XCTAssertEqual(results(fixture, added).map { $0["status"] as? Int }, [201, 201])
        XCTAssertEqual(fixture.engine.count, 2)
    }

    func testTheBatchItselfMustBeSound() throws {
        let fixture = try APIFixture()
        let item = #"{"url":"http://127.0.0.1:9/x.bin"}"#
        for (body, field) in [
            (#"{"downloads":[]}"#, "downloads"), (#"{"downloads":{}}"#, "downloads"),
            (#"{"downloads":[\#(item)],"atomic":"yes"}"#, "atomic"),
            (#"{"downloads":[\#(item)],"url":"http://h/"}"#, "url"),
            (
                "{\"downloads\":[" + Array(repeating: item, count: 1001).joined(separator: ",") + "]}",
                "downloads"
            ),
        ] {
            let response = fixture.call("POST", "/downloads", json: body)
            XCTAssertEqual(response.status, 422, String(body.prefix(80)))
            let fields = (fixture.json(response)["errors"] as? [[String: Any]])?.compactMap { $0["field"] as? String }
            XCTAssertEqual(fields, [field], String(body.prefix(80)))
        }
        let thousand = batch(
            fixture, (0..<1000).map { #"{"url":"http://127.0.0.1:9/\#($0).bin","start_paused":true}"# })
        XCTAssertEqual(thousand.status, 200)
        XCTAssertEqual(fixture.json(thousand)["created"] as? Int, 1000)
        XCTAssertEqual(fixture.engine.count, 1000)
    }

    func testBeyondTheServersCapacityEachExtraIsRefused() throws {
        var limits = APILimits()
        limits.maxDownloads = 3
        let fixture = try APIFixture(limits: limits)
        _ = fixture.addPaused("http://127.0.0.1:9/first.bin")
        let items = (0..<4).map { #"{"url":"http://127.0.0.1:9/\#($0).bin","start_paused":true}"# }
        let response = batch(fixture, items)
        XCTAssertEqual(results(fixture, response).map { $0["status"] as? Int }, [201, 201, 507, 507])
        XCTAssertEqual(fixture.engine.count, 3)
        let atomic = batch(fixture, [#"{"url":"http://127.0.0.1:9/z.bin"}"#], atomic: true)
        XCTAssertEqual(atomic.status, 507)
        XCTAssertEqual(fixture.engine.count, 3)
    }

    func testARepeatedIdempotencyKeyGetsTheFirstAnswer() throws {
        let fixture = try APIFixture()
        let items = [#"{"url":"http://127.0.0.1:9/a.bin","start_paused":true}"#, #"{"url":"nope"}"#]
        let first = batch(fixture, items, headers: [("Idempotency-Key", "batch-1")])
        XCTAssertEqual(first.status, 200)
        let id = (results(fixture, first)[0]["download"] as? [String: Any])?["id"] as? String
        // Finished or not, the same key answers the same downloads, not new ones.
        let again = batch(fixture, items, headers: [("Idempotency-Key", "batch-1")])
        XCTAssertEqual(results(fixture, again).map { $0["status"] as? Int }, [201, 422])
        XCTAssertEqual((results(fixture, again)[0]["download"] as? [String: Any])?["id"] as? String, id)
        XCTAssertEqual(fixture.engine.count, 1)
        let other = batch(fixture, [items[0]], headers: [("Idempotency-Key", "batch-1")])
        XCTAssertEqual(other.status, 409, "the same key with another body")
        let single = fixture.call("POST", "/downloads", json: items[0], headers: [("Idempotency-Key", "batch-1")])
        XCTAssertEqual(single.status, 409, "a batch's key is not a single download's")
    }

    func testANameTheClientGaveIsInTheFirstAnswer() throws {
        let fixture = try APIFixture()
        let named = fixture.json(
            fixture.call(
                "POST", "/downloads",
                json:
                    #"{"url":"http://127.0.0.1:9/x","filename":"disk.iso","directory":"isos/2026","start_paused":true}"#
            ))
        XCTAssertEqual(named["filename"] as? String, "disk.iso")
        XCTAssertEqual(named["path"] as? String, "isos/2026/disk.iso")
        let unnamed = fixture.json(
            fixture.call(
                "POST", "/downloads",
                json: #"{"url":"http://127.0.0.1:9/y","start_paused":true}"#))
        XCTAssertTrue(unnamed["filename"] is NSNull, "the server's name is known once it answers")
        XCTAssertTrue(unnamed["path"] is NSNull)
    }
}
