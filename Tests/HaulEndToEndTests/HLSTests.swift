import Foundation
import XCTest

/// HLS playlists downloaded into one file, against ffmpeg's own fixtures served by nginx on loopback: the bytes
/// joined in order, decoding to the same frames ffmpeg decodes from the playlist itself.
final class HLSTests: HaulTestCase {
    private var fixtures = ""
    private var nginx: Nginx!

    override func setUpWithError() throws {
        try XCTSkipUnless(Nginx.available && HLSFixtures.available, "nginx and ffmpeg are installed by make test")
        try super.setUpWithError()
        fixtures = try HLSFixtures.directory()
        nginx = try Nginx(
            root: fixtures, prefix: sandbox.file("nginx"),
            serverConfig: keysNeedRefererAndCookie.replacingOccurrences(of: "ROOT", with: fixtures))
    }

    override func tearDownWithError() throws {
        nginx = nil
        try super.tearDownWithError()
    }

    /// The rotating keys are served only to a request with the player's Referer and session cookie.
    private let keysNeedRefererAndCookie = """
        location /rotate/keys/ {
            if ($http_referer != "http://player.test/") { return 403; }
            if ($cookie_session != "s3") { return 403; }
        }
        location = /ts/watch {
            default_type application/vnd.apple.mpegurl;
            alias ROOT/ts/index.m3u8;
        }
        location /slow/ { limit_rate 40k; alias ROOT/ts/; }
        """

    private func segments(_ count: Int = 10, ext: String = "ts") -> [String] {
        (0..<count).map { String(format: "seg%03d.\(ext)", $0) }
    }

    private func completed(_ body: [String: Any]) throws -> (resource: [String: Any], path: String) {
        let id = try add(body)
        let resource = try waitForState(id, "completed")
        return (resource, try downloadedPath(resource))
    }

