import Foundation
import XCTest

/// BitTorrent downloads against real peers on loopback: mktorrent's torrents, seeded by a python3-libtorrent
/// session on 127.0.0.1, found through the magnet's peer (x.pe) or opentracker. The files' bytes are checked, and
/// what the seeder uploaded tells what was fetched.
final class TorrentTests: HaulTestCase {
    override var serveArguments: [String] {
        super.serveArguments + ["--bittorrent", "--bittorrent-listen", "127.0.0.1:0"]
    }

    override func setUpWithError() throws {
        try XCTSkipUnless(TorrentFixtures.available, "mktorrent, python3-libtorrent and opentracker: make test")
        try super.setUpWithError()
    }

    private func magnet(_ torrent: String, name: String, seeder: TorrentSeeder) throws -> String {
        "magnet:?xt=urn:btih:\(try TorrentFixtures.infoHash(torrent))&dn=\(name)&x.pe=127.0.0.1:\(seeder.port)"
    }

    private func base64(_ path: String) throws -> String {
        try Data(contentsOf: URL(fileURLWithPath: path)).base64EncodedString()
    }

    private func staging() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: sandbox.file("downloads"))) ?? [])
            .filter { $0.hasPrefix(".haul-torrent-") }
    }

    func testAMagnetFetchesItsMetadataFromThePeerThenEveryFileExact() throws {
        let files = [("a.bin", 40 << 20), ("disc/b.bin", 24 << 20 - 5), ("disc/notes.txt", 5)]
        let fixture = try TorrentFixtures.make(in: sandbox, "album", files: files)
        let seeder = try TorrentSeeder(torrent: fixture.torrent, content: fixture.content, sandbox: sandbox)
        let id = try add(["url": try magnet(fixture.torrent, name: "album", seeder: seeder)])
        let resource = try waitForState(id, "completed", timeout: 120)
        XCTAssertEqual(resource["kind"] as? String, "torrent")
        XCTAssertEqual(resource["path"] as? String, "album")
        XCTAssertEqual(int(resource["total_bytes"]), Int64(64 << 20))
        XCTAssertEqual(resource["progress"] as? Double, 1)
        for (path, digest) in fixture.sha256 {
            XCTAssertEqual(try sha256(sandbox.file("downloads/" + path)), digest, path)
        }
        let torrent = try XCTUnwrap(resource["torrent"] as? [String: Any])
        XCTAssertEqual(torrent["info_hash"] as? String, try TorrentFixtures.infoHash(fixture.torrent))
        XCTAssertEqual(torrent["name"] as? String, "album")
        let shown = try XCTUnwrap(torrent["files"] as? [[String: Any]])
        XCTAssertEqual(Set(shown.compactMap { $0["path"] as? String }), Set(fixture.sha256.keys))
        for file in shown { XCTAssertEqual(int(file["done"]), int(file["size"]), "\(file)") }
        // Nothing of the staging folder is left, and each byte was fetched once.
        XCTAssertEqual(staging(), [])
        XCTAssertLessThan(seeder.uploaded(), Int64(64 << 20) + Int64(2 << 20))
    }

    func testATorrentFileAnnouncedToATrackerIsFetched() throws {
        let port = try Nginx.freePort()
        let fixture = try TorrentFixtures.make(
            in: sandbox, "one.iso", files: [("one.iso", 3 << 20)], tracker: Tracker.announce(port))
        let tracker = try Tracker(
            sandbox: sandbox, port: port, infoHashes: [try TorrentFixtures.infoHash(fixture.torrent)])
        _ = tracker
        let seeder = try TorrentSeeder(torrent: fixture.torrent, content: fixture.content, sandbox: sandbox)
        _ = seeder
        let id = try add(["torrent": try base64(fixture.torrent)])
        // The same torrent again while it runs is the same download.
        let again = try api.request("POST", "/downloads", json: ["torrent": try base64(fixture.torrent)])
        XCTAssertEqual(again.json["id"] as? String, id, again.text)
        let resource = try waitForState(id, "completed", timeout: 120)
        XCTAssertEqual(resource["path"] as? String, "one.iso")
        XCTAssertEqual(try sha256(sandbox.file("downloads/one.iso")), fixture.sha256["one.iso"])
        XCTAssertTrue((resource["url"] as? String ?? "").hasPrefix("magnet:?xt=urn:btih:"), "\(resource["url"]!)")
    }

    func testHostileTorrentsAreRefusedWithNothingWritten() throws {
        func torrent(_ paths: [[String]]) -> String {
            var info = "d5:filesl"
            // A file without a path is an empty dictionary: 200,000 of them fit the body limit.
            for path in paths {
                info +=
                    path.isEmpty ? "de" : "d6:lengthi1e4:pathl" + path.map { "\($0.utf8.count):\($0)" }.joined() + "ee"
            }
            info += "e4:name1:x12:piece lengthi16384e6:pieces20:" + String(repeating: "a", count: 20) + "e"
            return Data(("d4:info" + info + "e").utf8).base64EncodedString()
        }
        for (paths, why) in [
            ([["..", "..", "etc", "passwd"]], "leaves its folder"),
            ([["Readme"], ["README"]], "differ only by case"),
            (Array(repeating: [], count: 200_000), "200000 files"),
        ] {
            let reply = try api.request("POST", "/downloads", json: ["torrent": torrent(paths)])
            XCTAssertEqual(reply.status, 422, reply.text)
            XCTAssertTrue(reply.text.contains(why), reply.text)
        }
        let bad = try api.request("POST", "/downloads", json: ["url": "magnet:?xt=urn:btih:nothex&dn=x"])
        XCTAssertEqual(bad.status, 422, bad.text)
        XCTAssertEqual((try api.get("/downloads").json["downloads"] as? [Any])?.count, 0)
        XCTAssertEqual(
            (try? FileManager.default.contentsOfDirectory(atPath: sandbox.file("downloads"))) ?? [], [])
    }

    func testBitTorrentIsOffUnlessTheServerEnablesIt() throws {
        haul.stop(signal: SIGKILL)
        haul = try ServerProcess(
            executable: haulPath,
            arguments: [
                "serve", "--listen", "127.0.0.1:0", "--download-dir", sandbox.file("downloads"),
                "--data-dir", sandbox.file("data-off"), "--min-free-space", "16M",
            ], logPath: sandbox.file("haul-off.log"))
        api = Client(base: haul.baseURL)
        let reply = try api.request(
            "POST", "/downloads", json: ["url": "magnet:?xt=urn:btih:" + String(repeating: "a", count: 40)])
        XCTAssertEqual(reply.status, 422, reply.text)
        XCTAssertTrue(reply.text.contains("--bittorrent"), reply.text)
        let byKind = try api.request("POST", "/downloads", json: ["url": originURL("a.torrent"), "kind": "torrent"])
        XCTAssertEqual(byKind.status, 422, byKind.text)
        // Off, a .torrent URL is a file like any other.
        try Data("d4:infod4:name1:aee".utf8).write(to: URL(fileURLWithPath: sandbox.file("www/plain.torrent")))
        let plain = try add(["url": originURL("plain.torrent")])
        let resource = try waitForState(plain, "completed")
        XCTAssertEqual(resource["kind"] as? String, "file")
        XCTAssertEqual(
            try String(contentsOfFile: sandbox.file("downloads/plain.torrent"), encoding: .utf8), "d4:infod4:name1:aee")
    }

    func testATorrentByURLIsFetchedThroughTheServersOwnRequestsThenItsFiles() throws {
        let port = try Nginx.freePort()
        let fixture = try TorrentFixtures.make(
            in: sandbox, "film.mkv", files: [("film.mkv", 3 << 20)], tracker: Tracker.announce(port))
        let tracker = try Tracker(
            sandbox: sandbox, port: port, infoHashes: [try TorrentFixtures.infoHash(fixture.torrent)])
        let seeder = try TorrentSeeder(torrent: fixture.torrent, content: fixture.content, sandbox: sandbox)
        _ = (tracker, seeder)
        try FileManager.default.copyItem(atPath: fixture.torrent, toPath: sandbox.file("www/film.torrent"))
        // BitTorrent on: a URL whose path names a .torrent is a torrent.
        let id = try add(["url": originURL("film.torrent", "k=1")])
        let resource = try waitForState(id, "completed", timeout: 120)
        XCTAssertEqual(resource["kind"] as? String, "torrent")
        XCTAssertEqual(resource["path"] as? String, "film.mkv")
        XCTAssertEqual(try sha256(sandbox.file("downloads/film.mkv")), fixture.sha256["film.mkv"])
        // Fetched by the server's own request: the origin saw it.
        XCTAssertTrue(
            try originRequests().contains { ($0["path"] as? String)?.hasPrefix("/files/film.torrent") == true })
        // kind file fetches the .torrent itself; a .torrent the origin lacks fails as any file would.
        let file = try add(["url": originURL("film.torrent", "k=2"), "kind": "file", "filename": "copy.torrent"])
        try waitForState(file, "completed")
        XCTAssertEqual(try sha256(sandbox.file("downloads/copy.torrent")), try sha256(fixture.torrent))
        let missing = try add(["url": originURL("missing.torrent")])
        let failed = try waitForState(missing, "failed")
        XCTAssertEqual((failed["error"] as? [String: Any])?["code"] as? String, "http_404", "\(failed)")
        // Not a torrent at all: refused as a hostile one is, nothing left behind.
        try Data("<html>not found</html>".utf8).write(to: URL(fileURLWithPath: sandbox.file("www/page.torrent")))
        let page = try add(["url": originURL("page.torrent")])
        let refused = try waitForState(page, "failed")
        XCTAssertEqual((refused["error"] as? [String: Any])?["code"] as? String, "torrent_unsafe", "\(refused)")
    }

    func testKillMidDownloadResumesWithoutFetchingVerifiedPiecesAgain() throws {
        let size = 24 << 20
        let fixture = try TorrentFixtures.make(in: sandbox, "big.bin", files: [("big.bin", size)])
        let seeder = try TorrentSeeder(
            torrent: fixture.torrent, content: fixture.content, sandbox: sandbox, uploadLimit: 4 << 20)
        let id = try add(["url": try magnet(fixture.torrent, name: "big.bin", seeder: seeder)])
        try waitFor("a third fetched", timeout: 60) { int(try download(id)["received_bytes"]) >= Int64(size / 3) }
        XCTAssertEqual(haul.stop(signal: SIGKILL), SIGKILL)
        try startHaul()
        let resource = try waitForState(id, "completed", timeout: 120)
        XCTAssertEqual(try sha256(try downloadedPath(resource)), fixture.sha256["big.bin"])
        // Fetched again: at most the pieces in flight at the kill (a few of 256 KiB), never the third verified.
        let uploaded = seeder.uploaded()
        XCTAssertLessThan(uploaded, Int64(size) + Int64(3 << 20), "the seeder uploaded \(uploaded)")
    }

    func testPausedTorrentKeepsItsPiecesAndARemovalDeletesItsFiles() throws {
        let size = 8 << 20
        let fixture = try TorrentFixtures.make(in: sandbox, "pack", files: [("x.bin", size), ("y.bin", 1000)])
        let seeder = try TorrentSeeder(
            torrent: fixture.torrent, content: fixture.content, sandbox: sandbox, uploadLimit: 2 << 20)
        let id = try add(["url": try magnet(fixture.torrent, name: "pack", seeder: seeder)])
        try waitFor("a quarter fetched", timeout: 60) { int(try download(id)["received_bytes"]) >= Int64(size / 4) }
        XCTAssertEqual(try patch(id, ["state": "paused"]).status, 200)
        let paused = try waitForState(id, "paused")
        XCTAssertEqual(staging().count, 1)
        XCTAssertEqual(try patch(id, ["state": "queued"]).status, 200)
        let resource = try waitForState(id, "completed", timeout: 120)
        XCTAssertGreaterThanOrEqual(int(resource["received_bytes"]), int(paused["received_bytes"]))
        for (path, digest) in fixture.sha256 {
            XCTAssertEqual(try sha256(sandbox.file("downloads/" + path)), digest, path)
        }
        XCTAssertLessThan(seeder.uploaded(), Int64(size) + Int64(3 << 20))
        XCTAssertEqual(try api.request("DELETE", "/downloads/\(id)?delete_file=true").status, 204)
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.file("downloads/pack")))
    }

    func testRemovingARunningTorrentDeletesWhatItWrote() throws {
        let fixture = try TorrentFixtures.make(in: sandbox, "gone.bin", files: [("gone.bin", 12 << 20)])
        let seeder = try TorrentSeeder(
            torrent: fixture.torrent, content: fixture.content, sandbox: sandbox, uploadLimit: 2 << 20)
        let id = try add(["url": try magnet(fixture.torrent, name: "gone.bin", seeder: seeder)])
        try waitFor("some fetched", timeout: 60) { int(try download(id)["received_bytes"]) > 0 }
        XCTAssertEqual(try api.request("DELETE", "/downloads/\(id)").status, 204)
        try waitFor("the staging folder to go") { staging().isEmpty }
        XCTAssertEqual(
            (try? FileManager.default.contentsOfDirectory(atPath: sandbox.file("downloads"))) ?? [], [])
    }

    func testARootedTokensTorrentLandsUnderItsRootAndCountsAgainstItsQuota() throws {
        let admin = "torrent-admin-token-0123456789"
        haul.stop(signal: SIGKILL)
        try startHaul(extra: ["--token", admin])
        func call(_ method: String, _ path: String, _ token: String, _ json: Any? = nil) throws -> Client.Reply {
            try api.request(method, path, json: json, headers: ["Authorization": "Bearer " + token])
        }
        let small = try call(
            "POST", "/tokens", admin, ["name": "tenant", "scope": "add", "root": "tenant", "quota_bytes": 3_000_000])
        let secret = try XCTUnwrap(small.json["secret"] as? String, small.text)
        let fixture = try TorrentFixtures.make(
            in: sandbox, "fits.bin", files: [("fits.bin", 2_000_000)], pieceExponent: 16)
        let large = try TorrentFixtures.make(
            in: sandbox, "large.bin", files: [("large.bin", 4_000_000)], pieceExponent: 16)
        let seeder = try TorrentSeeder(torrent: fixture.torrent, content: fixture.content, sandbox: sandbox)
        let largeSeeder = try TorrentSeeder(torrent: large.torrent, content: large.content, sandbox: sandbox)
        let added = try call(
            "POST", "/downloads", secret, ["url": try magnet(fixture.torrent, name: "fits.bin", seeder: seeder)])
        XCTAssertEqual(added.status, 201, added.text)
        let id = try XCTUnwrap(added.json["id"] as? String)
        var resource: [String: Any] = [:]
        try waitFor("the tenant's torrent to complete", timeout: 60) {
            resource = try call("GET", "/downloads/\(id)", secret).json
            return resource["state"] as? String == "completed" || resource["state"] as? String == "failed"
        }
        XCTAssertEqual(resource["state"] as? String, "completed", "\(resource)")
        XCTAssertEqual(try sha256(sandbox.file("downloads/tenant/fits.bin")), fixture.sha256["fits.bin"])
        // 2 MB held of 3: a 4 MB torrent fails at its metadata, before a piece is written.
        let over = try call(
            "POST", "/downloads", secret, ["url": try magnet(large.torrent, name: "large.bin", seeder: largeSeeder)])
        XCTAssertEqual(over.status, 201, over.text)
        let overID = try XCTUnwrap(over.json["id"] as? String)
        try waitFor("the large torrent to fail", timeout: 60) {
            resource = try call("GET", "/downloads/\(overID)", secret).json
            return resource["state"] as? String == "failed" || resource["state"] as? String == "completed"
        }
        XCTAssertEqual(resource["state"] as? String, "failed")
        XCTAssertEqual((resource["error"] as? [String: Any])?["code"] as? String, "quota_exceeded", "\(resource)")
        XCTAssertEqual(largeSeeder.uploaded(), 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.file("downloads/tenant/large.bin")))
    }

    private func rpc(_ method: String, _ params: [Any]) throws -> [String: Any] {
        let reply = try api.request(
            "POST", "/jsonrpc", json: ["jsonrpc": "2.0", "id": "t", "method": method, "params": params])
        // aria2 answers an error with 400, and its JSON-RPC error object.
        XCTAssertEqual(reply.status, reply.json["error"] == nil ? 200 : 400, reply.text)
        return reply.json
    }

    func testTheAria2FrontAddsMagnetsAndTorrentFilesAndShowsThemAsBitTorrent() throws {
        let first = try TorrentFixtures.make(in: sandbox, "first", files: [("a.bin", 900_000), ("b.txt", 100)])
        let firstSeeder = try TorrentSeeder(torrent: first.torrent, content: first.content, sandbox: sandbox)
        let magnet = try magnet(first.torrent, name: "first", seeder: firstSeeder)
        let refused = try rpc("aria2.addUri", [[magnet, "http://127.0.0.1/mirror"]])
        XCTAssertNotNil(refused["error"], "a magnet link has no mirrors")
        let byURI = try XCTUnwrap(try rpc("aria2.addUri", [[magnet]])["result"] as? String)
        var status: [String: Any] = [:]
        func waitForEnd(_ gid: String) throws {
            try waitFor("\(gid) to end", timeout: 60) {
                status = try rpc("aria2.tellStatus", [gid])["result"] as? [String: Any] ?? [:]
                return status["status"] as? String == "complete" || status["status"] as? String == "error"
            }
            XCTAssertEqual(status["status"] as? String, "complete", "\(status)")
        }
        try waitForEnd(byURI)
        XCTAssertEqual(status["infoHash"] as? String, try TorrentFixtures.infoHash(first.torrent))
        let info = (status["bittorrent"] as? [String: Any])?["info"] as? [String: Any]
        XCTAssertEqual(info?["name"] as? String, "first")
        let files = try XCTUnwrap(status["files"] as? [[String: Any]])
        XCTAssertEqual(
            files.compactMap { ($0["path"] as? String).map { ($0 as NSString).lastPathComponent } }.sorted(),
            ["a.bin", "b.txt"])
        XCTAssertEqual(files.map { $0["completedLength"] as? String }, files.map { $0["length"] as? String })
        XCTAssertEqual(try sha256(sandbox.file("downloads/first/a.bin")), first.sha256["first/a.bin"])

        // A .torrent file (announced to a tracker) through addTorrent.
        let port = try Nginx.freePort()
        let second = try TorrentFixtures.make(
            in: sandbox, "second.bin", files: [("second.bin", 700_000)], tracker: Tracker.announce(port))
        let tracker = try Tracker(
            sandbox: sandbox, port: port, infoHashes: [try TorrentFixtures.infoHash(second.torrent)])
        let secondSeeder = try TorrentSeeder(torrent: second.torrent, content: second.content, sandbox: sandbox)
        let byFile = try XCTUnwrap(
            try rpc("aria2.addTorrent", [try base64(second.torrent), [], [:]])["result"] as? String)
        try waitForEnd(byFile)
        XCTAssertEqual(try sha256(sandbox.file("downloads/second.bin")), second.sha256["second.bin"])
        _ = (tracker, secondSeeder)
        let hostile = Data(
            ("d4:infod5:filesld6:lengthi1e4:pathl2:..1:xeee4:name1:x12:piece lengthi16384e6:pieces20:"
                + String(repeating: "a", count: 20) + "ee").utf8)
        let answer = try rpc("aria2.addTorrent", [hostile.base64EncodedString()])
        let message = (answer["error"] as? [String: Any])?["message"] as? String ?? ""
        XCTAssertTrue(message.contains("leaves its folder"), "\(answer)")
    }

    func testTheClientAddsATorrentFileAndShowsItsSwarm() throws {
        let port = try Nginx.freePort()
        let fixture = try TorrentFixtures.make(
            in: sandbox, "cli.bin", files: [("cli.bin", 500_000)], tracker: Tracker.announce(port))
        let hash = try TorrentFixtures.infoHash(fixture.torrent)
        let tracker = try Tracker(sandbox: sandbox, port: port, infoHashes: [hash])
        let seeder = try TorrentSeeder(torrent: fixture.torrent, content: fixture.content, sandbox: sandbox)
        _ = (tracker, seeder)
        let added = try haulCommand(["add", fixture.torrent, "--wait"])
        XCTAssertEqual(added.status, 0, added.output)
        let id = try XCTUnwrap(added.stdout.split(separator: "\n").first.map(String.init))
        XCTAssertEqual(try sha256(sandbox.file("downloads/cli.bin")), fixture.sha256["cli.bin"])
        let info = try haulCommand(["info", id])
        XCTAssertTrue(info.stdout.contains(hash), info.stdout)
        XCTAssertTrue(info.stdout.contains("cli.bin 488.3 KiB of 488.3 KiB"), info.stdout)
    }

    func testFileSelectionFetchesOnlyTheChosenFilesAndCountsOnlyThem() throws {
        let files = [("big.mkv", 3 << 20), ("extras/sample.mkv", 1 << 20), ("notes.txt", 300), ("cover.jpg", 50_000)]
        let fixture = try TorrentFixtures.make(in: sandbox, "show", files: files)
        let seeder = try TorrentSeeder(torrent: fixture.torrent, content: fixture.content, sandbox: sandbox)
        let id = try add(["url": try magnet(fixture.torrent, name: "show", seeder: seeder), "files": "*.txt, extras/*"])
        let resource = try waitForState(id, "completed", timeout: 60)
        XCTAssertEqual(resource["files"] as? String, "*.txt, extras/*")
        XCTAssertEqual(int(resource["total_bytes"]), Int64((1 << 20) + 300))
        for path in ["show/notes.txt", "show/extras/sample.mkv"] {
            XCTAssertEqual(try sha256(sandbox.file("downloads/" + path)), fixture.sha256[path], path)
        }
        for path in ["show/big.mkv", "show/cover.jpg"] {
            XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.file("downloads/" + path)), path)
        }
        let shown = try XCTUnwrap((resource["torrent"] as? [String: Any])?["files"] as? [[String: Any]])
        XCTAssertEqual(shown.map { $0["index"] as? Int }, [1, 2, 3, 4])
        XCTAssertEqual(
            Set(shown.filter { $0["wanted"] as? Bool == true }.compactMap { $0["path"] as? String }),
            ["show/notes.txt", "show/extras/sample.mkv"])
        // The pieces shared with the files left out aside (at most one on each side of each chosen file).
        XCTAssertLessThan(seeder.uploaded(), Int64((1 << 20) + 300 + 4 * (256 << 10)))
        // A selection naming no file fails before a piece is fetched.
        let none = try add([
            "url": try magnet(fixture.torrent, name: "show", seeder: seeder), "files": "99", "directory": "again",
        ])
        let failed = try waitForState(none, "failed", timeout: 60)
        XCTAssertEqual((failed["error"] as? [String: Any])?["code"] as? String, "torrent_failed", "\(failed)")
    }

    func testAnUnfinishedTorrentsFileIsReadItsAskedPiecesFirst() throws {
        let size = 16 << 20
        let fixture = try TorrentFixtures.make(in: sandbox, "clip.mkv", files: [("clip.mkv", size)])
        // 2 MiB/s: the whole takes 8 s, the part asked for far less.
        let seeder = try TorrentSeeder(
            torrent: fixture.torrent, content: fixture.content, sandbox: sandbox, uploadLimit: 2 << 20)
        let id = try add(["url": try magnet(fixture.torrent, name: "clip.mkv", seeder: seeder)])
        try waitForState(id, "downloading", timeout: 60)
        let offset = 12 << 20
        let part = try api.request(
            "GET", "/downloads/\(id)/file", headers: ["Range": "bytes=\(offset)-\(offset + (1 << 20) - 1)"])
        let received = int(try download(id)["received_bytes"])
        XCTAssertEqual(part.status, 206, part.text)
        XCTAssertEqual(part.header("Content-Type"), "video/x-matroska")
        let source = try Data(contentsOf: URL(fileURLWithPath: fixture.content + "/clip.mkv"))
        XCTAssertEqual(part.body, source.subdata(in: offset..<(offset + (1 << 20))))
        // Its pieces came first: the read was answered before the torrent had every byte.
        XCTAssertLessThan(received, Int64(size), "the read waited for the whole torrent")
        try waitForState(id, "completed", timeout: 120)
        XCTAssertEqual(try sha256(sandbox.file("downloads/clip.mkv")), fixture.sha256["clip.mkv"])

        // Several files fetched: which one is not said, so none is read before they are complete.
        let album = try TorrentFixtures.make(in: sandbox, "pair", files: [("a.bin", 1 << 20), ("b.bin", 1 << 20)])
        let other = try TorrentSeeder(
            torrent: album.torrent, content: album.content, sandbox: sandbox, uploadLimit: 256 << 10)
        let pair = try add(["url": try magnet(album.torrent, name: "pair", seeder: other)])
        try waitForState(pair, "downloading", timeout: 60)
        let refused = try api.get("/downloads/\(pair)/file")
        XCTAssertEqual(refused.status, 409, refused.text)
        XCTAssertTrue(refused.text.contains("fetches one file"), refused.text)
    }
}
