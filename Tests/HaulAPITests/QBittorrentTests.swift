import Foundation
import HaulCore
import HaulLoop
import HaulTestSupport
import XCTest
@testable import HaulAPI

/// The qBittorrent front's parts without a torrent: its parameters (query, form, multipart), its sessions and
/// their gate, `sync/maindata`'s deltas, and other kinds listed with --qbittorrent-list-all. The front against
/// real torrents and against qbittorrent-nox is Tests/QBittorrent/qbittorrent_test.py.
final class QBittorrentTests: XCTestCase {
    private func form(_ body: String, type: String) throws -> QBitForm {
        try QBitForm(
            HTTPRequest(
                method: "POST", target: "/api/v2/torrents/add?hash=q", headers: [("Content-Type", type)],
                body: Array(body.utf8)))
    }

    func testFormsAndMultipartBodiesAreReadAsQBittorrentReadsThem() throws {
        let urlEncoded = try form(
            "urls=magnet%3A%3Fxt%3Dx&tags=a+b&tags=c&paused=True", type: "application/x-www-form-urlencoded")
        XCTAssertEqual(urlEncoded["urls"], "magnet:?xt=x")
        // The last of a repeated one; the query's too.
        XCTAssertEqual(urlEncoded["tags"], "c")
        XCTAssertEqual(urlEncoded["hash"], "q")
        XCTAssertEqual(try urlEncoded.bool("paused"), true)
        let body =
            "--b0undary\r\nContent-Disposition: form-data; name=\"category\"\r\n\r\ntv\r\n"
            + "--b0undary\r\nContent-Disposition: form-data; name=\"torrents\"; filename=\"a \\\"b\\\".torrent\"\r\n"
            + "Content-Type: application/x-bittorrent\r\n\r\nd4:infoe\r\n\r\n--b0undary--\r\n"
        let multipart = try form(body, type: "multipart/form-data; boundary=\"b0undary\"")
        XCTAssertEqual(multipart["category"], "tv")
        XCTAssertEqual(multipart.files.map(\.filename), ["a \"b\".torrent"])
        // The file's bytes exactly, a CRLF inside them kept.
        XCTAssertEqual(multipart.files.first.map { String(decoding: $0.bytes, as: UTF8.self) }, "d4:infoe\r\n")
        // Malformed: no boundary, a part cut short, a type that is not a form.
        for (text, type, status) in [
            ("x", "multipart/form-data", 400),
            ("--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv", "multipart/form-data; boundary=b", 400),
            ("{}", "application/json", 415),
        ] {
            XCTAssertThrowsError(try form(text, type: type)) { error in
                XCTAssertEqual((error as? QBitError)?.status, status, text)
            }
        }
        XCTAssertThrowsError(try form("paused=yes", type: "application/x-www-form-urlencoded").bool("paused"))
    }

    func testMagnetHashesAreReadInHexAndBase32() {
        let hex = "6dd1d35781f13c02f8967224953c811051f90b8b"
        XCTAssertEqual(QBitTorrent.magnetHash("magnet:?dn=x&xt=urn:btih:\(hex.uppercased())"), hex)
        // The same 20 bytes in base32 (RFC 4648).
        let bytes = stride(from: 0, to: 40, by: 2).map { UInt8(hex.dropFirst($0).prefix(2), radix: 16)! }
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        var bits = "", base32 = ""
        for byte in bytes { bits += String(byte, radix: 2).leftPadded(8) }
        for chunk in stride(from: 0, to: bits.count, by: 5) {
            base32.append(alphabet[Int(String(bits.dropFirst(chunk).prefix(5)), radix: 2)!])
        }
        XCTAssertEqual(QBitTorrent.magnetHash("magnet:?xt=urn:btih:\(base32.lowercased())"), hex)
        XCTAssertNil(QBitTorrent.magnetHash("magnet:?xt=urn:btih:xyz"))
    }

