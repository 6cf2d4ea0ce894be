import Foundation
import XCTest

/// A URL added again into the same place while its download is unfinished answers with that download, and says so
/// everywhere: REST's 200 (not 201) with the options PATCH could change applied and any other that differs
/// refused by name (an atomic batch then adds nothing), `haul add` naming the download and its state (and `--wait`
/// saying it is paused instead of hanging), aria2's addUri applying or refusing the same way.
final class DuplicateAddTests: HaulTestCase {
    private func paused(_ name: String) throws -> (url: String, id: String) {
        _ = try sandbox.makeRandomFile("www/" + name, size: 100_000)
        let url = originURL(name)
        return (url, try add(["url": url, "start_paused": true]))
    }

    func testRESTAppliesWhatCanChangeAndRefusesWhatCannot() throws {
        let (url, id) = try paused("twice.bin")
        let again = try api.request(
            "POST", "/downloads",
            json: [
                "url": url, "priority": 5, "max_speed": 4096,
                "connections": 2,
            ])
        XCTAssertEqual(again.status, 200, again.text)
        XCTAssertEqual(again.json["id"] as? String, id)
        XCTAssertEqual(again.json["priority"] as? Int, 5)
        XCTAssertEqual(again.json["max_speed"] as? Int, 4096)
        XCTAssertEqual(again.json["connections"] as? Int, 2)
        XCTAssertEqual(try download(id)["priority"] as? Int, 5, "applied to the download, not only in the answer")
        // A checksum, a header, a referer: fixed once added. Refused by name, nothing changed.
        let refused = try api.request(
            "POST", "/downloads",
            json: [
                "url": url, "checksum": "sha256:" + String(repeating: "0", count: 64), "referer": "http://r.example/",
                "priority": 9,
            ])
        XCTAssertEqual(refused.status, 409, refused.text)
        let detail = refused.json["detail"] as? String ?? ""
        XCTAssertTrue(
            detail.contains(id) && detail.contains("checksum") && detail.contains("referer")
                && detail.contains("paused"), detail)
        XCTAssertEqual(try download(id)["priority"] as? Int, 5)
        // The same again with nothing that differs is just the download.
        XCTAssertEqual(try api.request("POST", "/downloads", json: ["url": url]).status, 200)
        // An atomic batch holding a refused one adds nothing.
        _ = try sandbox.makeRandomFile("www/fresh.bin", size: 1000)
        let batch = try api.request(
            "POST", "/downloads",
            json: [
                "atomic": true,
                "downloads": [
                    ["url": originURL("fresh.bin"), "start_paused": true],
                    ["url": url, "checksum": "md5:" + String(repeating: "1", count: 32)],
                ],
            ])
        XCTAssertEqual(
            (batch.json["results"] as? [[String: Any]])?.map { $0["status"] as? Int }, [424, 409],
            batch.text)
        XCTAssertEqual((try api.get("/downloads").json["downloads"] as? [Any])?.count, 1)
    }

    func testTheClientNamesTheDownloadAndWaitSaysItIsPaused() throws {
        let (url, id) = try paused("cli.bin")
        let added = try haulCommand(["add", url])
        XCTAssertEqual(added.status, 0, added.output)
        XCTAssertEqual(added.stdout.trimmingCharacters(in: .whitespacesAndNewlines), id)
        XCTAssertTrue(
            added.stderr.contains("in the list already") && added.stderr.contains(id)
                && added.stderr.contains("paused"), added.stderr)
        // --wait on a paused download says so and ends, instead of following one that will not move.
        let waited = try haulCommand(["add", url, "--wait"])
        XCTAssertNotEqual(waited.status, 0)
        XCTAssertTrue(waited.stderr.contains("is paused") && waited.stderr.contains("haul resume"), waited.stderr)
        // Several: each existing one named, and the total counts every line (one refused too).
        let many = try haulCommand(["add", url, "gopher://nope/x", "--wait"])
        XCTAssertNotEqual(many.status, 0)
        XCTAssertTrue(many.stderr.contains("in the list already"), many.stderr)
        XCTAssertTrue(many.stderr.contains("0 of 2 completed, 1 paused, 1 refused"), many.stderr)
    }

    func testAria2sAddUriAppliesOrRefusesTheNewOptions() throws {
        let (url, id) = try paused("rpc.bin")
        func rpc(_ params: [Any]) throws -> [String: Any] {
            try api.request(
                "POST", "/jsonrpc",
                json: [
                    "jsonrpc": "2.0", "id": "1", "method": "aria2.addUri",
                    "params": params,
                ]
            ).json
        }
        let first = try XCTUnwrap(try rpc([[url], ["max-download-limit": "8K"]])["result"] as? String)
        XCTAssertEqual(try download(id)["max_speed"] as? Int, 8192, "the new limit applied")
        XCTAssertTrue(id.isEmpty == false && first.count == 16)
        let refused = try XCTUnwrap(
            try rpc([[url], ["checksum": "sha-256=" + String(repeating: "a", count: 64)]])["error"]
                as? [String: Any])
        XCTAssertTrue((refused["message"] as? String ?? "").contains("checksum"), "\(refused)")
    }
}
