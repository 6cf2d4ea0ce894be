import Foundation
import XCTest

/// One file from several origins on loopback: every mirror probed, the ones that disagree dropped with the reason,
/// segments spread over the others (the fastest taking most), and a mirror that dies mid-way dropped while the rest
/// finish the file.
final class MirrorTests: HaulTestCase {
    override var serveArguments: [String] {
        ["--retry-wait", "0.1", "--max-attempts", "4", "--min-split-size", "256K"]
    }

    private var extra: [ServerProcess] = []

    override func tearDownWithError() throws {
        for origin in extra { origin.stop(signal: SIGKILL) }
        extra.removeAll()
        try super.tearDownWithError()
    }

    private func startOrigin(root: String) throws -> ServerProcess {
        let origin = try ServerProcess(
            executable: buildDirectory + "/TestOrigin", arguments: ["--root", root],
            logPath: sandbox.file("origin-\(extra.count + 1).log"))
        extra.append(origin)
        return origin
    }

    private func mirrors(_ download: [String: Any]) -> [[String: Any]] { download["mirrors"] as? [[String: Any]] ?? [] }

    func testSegmentsSpreadOverMirrorsAndADyingOneIsDroppedWhileTheOthersFinish() throws {
        let hash = try sandbox.makeRandomFile("www/big.iso", size: 6 << 20)
        let fast = try startOrigin(root: sandbox.file("www"))
        let dying = try startOrigin(root: sandbox.file("www"))
        let id = try add([
            "url": originURL("big.iso") + "?rate=300000",
            "mirrors": [fast.baseURL + "/files/big.iso?rate=1500000", dying.baseURL + "/files/big.iso?rate=300000"],
            "connections": 8,
        ])
        try waitFor("every mirror to be fetched from") {
            mirrors(try download(id)).allSatisfy { int($0["received_bytes"]) > 0 }
        }
        let running = try download(id)
        XCTAssertEqual(mirrors(running).map { $0["state"] as? String }, ["active", "active"])
        XCTAssertEqual(running["state"] as? String, "downloading")
        // The dying one goes away mid-way: its connections are refused from now on.
        XCTAssertEqual(dying.stop(signal: SIGKILL), SIGKILL)
        let done = try waitForState(id, "completed", timeout: 90)
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        let sources = mirrors(done)
        XCTAssertEqual(sources.first?["state"] as? String, "active")
        XCTAssertEqual(sources.last?["state"] as? String, "dropped")
        XCTAssertFalse((sources.last?["reason"] as? String ?? "").isEmpty, "\(sources)")
        XCTAssertGreaterThanOrEqual(int(sources.last?["errors"]), 1)
        // The fastest source wrote the most; what every source wrote adds up to the file at least once.
        let fastBytes = int(sources.first?["received_bytes"])
        let dyingBytes = int(sources.last?["received_bytes"])
        XCTAssertGreaterThan(fastBytes, dyingBytes, "\(sources)")
        XCTAssertGreaterThan(fastBytes, Int64(6 << 20) / 3, "the fastest of three took the largest share: \(sources)")
    }

