import Foundation
import HaulCore
import HaulLoop
import XCTest
@testable import HaulAPI

/// Names and URLs are refused, not cut or passed on, when the file system or the network could not take them as
/// given: folders past a name's 255 bytes or a path's depth and length, webhook URLs with impossible ports or
/// hosts; and names lose the invisible characters that make them read as something else.
final class NameLimitTests: XCTestCase {
    private func fields(_ fixture: APIFixture, _ response: HTTPResponse) -> [String] {
        (fixture.json(response)["errors"] as? [[String: Any]])?.compactMap { $0["field"] as? String } ?? []
    }

    private func add(_ fixture: APIFixture, _ members: [String: Any]) throws -> HTTPResponse {
        var body = members
        body["url"] = body["url"] ?? "http://127.0.0.1:9/x.bin"
        body["start_paused"] = true
        let json = String(decoding: try JSONSerialization.data(withJSONObject: body), as: UTF8.self)
        return fixture.call("POST", "/downloads", json: json)
    }

    func testFoldersPastTheLimitsAreRefusedNotCut() throws {
        let fixture = try APIFixture()
        let long = String(repeating: "d", count: 5000)
        for directory in [
            Array(repeating: "a", count: 2000).joined(separator: "/"),
            Array(repeating: String(repeating: "b", count: 250), count: 20).joined(separator: "/"),
            long, "ok/" + String(repeating: "é", count: 128),
            Array(repeating: "c", count: FileName.maxDepth + 1).joined(separator: "/"),
        ] {
            let response = try add(fixture, ["directory": directory])
            XCTAssertEqual(response.status, 422, String(directory.prefix(60)))
            XCTAssertEqual(fields(fixture, response), ["directory"])
        }
        // At the limits: a 255-byte name kept whole, 32 folders deep.
        let widest = String(repeating: "w", count: 255)
        let kept = try add(fixture, ["directory": "x/" + widest, "filename": "x.bin"])
        XCTAssertEqual(kept.status, 201, String(decoding: kept.body, as: UTF8.self))
        XCTAssertEqual(fixture.json(kept)["path"] as? String, "x/\(widest)/x.bin")
        let deepest = Array(repeating: "e", count: FileName.maxDepth).joined(separator: "/")
        XCTAssertEqual(try add(fixture, ["directory": deepest, "url": "http://127.0.0.1:9/d.bin"]).status, 201)

        // A file name over 240 bytes is refused too (its part file and a free-name suffix need the rest).
        let named = try add(fixture, ["filename": String(repeating: "n", count: 241)])
        XCTAssertEqual(named.status, 422)
        XCTAssertEqual(fields(fixture, named), ["filename"])
        XCTAssertEqual(try add(fixture, ["filename": String(repeating: "n", count: 240)]).status, 201)
    }

    func testACategorysFolderHasTheSameLimitsAloneAndWithTheDownloads() throws {
        let fixture = try APIFixture()
        let tooLong = "{\"directory\":\"\(String(repeating: "f", count: 300))\"}"
        XCTAssertEqual(fixture.call("PUT", "/categories/films", json: tooLong).status, 422)
        let half = Array(repeating: "g", count: 20).joined(separator: "/")
        XCTAssertEqual(fixture.call("PUT", "/categories/films", json: "{\"directory\":\"\(half)\"}").status, 201)
        // Twenty folders of the category and twenty of the download: 40, deeper than 32.
        let response = try add(fixture, ["category": "films", "directory": half])
        XCTAssertEqual(response.status, 422, String(decoding: response.body, as: UTF8.self))
        XCTAssertEqual(fields(fixture, response), ["directory"])
        XCTAssertEqual(try add(fixture, ["category": "films", "directory": "a/b"]).status, 201)
        XCTAssertEqual(fixture.engine.count, 1)
    }