    func testSyncSendsEverythingFirstThenOnlyWhatChanged() {
        var sync = QBitSync()
        let first = sync.answer(
            asked: 0, torrents: ["a": [("name", .string("a")), ("progress", .number(0))]],
            categories: ["tv": .object([("name", .string("tv"))])], tags: ["x"], server: [("dl_info_speed", .number(5))]
        )
        XCTAssertEqual(first["full_update"], .bool(true))
        XCTAssertEqual(first["rid"], .number(1))
        let second = sync.answer(
            asked: 1,
            torrents: ["a": [("name", .string("a")), ("progress", .number(0.5))], "b": [("name", .string("b"))]],
            categories: [:], tags: ["y"], server: [("dl_info_speed", .number(5))])
        XCTAssertNil(second["full_update"])
        XCTAssertEqual(second["rid"], .number(2))
        XCTAssertEqual(second["torrents"]?["a"], .object([("progress", .number(0.5))]))
        XCTAssertEqual(second["torrents"]?["b"], .object([("name", .string("b"))]))
        XCTAssertEqual(second["categories_removed"], .array([.string("tv")]))
        XCTAssertEqual(second["tags"], .array([.string("y")]))
        XCTAssertEqual(second["tags_removed"], .array([.string("x")]))
        XCTAssertNil(second["server_state"])
        let third = sync.answer(asked: 2, torrents: [:], categories: [:], tags: [], server: [])
        XCTAssertEqual(third["torrents_removed"], .array([.string("a"), .string("b")]))
        // An rid it did not give (another client's, an old one): everything again.
        XCTAssertEqual(
            sync.answer(asked: 1, torrents: [:], categories: [:], tags: [], server: [])["full_update"], .bool(true))
    }

    private func call(
        _ fixture: APIFixture, _ method: String, _ path: String, _ body: String = "", cookie: String? = nil,
        headers: [(String, String)] = []
    ) -> (status: Int, text: String, cookie: String?) {
        var all = headers + [("Content-Type", "application/x-www-form-urlencoded")]
        if let cookie { all.append(("Cookie", "SID=\(cookie)")) }
        let response = fixture.call(method, "/api/v2/" + path, body: Array(body.utf8), headers: all)
        let setCookie = response.headers.first { $0.name == "Set-Cookie" }?.value
        let sid = setCookie.flatMap { $0.split(separator: ";").first?.split(separator: "=", maxSplits: 1).last }
        return (response.status, String(decoding: response.body, as: UTF8.self), sid.map(String.init))
    }

    func testSessionsAreTheGatesAndOtherKindsAreListedOnlyWhenAsked() throws {
        let token = "qbittorrent-unit-token-0123456789"
        let fixture = try APIFixture(access: AccessPolicy(token: token))
        XCTAssertEqual(call(fixture, "GET", "app/version").status, 403)
        XCTAssertEqual(call(fixture, "POST", "auth/login", "username=admin&password=wrong").text, "Fails.")
        XCTAssertEqual(call(fixture, "POST", "auth/login", "username=someone&password=\(token)").text, "Fails.")
        let login = call(fixture, "POST", "auth/login", "username=admin&password=\(token)")
        XCTAssertEqual(login.text, "Ok.")
        let sid = try XCTUnwrap(login.cookie)
        XCTAssertEqual(call(fixture, "GET", "app/version", cookie: sid).text, "v4.5.2")
        XCTAssertEqual(
            call(fixture, "GET", "app/version", cookie: sid, headers: [("Referer", "http://evil.example/x")]).status,
            401)
        XCTAssertEqual(call(fixture, "GET", "torrents/pause?hashes=all", cookie: sid).status, 405)
        XCTAssertEqual(call(fixture, "GET", "torrents/nosuch", cookie: sid).status, 404)
        // An HTTP download is not a torrent: not listed.
        let id = fixture.addPaused(headers: [("Authorization", "Bearer \(token)")])
        XCTAssertFalse(id.isEmpty)
        XCTAssertEqual(call(fixture, "GET", "torrents/info", cookie: sid).text, "[]")
        XCTAssertEqual(call(fixture, "POST", "auth/logout", cookie: sid).status, 200)
        XCTAssertEqual(call(fixture, "GET", "app/version", cookie: sid).status, 403)

        var config = QBittorrentConfig()
        config.listAll = true
        let all = try APIFixture(qbittorrent: config)
        let other = all.addPaused("http://127.0.0.1:9/film.mkv")
        let listed = call(all, "GET", "torrents/info")
        let items = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(listed.text.utf8)) as? [[String: Any]])
        XCTAssertEqual(items.count, 1)
        XCTAssertEqual(items.first?["name"] as? String, "film.mkv")
        XCTAssertEqual(items.first?["state"] as? String, "pausedDL")
        let hash = try XCTUnwrap(items.first?["hash"] as? String)
        XCTAssertEqual(hash.count, 40)
        // Tags and pausing by that key reach the download.
        XCTAssertEqual(call(all, "POST", "torrents/addTags", "hashes=\(hash)&tags=b,a").status, 200)
        XCTAssertEqual(all.json(all.call("GET", "/downloads/\(other)"))["tags"] as? String, "a,b")
        XCTAssertEqual(call(all, "POST", "torrents/delete", "hashes=\(hash)&deleteFiles=false").status, 200)
        XCTAssertEqual(all.call("GET", "/downloads/\(other)").status, 404)
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
