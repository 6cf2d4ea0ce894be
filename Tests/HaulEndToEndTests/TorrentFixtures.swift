import Foundation
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

/// A seeder of one torrent on 127.0.0.1; stopped (by its pid) when released.
final class TorrentSeeder {
    private let process = Process()
    private let input = Pipe()
    let port: Int
    private let status: String

    /// Seeds `torrent` from `content`; with `leechFrom` (a peer's port on 127.0.0.1) it starts with nothing in
    /// `content` and downloads from that peer instead.
    init(torrent: String, content: String, sandbox: Sandbox, uploadLimit: Int = 0, leechFrom: Int? = nil) throws {
        status = sandbox.file("seeder-\(UUID().uuidString).json")
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../Servers/torrent_seeder.py").standardized.path
        process.arguments = [
            script, "--torrent", torrent, "--data", content, "--status", status, "--upload-limit", "\(uploadLimit)",
        ]
        if let leechFrom { process.arguments! += ["--leech", "--peer", "127.0.0.1:\(leechFrom)"] }
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = input
        try process.run()
        var line = Data()
        while true {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty || byte == Data("\n".utf8) { break }
            line.append(byte)
        }
        let json = try JSONSerialization.jsonObject(with: line) as? [String: Any]
        guard let port = json?["port"] as? Int, port > 0 else {
            throw HarnessError("the seeder did not start: \(String(decoding: line, as: UTF8.self))")
        }
        self.port = port
    }

    deinit {
        process.terminate()
        process.waitUntilExit()
    }

    /// Payload bytes it uploaded, once libtorrent's count (updated each second) has settled.
    func uploaded() -> Int64 {
        var last = read()
        var stableSince = Date()
        while Date().timeIntervalSince(stableSince) < 2.5 {
            usleep(100_000)
            let now = read()
            if now != last { (last, stableSince) = (now, Date()) }
        }
        return last
    }

    /// Whether a leecher has every piece (its files complete and checked).
    var finished: Bool { state()["finished"] as? Bool ?? false }

    private func read() -> Int64 { (state()["uploaded"] as? NSNumber)?.int64Value ?? 0 }

    private func state() -> [String: Any] {
        guard let data = FileManager.default.contents(atPath: status),
            let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return [:] }
        return json
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
