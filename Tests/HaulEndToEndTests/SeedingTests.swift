import Foundation
import XCTest

/// A torrent whose files are complete seeds, in the `seeding` state, until its ratio or time limit is met: a
/// second python3-libtorrent session on loopback leeches from Haul alone (the first seeder gone), so what Haul
/// uploaded is what the leecher received. The server runs one download at a time: a seeding torrent holds no slot.
final class SeedingTests: HaulTestCase {
    /// Haul's BitTorrent port, fixed for the test (the leecher connects to it, across a restart).
    private lazy var torrentPort: Int = (try? Nginx.freePort()).map(Int.init) ?? 0

    override var serveArguments: [String] {
        super.serveArguments + [
            "--bittorrent", "--bittorrent-listen", "127.0.0.1:\(torrentPort)", "--max-active", "1",
        ]
    }

    override func setUpWithError() throws {
        try XCTSkipUnless(TorrentFixtures.available, "mktorrent, python3-libtorrent and opentracker: make test")
        try super.setUpWithError()
    }

    private func magnet(_ torrent: String, name: String, seeder: TorrentSeeder) throws -> String {
        "magnet:?xt=urn:btih:\(try TorrentFixtures.infoHash(torrent))&dn=\(name)&x.pe=127.0.0.1:\(seeder.port)"
    }

