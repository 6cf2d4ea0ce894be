import Foundation
import HaulCore
import HaulLoop
import HaulTestSupport
import XCTest

/// libtorrent through the CTorrent shim, on a real loop, against a real seeder: Debian's python3-libtorrent
/// seeding on 127.0.0.1 what Debian's mktorrent made. No DHT, no local peer discovery: the peer is named.
final class TorrentSessionTests: XCTestCase {
    private var directory = ""
    private var seeders: [TorrentPeer] = []

    static let available: Bool = {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/mktorrent") else { return false }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", "import libtorrent"]
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }()

    override func setUpWithError() throws {
        try XCTSkipUnless(Self.available, "mktorrent and python3-libtorrent are installed by make test")
        directory = NSTemporaryDirectory() + "haul-torrent-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        seeders.removeAll()
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: fixtures

    /// Random files under `content/NAME/` (several) or `content/NAME` (one), and their torrent.
    private func makeTorrent(
        _ name: String, files: [(String, Int)], pieceExponent: Int = 16
    ) throws -> (
        torrent: String, content: String
    ) {
        let content = directory + "/content"
        for (path, size) in files {
            let full = files.count == 1 ? content + "/" + name : content + "/" + name + "/" + path
            try FileManager.default.createDirectory(
                atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            var generator = SystemRandomNumberGenerator()
            let bytes = (0..<size / 8 + 1).flatMap { _ in withUnsafeBytes(of: generator.next()) { Array($0) } }
            try Data(bytes.prefix(size)).write(to: URL(fileURLWithPath: full))
        }
        let torrent = directory + "/\(name).torrent"
        try run("/usr/bin/mktorrent", ["-l", "\(pieceExponent)", "-o", torrent, content + "/" + name])
        return (torrent, content)
    }

    private func run(_ program: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "\(program) \(arguments)")
    }

    /// A seeder of `torrent` from `content`, kept until the test ends.
    private func seed(_ torrent: String, from content: String, uploadLimit: Int = 0) throws -> TorrentPeer {
        let seeder = try TorrentPeer(
            torrent: torrent, content: content, status: directory + "/seeder-\(seeders.count).json",
            uploadLimit: uploadLimit)
        seeders.append(seeder)
        return seeder
    }

    private func sha256(_ path: String) throws -> String {
        Digest.hex(Digest.sha256(Array(try Data(contentsOf: URL(fileURLWithPath: path)))))
    }

    private func settings() -> TorrentSettings {
        TorrentSettings(listenInterfaces: "127.0.0.1:0", userAgent: "haul-test")
    }

    /// Runs `loop` until `done` says so (checked every 50 ms), failing after `timeout` seconds.
    private func run(
        _ loop: EventLoop, timeout: Double = 60, file: StaticString = #filePath, line: UInt = #line,
        until done: @escaping () -> Bool
    ) {
        let clock = LoopClock(loop: loop)
        let started = Date()
        var timedOut = false
        let timer = clock.every(0.05) {
            if done() {
                loop.stop()
            } else if Date().timeIntervalSince(started) > timeout {
                timedOut = true
                loop.stop()
            }
        }
        loop.run()
        timer.cancel()
        XCTAssertFalse(timedOut, "timed out", file: file, line: line)
    }

    // MARK: tests

    func testAMagnetFetchesItsMetadataFromThePeerThenEveryFileExact() throws {
        let files = [("a.bin", 1_500_000), ("sub/b.bin", 700_001), ("sub/deeper/c.txt", 12)]
        let (torrent, content) = try makeTorrent("album", files: files)
        let meta = try TorrentSession.parse(Array(try Data(contentsOf: URL(fileURLWithPath: torrent))))
        XCTAssertEqual(meta.name, "album")
        XCTAssertEqual(meta.files.map(\.path), files.map { "album/" + $0.0 })
        XCTAssertEqual(meta.totalSize, Int64(files.map(\.1).reduce(0, +)))
        let seeder = try seed(torrent, from: content)

        let loop = try EventLoop()
        var events: [TorrentEvent] = []
        let session = try TorrentSession(loop: loop, settings: settings()) { events += $0 }
        var add = TorrentAdd(key: 7, savePath: directory + "/out")
        add.magnet = "magnet:?xt=urn:btih:\(meta.infoHash)&dn=album&x.pe=127.0.0.1:\(seeder.port)"
        add.hold = true
        try session.add(add)
        // Held once the metadata is in, before a piece: the caller looks at the files first.
        run(loop) { events.contains(.metadata(7)) && session.files(7) != nil }
        let seen = try XCTUnwrap(session.files(7))
        XCTAssertEqual(seen.map(\.path), files.map { "album/" + $0.0 })
        XCTAssertEqual(session.status(7)?.totalDone, 0)
        XCTAssertEqual(session.status(7)?.infoHash, meta.infoHash)
        session.resume(7)
        run(loop) { events.contains(.finished(7)) }
        for (path, _) in files {
            XCTAssertEqual(
                try sha256(directory + "/out/album/" + path), try sha256(content + "/album/" + path), path)
        }
        let status = try XCTUnwrap(session.status(7))
        XCTAssertTrue(status.finished)
        XCTAssertEqual(status.totalDone, meta.totalSize)
        session.close()
    }

    func testFileSelectionFetchesOnlyTheChosenFiles() throws {
        let files = [("wanted.bin", 600_000), ("skipped.bin", 2_000_000)]
        let (torrent, content) = try makeTorrent("pick", files: files)
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: torrent)))
        let seeder = try seed(torrent, from: content)
        let loop = try EventLoop()
        var events: [TorrentEvent] = []
        let session = try TorrentSession(loop: loop, settings: settings()) { events += $0 }
        var add = TorrentAdd(key: 1, savePath: directory + "/out")
        add.torrent = bytes
        add.peers = ["127.0.0.1:\(seeder.port)"]
        add.hold = true
        try session.add(add)
        run(loop) { session.files(1) != nil }
        // mktorrent lists the files by name: skipped.bin, then wanted.bin.
        XCTAssertEqual(session.files(1)?.map(\.path), ["pick/skipped.bin", "pick/wanted.bin"])
        session.setFilePriorities(1, [0, 4])
        session.resume(1)
        run(loop) { events.contains(.finished(1)) }
        XCTAssertEqual(try sha256(directory + "/out/pick/wanted.bin"), try sha256(content + "/pick/wanted.bin"))
        // The skipped file's pieces shared with the wanted one may be fetched; the rest of it is not.
        XCTAssertLessThan(seeder.uploadedNow, 600_000 + 2 * 65_536 + 100_000)
        XCTAssertEqual(session.fileProgress(1, count: 2).last, 600_000)
        session.close()
    }

    func testResumeDataSavedMidwayResumesWithoutFetchingTheVerifiedPiecesAgain() throws {
        let size = 6 << 20
        let (torrent, content) = try makeTorrent("big.bin", files: [("big.bin", size)])
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: torrent)))
        let seeder = try seed(torrent, from: content, uploadLimit: 2 << 20)
        var resume: [UInt8] = []
        var doneBefore: Int64 = 0
        do {
            let loop = try EventLoop()
            var events: [TorrentEvent] = []
            let session = try TorrentSession(loop: loop, settings: settings()) { events += $0 }
            var add = TorrentAdd(key: 2, savePath: directory + "/out")
            add.torrent = bytes
            add.peers = ["127.0.0.1:\(seeder.port)"]
            try session.add(add)
            run(loop) { (session.status(2)?.totalDone ?? 0) >= Int64(size / 3) }
            doneBefore = session.status(2)?.totalDone ?? 0
            session.saveResume(2, flush: true)
            run(loop) {
                events.contains {
                    if case .resumeData(2, let data) = $0 { resume = data; return true }; return false
                }
            }
            session.close()
        }
        let uploadedBefore = seeder.uploaded()
        XCTAssertFalse(resume.isEmpty)
        let loop = try EventLoop()
        var events: [TorrentEvent] = []
        let session = try TorrentSession(loop: loop, settings: settings()) { events += $0 }
        var add = TorrentAdd(key: 2, savePath: directory + "/out")
        add.torrent = bytes
        add.resume = resume
        add.peers = ["127.0.0.1:\(seeder.port)"]
        try session.add(add)
        run(loop) { events.contains(.finished(2)) }
        XCTAssertEqual(try sha256(directory + "/out/big.bin"), try sha256(content + "/big.bin"))
        // At most what was missing, plus pieces that were in flight.
        let again = seeder.uploaded() - uploadedBefore
        XCTAssertLessThanOrEqual(again, Int64(size) - doneBefore + 4 * 65_536, "fetched again: \(again)")
        session.close()
    }

    func testHostileTorrentsAreRefusedByTheirNamesAndTheirSize() throws {
        func torrent(files: [[String]], name: String = "x") -> [UInt8] {
            var info = "d5:filesl"
            for path in files {
                info += "d6:lengthi1e4:pathl" + path.map { "\($0.utf8.count):\($0)" }.joined() + "ee"
            }
            info +=
                "e4:name\(name.utf8.count):\(name)12:piece lengthi16384e6:pieces20:" + String(repeating: "a", count: 20)
                + "e"
            return Array(("d4:info" + info + "e").utf8)
        }
        for (paths, why) in [
            ([["..", "..", "etc", "passwd"]], "leaves its folder"),
            ([["a", "", "b"]], "leaves its folder or is empty"),
            ([["ok"], ["OK"]], "differ only by case"),
            ([["caf\u{e9}"], ["cafe\u{301}"]], "Unicode form"),
            ([["a\\b"]], "backslash"),
            ([["a\u{1}b"]], "control character"),
        ] {
            let meta = try TorrentSession.parse(torrent(files: paths))
            let problem = try XCTUnwrap(TorrentLayout.problem(meta.files), "\(paths)")
            XCTAssertTrue(problem.contains(why), problem)
        }
        XCTAssertNil(TorrentLayout.problem(try TorrentSession.parse(torrent(files: [["a"], ["b", "c"]])).files))
        // 200,000 files: refused by count, before libtorrent builds its file list.
        let many = torrent(files: (0..<200_000).map { ["f\($0)"] })
        XCTAssertThrowsError(try TorrentSession.parse(many)) { error in
            XCTAssertTrue("\(error)".contains("200000 files"), "\(error)")
        }
        // Metadata over the limit, and bytes that are not a torrent.
        XCTAssertThrowsError(try TorrentSession.parse(many, maxBytes: 1 << 20))
        XCTAssertThrowsError(try TorrentSession.parse(Array("not a torrent".utf8)))
        XCTAssertThrowsError(try TorrentSession.parse([]))
    }
}
