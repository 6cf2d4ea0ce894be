import Foundation
import HaulCore
import HaulLoop
import XCTest
@testable import HaulAPI

/// Input two readers could read two ways is refused rather than guessed at: a JSON name given twice, a query
/// parameter given twice. A refused atomic batch says what became of each element, whatever refused it.
final class AmbiguousInputTests: XCTestCase {
    func testAJSONNameGivenTwiceIsABadRequest() throws {
        let fixture = try APIFixture()
        for body in [
            #"{"url":"http://127.0.0.1:9/a.bin","url":"http://127.0.0.1:9/b.bin"}"#,
            #"{"url":"http://127.0.0.1:9/a.bin","start_paused":true,"start_paused":false}"#,
            #"{"url":"http://127.0.0.1:9/a.bin","headers":{"X-A":"1","X-A":"2"}}"#,
            #"{"downloads":[{"url":"http://127.0.0.1:9/a.bin","url":"http://127.0.0.1:9/b.bin"}]}"#,
        ] {
            let response = fixture.call("POST", "/downloads", json: body)
            XCTAssertEqual(response.status, 400, body)
            let detail = fixture.json(response)["detail"] as? String ?? ""
            XCTAssertTrue(detail.contains("is given twice"), "\(body): \(detail)")
        }
        XCTAssertEqual(fixture.engine.count, 0, "nothing was added")
        let id = fixture.addPaused()
        let patch = fixture.call("PATCH", "/downloads/\(id)", json: #"{"state":"queued","state":"paused"}"#)
        XCTAssertEqual(patch.status, 400)
        // Many members: the names are then kept in a set, and a repeat is found as surely.
        let many = (0..<40).map { "\"X-H\($0)\":\"v\"" }.joined(separator: ",")
        let repeated = fixture.call(
            "POST", "/downloads",
            json: #"{"url":"http://127.0.0.1:9/m.bin","headers":{\#(many),"X-H7":"w"}}"#)
        XCTAssertEqual(repeated.status, 400)
        XCTAssertEqual(
            try JSONValue.parse(#"{"a":{"b":1},"c":{"b":2}}"#)["c"]?["b"], JSONValue(2),
            "one name in two objects is no repeat")
    }

    func testAQueryParameterGivenTwiceIsABadRequest() throws {
        let fixture = try APIFixture()
        XCTAssertEqual(fixture.call("PUT", "/categories/keep", json: "{}").status, 201)
        XCTAssertEqual(fixture.call("PUT", "/categories/junk", json: "{}").status, 201)
        let kept = fixture.call(
            "POST", "/downloads",
            json: #"{"url":"http://127.0.0.1:9/k.bin","start_paused":true,"category":"keep"}"#)
        XCTAssertEqual(kept.status, 201)
        let removal = fixture.call("DELETE", "/downloads?category=junk&category=keep&state=paused")
        XCTAssertEqual(removal.status, 400)
        XCTAssertTrue((fixture.json(removal)["detail"] as? String ?? "").contains("'category' is given twice"))
        XCTAssertEqual(fixture.engine.count, 1, "keep's download is still there")
        for target in [
            "/downloads?state=paused&state=queued", "/downloads?limit=1&limit=500",
            "/events?category=a&category=b", "/downloads/\(fixture.addPaused())?delete_file=false&delete_file=true",
        ] {
            let method = target.contains("delete_file") ? "DELETE" : "GET"
            XCTAssertEqual(fixture.call(method, target).status, 400, target)
        }
        XCTAssertEqual(fixture.engine.count, 2)
        XCTAssertEqual(fixture.call("GET", "/downloads?state=paused&limit=5").status, 200)
    }

    func testAnAtomicBatchRefusedForItsFieldsSaysEachElementsFate() throws {
        let fixture = try APIFixture()
        let body =
            #"{"atomic":true,"downloads":[{"url":"http://127.0.0.1:9/a.bin"},{"url":"gopher://x/"},"#
            + #""not an object",{"url":"http://127.0.0.1:9/d.bin","size":-1}]}"#
        let response = fixture.call("POST", "/downloads", json: body)
        XCTAssertEqual(response.status, 422)
        let problem = fixture.json(response)
        XCTAssertEqual(
            (problem["errors"] as? [[String: Any]])?.compactMap { $0["field"] as? String },
            ["downloads[1].url", "downloads[2]", "downloads[3].size"])
        let results = try XCTUnwrap(problem["results"] as? [[String: Any]], "\(problem)")
        XCTAssertEqual(results.map { $0["status"] as? Int }, [424, 422, 422, 422])
        XCTAssertEqual((results[1]["problem"] as? [String: Any])?["status"] as? Int, 422)
        XCTAssertEqual(
            ((results[3]["problem"] as? [String: Any])?["errors"] as? [[String: Any]])?.first?["field"]
                as? String, "size")
        XCTAssertEqual(fixture.engine.count, 0)
    }
}