    func testInvisibleCharactersLeaveNames() throws {
        // U+202E (right-to-left override) makes "fdp.exe" read "exe.pdf"; zero-width and BOM characters hide.
        for (proposed, expected) in [
            ("\u{202E}fdp.exe", "fdp.exe"), ("in\u{200B}voice.pdf", "invoice.pdf"),
            ("\u{FEFF}a\u{2066}b\u{2069}.txt", "ab.txt"), ("x\u{2028}y.bin", "xy.bin"),
            ("r\u{00AD}e\u{061C}port.doc", "report.doc"),
        ] {
            XCTAssertEqual(FileName.sanitize(proposed), expected, proposed.debugDescription)
        }
        XCTAssertNil(FileName.sanitize("\u{202E}\u{200B}"))
        let encoded = "attachment; filename*=UTF-8''%E2%80%AEfdp.exe"
        XCTAssertEqual(FileName.derive(contentDisposition: encoded, finalURL: "http://h/x"), "fdp.exe")
        XCTAssertEqual(FileName.derive(contentDisposition: nil, finalURL: "http://h/%E2%80%AEgpj.scr"), "gpj.scr")
        // A client's name and folders lose them too.
        let fixture = try APIFixture()
        let response = try add(fixture, ["filename": "\u{202E}fdp.exe", "directory": "in\u{200F}box"])
        XCTAssertEqual(response.status, 201)
        XCTAssertEqual(fixture.json(response)["path"] as? String, "inbox/fdp.exe")
    }

    func testURLsAreCheckedAsTheNetworkWouldTakeThem() throws {
        let fixture = try APIFixture()
        let refused = [
            "http://127.0.0.1:99999/hook", "http://127.0.0.1:0/hook", "http://ex%00ample.com/hook",
            "http://a%2eb/hook", "http://exa\u{2028}mple.com/hook", "http://\u{202E}moc.example/hook",
            "http://exa\u{85}mple.com/", "http://[::1%25eth0]/hook", "http://a..b/hook",
            "http://" + String(repeating: "l", count: 64) + ".example/hook", "http://a b/hook",
            "http:///hook", "http://[zz::1]/hook",
        ]
        for url in refused {
            let hook = fixture.call("POST", "/webhooks", json: "{\"url\":\(jsonString(url))}")
            XCTAssertEqual(hook.status, 422, "webhook \(url.debugDescription)")
            XCTAssertEqual(try add(fixture, ["url": url]).status, 422, "download \(url.debugDescription)")
        }
        XCTAssertEqual(fixture.engine.webhooks.list.count, 0)
        XCTAssertEqual(fixture.engine.count, 0)
        for url in [
            "http://127.0.0.1:8080/hook", "https://hooks.example.com/a?b=c", "http://[::1]:9000/h",
            "http://under_score.example/h", "http://host.example./h", "https://xn--bcher-kva.example/h",
            "http://localhost/h",
        ] {
            let reply = fixture.call("POST", "/webhooks", json: "{\"url\":\(jsonString(url))}")
            XCTAssertEqual(reply.status, 201, "\(url): \(String(decoding: reply.body, as: UTF8.self))")
        }
    }

    func testAWebhookCategoryMustExist() throws {
        let fixture = try APIFixture()
        let unknown = fixture.call("POST", "/webhooks", json: #"{"url":"http://127.0.0.1:9/h","category":"films"}"#)
        XCTAssertEqual(unknown.status, 409)
        XCTAssertTrue((fixture.json(unknown)["detail"] as? String ?? "").contains("no category 'films'"))
        XCTAssertEqual(fixture.call("PUT", "/categories/films", json: "{}").status, 201)
        let known = fixture.call("POST", "/webhooks", json: #"{"url":"http://127.0.0.1:9/h","category":"films"}"#)
        XCTAssertEqual(known.status, 201)
    }

    private func jsonString(_ text: String) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: [text]), as: UTF8.self).dropFirst().dropLast()
            .description
    }
}