    /// Writes a copy of `source` with every thousandth byte from `from` on flipped: a file of the same size with
    /// other bytes.
    private func corruptCopy(of source: String, to target: String, from: Int) throws {
        var data = try Data(contentsOf: URL(fileURLWithPath: source))
        for index in stride(from: from, to: data.count, by: 1000) { data[index] ^= 0xFF }
        try FileManager.default.createDirectory(
            atPath: (target as NSString).deletingLastPathComponent,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o755])
        try data.write(to: URL(fileURLWithPath: target))
        chmod(target, 0o644)
    }

    func testAMirrorOfTheSameSizeWithOtherBytesIsDroppedBeforeItsSegmentsCount() throws {
        let hash = try sandbox.makeRandomFile("www/same.iso", size: 2 << 20)
        try corruptCopy(of: sandbox.file("www/same.iso"), to: sandbox.file("other/same.iso"), from: 5000)
        let impostor = try startOrigin(root: sandbox.file("other"))
        let id = try add([
            "url": originURL("same.iso") + "?rate=2000000",
            "mirrors": [impostor.baseURL + "/files/same.iso"], "connections": 4,
        ])
        let done = try waitForState(id, "completed", timeout: 60)
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash, "no byte of the impostor")
        let source = try XCTUnwrap(mirrors(done).first)
        XCTAssertEqual(source["state"] as? String, "dropped")
        XCTAssertTrue((source["reason"] as? String ?? "").contains("differ from those of"), "\(source)")
        XCTAssertEqual(int(source["received_bytes"]), 0)
    }

    func testWithAChecksumAMirrorWrongFurtherOnIsFetchedAgainFromTheFirstSource() throws {
        let hash = try sandbox.makeRandomFile("www/late.iso", size: 3 << 20)
        // The same first 64 KiB, other bytes after: the comparison passes, the checksum does not.
        try corruptCopy(of: sandbox.file("www/late.iso"), to: sandbox.file("other/late.iso"), from: 1 << 20)
        let impostor = try startOrigin(root: sandbox.file("other"))
        let id = try add([
            "url": originURL("late.iso") + "?rate=400000",
            "mirrors": [impostor.baseURL + "/files/late.iso"], "connections": 4,
            "checksum": "sha256:" + hash,
        ])
        let done = try waitForState(id, "completed", timeout: 90)
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        let source = try XCTUnwrap(mirrors(done).first)
        XCTAssertEqual(source["state"] as? String, "dropped")
        XCTAssertTrue((source["reason"] as? String ?? "").contains("check"), "\(source)")
        XCTAssertGreaterThan(int(source["received_bytes"]), 0, "the mirror had written some of it")
        XCTAssertTrue(done["error"] is NSNull)
    }

    func testAMirrorOfAnotherSizeIsDroppedAtItsProbeWithTheReason() throws {
        let hash = try sandbox.makeRandomFile("www/same.bin", size: 2 << 20)
        try FileManager.default.createDirectory(atPath: sandbox.file("other"), withIntermediateDirectories: true)
        chmod(sandbox.file("other"), 0o755)
        _ = try sandbox.makeRandomFile("other/same.bin", size: (2 << 20) + 1)
        let wrong = try startOrigin(root: sandbox.file("other"))
        let right = try startOrigin(root: sandbox.file("www"))
        // The first source is paced so that both mirrors' probes answer while the file is still coming.
        let first = originURL("same.bin") + "?rate=1000000"
        let id = try add([
            "urls": [
                first, wrong.baseURL + "/files/same.bin",
                right.baseURL + "/files/same.bin",
            ], "connections": 4,
        ])
        let done = try waitForState(id, "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        let sources = mirrors(done)
        XCTAssertEqual(sources.map { $0["state"] as? String }, ["dropped", "active"])
        XCTAssertTrue((sources[0]["reason"] as? String ?? "").contains("size 2097153 differs"), "\(sources)")
        XCTAssertEqual(int(sources[0]["received_bytes"]), 0)
        XCTAssertEqual(done["url"] as? String, first)
    }

    func testAMirrorThatAnnouncesAnotherDigestIsDroppedBeforeAByteComesFromIt() throws {
        let size = 1 << 20
        let hash = try sandbox.makeRandomFile("www/d.bin", size: size)
        let wrong = Data(repeating: 7, count: 32).base64EncodedString()
        let liar = try HostileOrigin { _ in
            .send(
                HostileOrigin.reply(headers: [
                    "Content-Length: \(size)", "Accept-Ranges: bytes",
                    "Repr-Digest: sha-256=:\(wrong):", "Connection: close",
                ]))
        }
        defer { liar.stop() }
        let done = try waitForState(
            try add([
                "url": originURL("d.bin"), "mirrors": [liar.baseURL + "/d.bin"],
                "checksum": "sha256:" + hash,
            ]), "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        let source = try XCTUnwrap(mirrors(done).first)
        XCTAssertEqual(source["state"] as? String, "dropped")
        XCTAssertTrue((source["reason"] as? String ?? "").contains("is not the checksum asked for"), "\(source)")
        XCTAssertEqual(liar.requests.map(\.method), ["HEAD"])
    }

    func testMirrorsAreCheckedAsURLs() throws {
        let both = try api.request("POST", "/downloads", json: ["urls": [originURL("x")], "url": originURL("x")])
        XCTAssertEqual(both.status, 422, both.text)
        let bad = try api.request(
            "POST", "/downloads",
            json: [
                "url": originURL("x"),
                "mirrors": ["gopher://m/x", originURL("x")],
            ])
        XCTAssertEqual(bad.status, 422)
        let fields = Set((bad.json["errors"] as? [[String: Any]] ?? []).compactMap { $0["field"] as? String })
        XCTAssertEqual(fields, ["mirrors[0]"])
        let plain = try download(try add(["url": originURL("x"), "start_paused": true]))
        XCTAssertEqual(mirrors(plain).count, 0)
        // A source named twice is one source.
        let twice = try download(
            try add([
                "url": originURL("y"), "start_paused": true,
                "mirrors": [originURL("y"), originURL("z"), originURL("z")],
            ]))
        XCTAssertEqual(mirrors(twice).compactMap { $0["url"] as? String }, [originURL("z")])
        XCTAssertEqual(mirrors(twice).first?["state"] as? String, "pending")
    }
}