    private func staging() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: sandbox.file("downloads"))) ?? [])
            .filter { $0.hasPrefix(".haul-torrent-") }
    }

    private func torrent(_ resource: [String: Any]) throws -> [String: Any] {
        try XCTUnwrap(resource["torrent"] as? [String: Any], "\(resource)")
    }

    func testSeedingStopsAtTheRatioAndGoesOnAfterARestart() throws {
        let size = 6 << 20
        let fixture = try TorrentFixtures.make(in: sandbox, "seed.bin", files: [("seed.bin", size)])
        var seeder: TorrentSeeder? = try TorrentSeeder(
            torrent: fixture.torrent, content: fixture.content, sandbox: sandbox)
        let id = try add(["url": try magnet(fixture.torrent, name: "seed.bin", seeder: seeder!), "seed_ratio": 1])
        var resource = try waitForState(id, "seeding", timeout: 120)
        // Complete and named while it seeds: the file route serves it.
        XCTAssertEqual(try sha256(sandbox.file("downloads/seed.bin")), fixture.sha256["seed.bin"])
        XCTAssertEqual(resource["seed_ratio"] as? Double, 1)
        XCTAssertEqual(resource["progress"] as? Double, 1)
        let served = try api.get("/downloads/\(id)/file")
        XCTAssertEqual(served.status, 200)
        XCTAssertEqual(served.body.count, size)
        seeder = nil

        // A crash while seeding: it seeds again after the restart, from its named file.
        haul.stop(signal: SIGKILL)
        try startHaul()
        resource = try download(id)
        XCTAssertEqual(resource["state"] as? String, "seeding", "\(resource)")
        let metrics = try api.get("/metrics").text
        XCTAssertTrue(metrics.contains("haul_downloads{state=\"seeding\"} 1"), metrics)
        XCTAssertTrue(metrics.contains("haul_torrent_uploaded_bytes "), metrics)

        // The only peer with the pieces is Haul now.
        try FileManager.default.createDirectory(
            atPath: sandbox.file("leech"), withIntermediateDirectories: true)
        let leecher = try TorrentSeeder(
            torrent: fixture.torrent, content: sandbox.file("leech"), sandbox: sandbox, leechFrom: torrentPort)
        resource = try waitForState(id, "completed", timeout: 120)
        let swarm = try torrent(resource)
        XCTAssertGreaterThanOrEqual(int(swarm["uploaded"]), Int64(size), "\(swarm)")
        XCTAssertGreaterThanOrEqual(swarm["ratio"] as? Double ?? 0, 1)
        try waitFor("the leecher to finish", timeout: 30) { leecher.finished }
        XCTAssertEqual(try sha256(sandbox.file("leech/seed.bin")), fixture.sha256["seed.bin"])
        // Out of the swarm: its staging folder is gone, its file stays.
        XCTAssertEqual(staging(), [])
        XCTAssertEqual(try sha256(sandbox.file("downloads/seed.bin")), fixture.sha256["seed.bin"])
    }

    func testASeedingTorrentHoldsNoSlotAndStopsAfterItsTime() throws {
        let files = [("a.bin", 1 << 20), ("sub/b.bin", (1 << 20) + 3)]
        let fixture = try TorrentFixtures.make(in: sandbox, "pack", files: files)
        // The torrent's name is taken: it is named "pack (1)", and seeds from there.
        try FileManager.default.createDirectory(
            atPath: sandbox.file("downloads/pack"), withIntermediateDirectories: true)
        let seeder = try TorrentSeeder(torrent: fixture.torrent, content: fixture.content, sandbox: sandbox)
        let id = try add(["url": try magnet(fixture.torrent, name: "pack", seeder: seeder), "seed_time": 6])
        let seeding = try waitForState(id, "seeding", timeout: 120)
        XCTAssertEqual(seeding["path"] as? String, "pack (1)")
        // --max-active 1: a plain download runs beside the seeding torrent.
        let bytes = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try bytes.write(to: URL(fileURLWithPath: sandbox.file("www/plain.bin")))
        let plain = try add(["url": originURL("plain.bin")])
        try waitForState(plain, "completed", timeout: 30)
        XCTAssertEqual(try download(id)["state"] as? String, "seeding")
        // Seeding went on from the renamed folder for its whole time (a file libtorrent could not find would
        // have ended it at once).
        let resource = try waitForState(id, "completed", timeout: 60)
        XCTAssertGreaterThanOrEqual(int(try torrent(resource)["seeding_time"]), 6, "\(resource)")
        for (path, digest) in fixture.sha256 {
            let renamed = "pack (1)" + path.dropFirst("pack".count)
            XCTAssertEqual(try sha256(sandbox.file("downloads/" + renamed)), digest, renamed)
        }
    }

    func testACategorysLimitsApplyAndPausingEndsTheSeeding() throws {
        let put = try api.request("PUT", "/categories/shows", json: ["seed_ratio": 50, "seed_time": 0])
        XCTAssertEqual(put.status, 201, put.text)
        XCTAssertEqual(put.json["seed_ratio"] as? Double, 50)
        let wrong = try api.request("PUT", "/categories/bad", json: ["seed_ratio": -1])
        XCTAssertEqual(wrong.status, 422, wrong.text)
        let fixture = try TorrentFixtures.make(in: sandbox, "episode.mkv", files: [("episode.mkv", 1 << 20)])
        let seeder = try TorrentSeeder(torrent: fixture.torrent, content: fixture.content, sandbox: sandbox)
        let id = try add(["url": try magnet(fixture.torrent, name: "episode.mkv", seeder: seeder), "category": "shows"])
        try waitForState(id, "seeding", timeout: 120)
        let paused = try patch(id, ["state": "paused"])
        XCTAssertEqual(paused.status, 200, paused.text)
        let resource = try waitForState(id, "completed", timeout: 30)
        XCTAssertEqual(resource["path"] as? String, "shows/episode.mkv")
        XCTAssertEqual(try sha256(sandbox.file("downloads/shows/episode.mkv")), fixture.sha256["episode.mkv"])
        XCTAssertEqual(
            ((try? FileManager.default.contentsOfDirectory(atPath: sandbox.file("downloads/shows"))) ?? [])
                .filter { $0.hasPrefix(".haul-torrent-") }, [])
        // A bad limit is the field's problem.
        let bad = try api.request(
            "POST", "/downloads",
            json: ["url": "magnet:?xt=urn:btih:" + String(repeating: "a", count: 40), "seed_ratio": "1"])
        XCTAssertEqual(bad.status, 422, bad.text)
    }
}
