import Foundation
import HaulTestSupport
import XCTest

/// Torrents for the tests, made by Debian's mktorrent from random files, seeded on 127.0.0.1 by a libtorrent
/// session of Debian's python3-libtorrent (Tests/Servers/torrent_seeder.py), and announced by Debian's
/// opentracker when a test wants a tracker. No DHT, no local peer discovery anywhere.
enum TorrentFixtures {
    static let available: Bool = {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/mktorrent"),
            FileManager.default.isExecutableFile(atPath: "/usr/bin/opentracker")
        else { return false }
        return (try? runCommand("/usr/bin/python3", ["-c", "import libtorrent"])) != nil
    }()

    /// Random files under `root/NAME/` (several) or the one file `root/NAME`, their sha256 by path (as the
    /// torrent names them, NAME first), and their torrent at `root/NAME.torrent`.
    static func make(
        in sandbox: Sandbox, _ name: String, files: [(String, Int)], tracker: String? = nil, pieceExponent: Int = 18
    ) throws -> (torrent: String, content: String, sha256: [String: String]) {
        let content = "seed"
        var digests: [String: String] = [:]
        for (path, size) in files {
            let relative = files.count == 1 ? "\(content)/\(name)" : "\(content)/\(name)/\(path)"
            digests[files.count == 1 ? name : "\(name)/\(path)"] = try sandbox.makeRandomFile(relative, size: size)
        }
        let torrent = sandbox.file("\(name).torrent")
        var arguments = ["-l", "\(pieceExponent)", "-o", torrent]
        if let tracker { arguments += ["-a", tracker] }
        try runCommand("/usr/bin/mktorrent", arguments + [sandbox.file("\(content)/\(name)")])
        return (torrent, sandbox.file(content), digests)
    }

    /// The info-hash mktorrent's torrent has, as libtorrent reads it.
    static func infoHash(_ torrent: String) throws -> String {
        try runCommand(
            "/usr/bin/python3",
            ["-c", "import libtorrent,sys; print(libtorrent.torrent_info(sys.argv[1]).info_hashes().v1)", torrent]
        ).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// The tests' BitTorrent peers (HaulTestSupport's), their status in the sandbox.
typealias TorrentSeeder = TorrentPeer

extension TorrentPeer {
    convenience init(
        torrent: String, content: String, sandbox: Sandbox, uploadLimit: Int = 0, leechFrom: Int? = nil
    ) throws {
        try self.init(
            torrent: torrent, content: content, status: sandbox.file("peer-\(UUID().uuidString).json"),
            uploadLimit: uploadLimit, leechFrom: leechFrom)
    }
}

/// opentracker on 127.0.0.1 (HTTP and UDP on `port`), stopped by its pid when released. Debian builds it with a
/// whitelist: it tracks only the info-hashes given (the list is read inside its chroot, the sandbox).
final class Tracker {
    private let process = Process()
    let port: UInt16

    static func announce(_ port: UInt16) -> String { "http://127.0.0.1:\(port)/announce" }

    init(sandbox: Sandbox, port: UInt16, infoHashes: [String]) throws {
        self.port = port
        let whitelist = "tracker-whitelist"
        try (infoHashes.joined(separator: "\n") + "\n").write(
            toFile: sandbox.file(whitelist), atomically: true, encoding: .utf8)
        chmod(sandbox.file(whitelist), 0o644)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/opentracker")
        process.arguments = [
            "-i", "127.0.0.1", "-p", "\(port)", "-P", "\(port)", "-d", sandbox.path, "-w", whitelist,
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        try waitForPort()
    }

    private func waitForPort() throws {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if Nginx.canConnect(port: port) { return }
            usleep(50_000)
        }
        throw HarnessError("opentracker did not listen on \(port)")
    }

    deinit {
        process.terminate()
        process.waitUntilExit()
    }
}
