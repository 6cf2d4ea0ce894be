import Foundation

/// A BitTorrent peer on 127.0.0.1 for the tests: Tests/Servers/torrent_seeder.py, a session of Debian's
/// python3-libtorrent with no DHT, local discovery, UPnP or NAT-PMP, seeding a torrent from `content`, or with
/// `leechFrom` (a peer's port on 127.0.0.1) downloading it into `content` from that peer. It writes what it
/// uploaded and whether it has every piece to `status`; it is stopped, by its own pid, when released.
public final class TorrentPeer {
    public struct StartFailure: Error, CustomStringConvertible {
        public let description: String
    }

    private let process = Process()
    private let input = Pipe()
    public let port: Int
    private let status: String

    public init(torrent: String, content: String, status: String, uploadLimit: Int = 0, leechFrom: Int? = nil) throws {
        self.status = status
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
        let json = try? JSONSerialization.jsonObject(with: line) as? [String: Any]
        guard let port = json?["port"] as? Int, port > 0 else {
            process.terminate()
            process.waitUntilExit()
            throw StartFailure(description: "the peer did not start: \(String(decoding: line, as: UTF8.self))")
        }
        self.port = port
    }

    deinit {
        process.terminate()
        process.waitUntilExit()
    }

    /// Payload bytes it uploaded, once libtorrent's count (updated each second) has settled.
    public func uploaded() -> Int64 {
        var last = uploadedNow
        var stableSince = Date()
        while Date().timeIntervalSince(stableSince) < 2.5 {
            usleep(100_000)
            let now = uploadedNow
            if now != last { (last, stableSince) = (now, Date()) }
        }
        return last
    }

    /// Payload bytes it uploaded so far.
    public var uploadedNow: Int64 { (state()["uploaded"] as? NSNumber)?.int64Value ?? 0 }

    /// Whether it has every piece (a leecher's files complete and checked).
    public var finished: Bool { state()["finished"] as? Bool ?? false }

    private func state() -> [String: Any] {
        guard let data = FileManager.default.contents(atPath: status),
            let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return [:] }
        return json
    }
}