    func testTSSegmentsAreJoinedIntoOneFileThatDecodesToThePlaylistsFrames() throws {
        let (resource, path) = try completed(["url": nginx.baseURL + "/ts/index.m3u8", "connections": 4])
        XCTAssertEqual(resource["kind"] as? String, "hls")
        XCTAssertEqual((path as NSString).lastPathComponent, "index.ts")
        let expected = try HLSFixtures.concatenated(fixtures + "/ts", segments())
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), expected)
        XCTAssertEqual(try HLSFixtures.frames(path), try HLSFixtures.frames(fixtures + "/ts/index.m3u8"))
        let hls = try XCTUnwrap(resource["hls"] as? [String: Any])
        XCTAssertEqual(hls["segments_done"] as? Int, 10)
        XCTAssertEqual(hls["segments_total"] as? Int, 10)
        XCTAssertEqual(hls["container"] as? String, "ts")
        XCTAssertEqual(hls["encrypted"] as? Bool, false)
        XCTAssertEqual(resource["content_type"] as? String, "video/mp2t")
        XCTAssertEqual(int(resource["total_bytes"]), Int64(expected.count))
        XCTAssertEqual(resource["progress"] as? Double, 1)
        // Each segment fetched once, and the playlist once.
        let paths = nginx.paths()
        XCTAssertEqual(paths.filter { $0 == "/ts/index.m3u8" }.count, 1, "\(paths)")
        for name in segments() { XCTAssertEqual(paths.filter { $0 == "/ts/" + name }.count, 1, name) }
    }

    func testAPlaylistsContentTypeMakesItAnHLSDownloadWithoutTheExtension() throws {
        let (resource, path) = try completed(["url": nginx.baseURL + "/ts/watch"])
        XCTAssertEqual(resource["kind"] as? String, "hls")
        XCTAssertEqual(
            try Data(contentsOf: URL(fileURLWithPath: path)),
            try HLSFixtures.concatenated(fixtures + "/ts", segments()))
    }

    func testAPlaylistsFirstBytesMakeItAnHLSDownloadWhateverItsNameAndType() throws {
        // TestOrigin serves it as bytes of no particular type, under a name without .m3u8.
        var text = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n"
        for name in segments() { text += "#EXTINF:2.0,\n\(nginx.baseURL)/ts/\(name)\n" }
        try (text + "#EXT-X-ENDLIST\n").write(toFile: sandbox.file("www/stream"), atomically: true, encoding: .utf8)
        let (resource, path) = try completed(["url": originURL("stream")])
        XCTAssertEqual(resource["kind"] as? String, "hls")
        XCTAssertEqual(
            try Data(contentsOf: URL(fileURLWithPath: path)),
            try HLSFixtures.concatenated(fixtures + "/ts", segments()))
        // A file that only looks like text stays a file.
        try "#EXTM3 not quite\n".write(toFile: sandbox.file("www/notes"), atomically: true, encoding: .utf8)
        let plain = try completed(["url": originURL("notes")])
        XCTAssertEqual(plain.resource["kind"] as? String, "file")
        XCTAssertEqual(try String(contentsOfFile: plain.path, encoding: .utf8), "#EXTM3 not quite\n")
    }

    func testAES128SegmentsAreDecryptedWithTheKeyFFmpegWrote() throws {
        let (resource, path) = try completed(["url": nginx.baseURL + "/aes/index.m3u8"])
        XCTAssertEqual(try HLSFixtures.frames(path), try HLSFixtures.frames(fixtures + "/aes/index.m3u8"))
        XCTAssertEqual((resource["hls"] as? [String: Any])?["encrypted"] as? Bool, true)
    }

    func testKeysRotateMidPlaylistAndAreFetchedWithTheDownloadsRefererAndCookie() throws {
        let url = nginx.baseURL + "/rotate/index.m3u8"
        let (resource, path) = try completed([
            "url": url, "referer": "http://player.test/", "cookies": "session=s3", "connections": 3,
        ])
        // Decrypted under key A with its IV, then key B with the sequence number's: the plain segments, in order.
        XCTAssertEqual(
            try Data(contentsOf: URL(fileURLWithPath: path)),
            try HLSFixtures.concatenated(fixtures + "/ts", segments()))
        // The keys are never shown or logged.
        let log = try String(contentsOfFile: sandbox.file("haul.log"), encoding: .utf8)
        let shown = try api.get("/downloads/\(resource["id"] as! String)")
        for key in [String(repeating: "1f", count: 16), String(repeating: "a5", count: 16)] {
            XCTAssertFalse(log.contains(key))
            XCTAssertFalse(String(decoding: shown.body, as: UTF8.self).contains(key))
        }
        // Without them, the key's server refuses, and the download says which request failed.
        let refused = try add(["url": url, "filename": "no-referer.ts"])
        let failed = try waitForState(refused, "failed")
        let error = try XCTUnwrap(failed["error"] as? [String: Any])
        XCTAssertEqual(error["code"] as? String, "http_403")
        XCTAssertTrue((error["message"] as? String ?? "").contains("key"), "\(error)")
    }

    func testFMP4InitSectionThenSegmentsMakeOneMP4() throws {
        let (resource, path) = try completed(["url": nginx.baseURL + "/fmp4/index.m3u8"])
        XCTAssertTrue(path.hasSuffix("/index.mp4"), path)
        XCTAssertEqual((resource["hls"] as? [String: Any])?["container"] as? String, "mp4")
        XCTAssertEqual(
            try Data(contentsOf: URL(fileURLWithPath: path)),
            try HLSFixtures.concatenated(fixtures + "/fmp4", ["init.mp4"] + segments(ext: "m4s")))
        XCTAssertEqual(try HLSFixtures.frames(path), try HLSFixtures.frames(fixtures + "/fmp4/index.m3u8"))
    }

    func testByteRangesOfOneFileAreFetchedAsRangesAndTheSizeIsKnownExactly() throws {
        let (resource, path) = try completed(["url": nginx.baseURL + "/single/index.m3u8", "connections": 3])
        let whole = try Data(contentsOf: URL(fileURLWithPath: fixtures + "/single/index.ts"))
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), whole)
        let hls = try XCTUnwrap(resource["hls"] as? [String: Any])
        XCTAssertEqual(hls["size_estimated"] as? Bool, false)
        XCTAssertEqual(int(hls["size"]), Int64(whole.count))
        let ranged = nginx.requests().filter { $0.status == 206 }
        XCTAssertEqual(ranged.count, hls["segments_total"] as? Int, "one range request per segment")
    }

    func testAMasterPlaylistsVariantIsChosenByBandwidthHeightOrName() throws {
        let master = nginx.baseURL + "/master/master.m3u8"
        let best = try completed(["url": master, "filename": "best.ts"])
        let variant = try XCTUnwrap((best.resource["hls"] as? [String: Any])?["variant"] as? [String: Any])
        XCTAssertEqual(variant["height"] as? Int, 360)
        XCTAssertEqual((best.resource["hls"] as? [String: Any])?["variants"] as? Int, 3)
        XCTAssertEqual(try HLSFixtures.frames(best.path), try HLSFixtures.frames(fixtures + "/master/v0/index.m3u8"))

        let small = try completed(["url": master, "filename": "small.ts", "variant": "240"])
        XCTAssertEqual(try HLSFixtures.frames(small.path), try HLSFixtures.frames(fixtures + "/master/v1/index.m3u8"))
        let worst = try completed(["url": master, "filename": "worst.ts", "variant": "worst"])
        XCTAssertEqual(try HLSFixtures.frames(worst.path), try HLSFixtures.frames(fixtures + "/master/v2/index.m3u8"))

        // The CLI takes the same choice.
        let cli = try haulCommand(["add", master, "--variant", "500k", "--filename", "cli.ts", "--wait"])
        XCTAssertEqual(cli.status, 0, cli.output)
        XCTAssertEqual(
            try HLSFixtures.frames(sandbox.file("downloads/cli.ts")),
            try HLSFixtures.frames(fixtures + "/master/v1/index.m3u8"))

        let missing = try add(["url": master, "filename": "none.ts", "variant": "director's cut"])
        let failed = try waitForState(missing, "failed")
        XCTAssertEqual((failed["error"] as? [String: Any])?["code"] as? String, "variant_not_found")
    }

    func testAKilledServerResumesFetchingOnlyTheSegmentsNotOnDisk() throws {
        let id = try add(["url": nginx.baseURL + "/slow/index.m3u8", "connections": 2])
        try waitFor("half the segments", timeout: 60) {
            ((try download(id)["hls"] as? [String: Any])?["segments_done"] as? Int ?? 0) >= 5
        }
        // A checkpoint (each tick) journals what is on disk.
        Thread.sleep(forTimeInterval: 1.5)
        haul.stop(signal: SIGKILL)
        let before = nginx.paths().filter { $0.hasPrefix("/slow/seg") }
        try startHaul()
        let resource = try waitForState(id, "completed")
        XCTAssertEqual(
            try Data(contentsOf: URL(fileURLWithPath: try downloadedPath(resource))),
            try HLSFixtures.concatenated(fixtures + "/ts", segments()))
        let after = Array(nginx.paths().filter { $0.hasPrefix("/slow/seg") }.dropFirst(before.count))
        // The first segments were on disk and journaled: never asked for again.
        for name in segments(3) { XCTAssertFalse(after.contains("/slow/" + name), "\(name) again: \(after)") }
        XCTAssertTrue(after.contains("/slow/seg009.ts"), "\(after)")
        XCTAssertLessThan(after.count, 10, "only what was missing: \(after)")
    }

    func testAPlaylistChangedWhilePausedRestartsInsteadOfSplicing() throws {
        // A playlist of the fixture's segments, served slowly from the sandbox, which the test rewrites.
        let live = sandbox.file("www/changing")
        try FileManager.default.createDirectory(atPath: live, withIntermediateDirectories: true)
        chmod(live, 0o755)
        for name in segments() {
            try FileManager.default.createSymbolicLink(
                atPath: live + "/" + name, withDestinationPath: fixtures + "/ts/" + name)
        }
        func write(_ order: [String]) throws {
            var text = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n"
            for name in order { text += "#EXTINF:2.0,\n\(name)\n" }
            try (text + "#EXT-X-ENDLIST\n").write(toFile: live + "/index.m3u8", atomically: true, encoding: .utf8)
            chmod(live + "/index.m3u8", 0o644)
        }
        try write(segments())
        let server = try Nginx(
            root: sandbox.file("www"), prefix: sandbox.file("nginx2"), serverConfig: "limit_rate 40k;")
        let id = try add(["url": server.baseURL + "/changing/index.m3u8", "connections": 1])
        try waitFor("a few segments", timeout: 60) {
            ((try download(id)["hls"] as? [String: Any])?["segments_done"] as? Int ?? 0) >= 2
        }
        XCTAssertEqual(try patch(id, ["state": "paused"]).status, 200)
        _ = try waitForState(id, "paused")
        let reversed = Array(segments().reversed())
        try write(reversed)
        XCTAssertEqual(try patch(id, ["state": "queued"]).status, 200)
        let resource = try waitForState(id, "completed", timeout: 90)
        XCTAssertEqual(
            try Data(contentsOf: URL(fileURLWithPath: try downloadedPath(resource))),
            try HLSFixtures.concatenated(fixtures + "/ts", reversed))
    }

    func testHostilePlaylistsAreRefusedByName() throws {
        let www = sandbox.file("www")
        func serve(_ name: String, _ text: String) throws -> String {
            try text.write(toFile: "\(www)/\(name)", atomically: true, encoding: .utf8)
            return originURL(name)
        }
        let segment = "#EXTINF:2.0,\n\(nginx.baseURL)/ts/seg000.ts\n"
        let cases: [(String, String, String)] = [
            ("live.m3u8", "#EXTM3U\n#EXT-X-TARGETDURATION:2\n" + segment, "playlist_live"),
            (
                "nested.m3u8", "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1000\n\(originURL("nested.m3u8"))\n",
                "playlist_invalid"
            ),
            ("file.m3u8", "#EXTM3U\n#EXTINF:2.0,\nfile:///etc/passwd\n#EXT-X-ENDLIST\n", "playlist_invalid"),
            ("data.m3u8", "#EXTM3U\n#EXTINF:2.0,\ndata:video/mp2t;base64,AAAA\n#EXT-X-ENDLIST\n", "playlist_invalid"),
            (
                "sample.m3u8",
                "#EXTM3U\n#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"k\"\n" + segment + "#EXT-X-ENDLIST\n",
                "playlist_unsupported"
            ),
            (
                "drm.m3u8",
                "#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\",KEYFORMAT=\"com.apple.streamingkeydelivery\"\n"
                    + segment + "#EXT-X-ENDLIST\n", "playlist_unsupported"
            ),
            ("not.m3u8", "<html>not a playlist</html>", "playlist_invalid"),
            (
                "many.m3u8", "#EXTM3U\n" + String(repeating: segment, count: 100_001) + "#EXT-X-ENDLIST\n",
                "playlist_invalid"
            ),
            (
                "huge.m3u8",
                "#EXTM3U\n" + String(repeating: "#" + String(repeating: "x", count: 1023) + "\n", count: 17 * 1024),
                "playlist_invalid"
            ),
        ]
        for (name, text, code) in cases {
            let id = try add(["url": try serve(name, text)])
            let failed = try waitForState(id, "failed")
            let error = try XCTUnwrap(failed["error"] as? [String: Any], name)
            XCTAssertEqual(error["code"] as? String, code, "\(name): \(error)")
            XCTAssertFalse((error["message"] as? String ?? "").isEmpty, name)
        }
        // Nothing but part files was left behind, and nothing outside the download folder.
        let left = try FileManager.default.contentsOfDirectory(atPath: sandbox.file("downloads"))
        XCTAssertTrue(left.allSatisfy { !$0.hasSuffix(".ts") || $0.hasSuffix(".part") }, "\(left)")
        XCTAssertEqual(
            nginx.paths().filter { $0 == "/ts/seg000.ts" }.count, 0, "no refused playlist's segment was fetched")
    }

    func testAria2sAddUriTakesAPlaylistAndTellStatusShowsItsFile() throws {
        let reply = try api.request(
            "POST", "/jsonrpc",
            json: [
                "jsonrpc": "2.0", "id": "1", "method": "aria2.addUri",
                "params": [[nginx.baseURL + "/ts/index.m3u8"], ["out": "aria.ts", "split": "4"]],
            ])
        let gid = try XCTUnwrap(reply.json["result"] as? String, "\(reply.json)")
        try waitFor("the playlist to complete", timeout: 60) {
            let status = try api.request(
                "POST", "/jsonrpc",
                json: ["jsonrpc": "2.0", "id": "2", "method": "aria2.tellStatus", "params": [gid, ["status"]]])
            return (status.json["result"] as? [String: Any])?["status"] as? String == "complete"
        }
        XCTAssertEqual(
            try Data(contentsOf: URL(fileURLWithPath: sandbox.file("downloads/aria.ts"))),
            try HLSFixtures.concatenated(fixtures + "/ts", segments()))
    }

    func testTheOperatorsRemuxMakesAnotherContainerBeforeTheDownloadCompletes() throws {
        func restart(remux: String) throws {
            try "hls-remux = \(remux)\n".write(toFile: sandbox.file("haul.toml"), atomically: true, encoding: .utf8)
            haul.stop(signal: SIGKILL)
            try startHaul(extra: ["--config", sandbox.file("haul.toml")])
        }
        try restart(
            remux:
                #"["/usr/bin/ffmpeg", "-hide_banner", "-loglevel", "error", "-i", "{input}", "-map", "0", "-c", "copy", "{output.mkv}"]"#
        )
        let (resource, path) = try completed(["url": nginx.baseURL + "/ts/index.m3u8"])
        XCTAssertTrue(path.hasSuffix("/index.mkv"), path)
        XCTAssertEqual(resource["content_type"] as? String, "video/x-matroska")
        let size = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber).int64Value
        XCTAssertEqual(int(resource["total_bytes"]), size)
        XCTAssertEqual(int(resource["received_bytes"]), size)
        let video = { (input: String) in try HLSFixtures.frames(input).filter { $0.hasPrefix("0:") } }
        XCTAssertEqual(try video(path), try video(fixtures + "/ts/index.m3u8"))
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: sandbox.file("downloads")), ["index.mkv"],
            "the joined file and the remux's temporary are gone")
        // A remux that fails leaves the joined file, named as it would have been.
        try restart(remux: #"["/bin/false", "{input}", "{output.mp4}"]"#)
        let kept = try completed(["url": nginx.baseURL + "/ts/index.m3u8", "filename": "kept.ts"])
        XCTAssertEqual(
            try Data(contentsOf: URL(fileURLWithPath: kept.path)),
            try HLSFixtures.concatenated(fixtures + "/ts", segments()))
        XCTAssertEqual(kept.resource["content_type"] as? String, "video/mp2t")
        // A command without its placeholders is refused at start.
        try "hls-remux = [\"/usr/bin/ffmpeg\", \"-i\", \"x\"]\n".write(
            toFile: sandbox.file("bad.toml"), atomically: true, encoding: .utf8)
        let refused = try haulCommand(["serve", "--config", sandbox.file("bad.toml"), "--check"])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.output.contains("{input}"), refused.output)
    }

    func testOneConnectionPerHostStillFetchesEveryKindOfPlaylist() throws {
        haul.stop(signal: SIGKILL)
        try startHaul(extra: ["--max-connections-per-host", "1"])
        // Found by its type (the first request's connection handed over), a master's variant, and keys: each
        // request waits for the host's one connection.
        let found = try completed(["url": nginx.baseURL + "/ts/watch", "connections": 4])
        XCTAssertEqual(
            try Data(contentsOf: URL(fileURLWithPath: found.path)),
            try HLSFixtures.concatenated(fixtures + "/ts", segments()))
        _ = try completed(["url": nginx.baseURL + "/master/master.m3u8", "connections": 4])
        _ = try completed([
            "url": nginx.baseURL + "/rotate/index.m3u8", "referer": "http://player.test/", "cookies": "session=s3",
            "connections": 4,
        ])
    }

    func testTheAddressGuardHoldsForPlaylistsSegmentsAndKeys() throws {
        haul.stop(signal: SIGKILL)
        try startHaul(extra: ["--deny-private-networks"])
        let id = try add(["url": nginx.baseURL + "/ts/index.m3u8"])
        let failed = try waitForState(id, "failed")
        XCTAssertEqual((failed["error"] as? [String: Any])?["code"] as? String, "blocked_address")
        XCTAssertTrue(nginx.paths().isEmpty, "nothing reached the origin: \(nginx.paths())")
    }

    func testSegmentsArePlayedWhileTheyArrive() throws {
        let id = try add(["url": nginx.baseURL + "/slow/index.m3u8", "connections": 2, "filename": "played.ts"])
        try waitFor("two segments", timeout: 60) {
            ((try download(id)["hls"] as? [String: Any])?["segments_done"] as? Int ?? 0) >= 2
        }
        let first = try api.request("GET", "/downloads/\(id)/file", headers: ["Range": "bytes=0-1023"])
        XCTAssertEqual(first.status, 206)
        let expected = try HLSFixtures.concatenated(fixtures + "/ts", segments())
        XCTAssertEqual(first.body, expected.prefix(1024))
        _ = try waitForState(id, "completed")
    }
}
