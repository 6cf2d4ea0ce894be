import Foundation
import XCTest

/// OpenSSH's sshd on a free loopback port, serving SFTP chrooted to a directory of its own, with a host key and a
/// user key made for it. The chroot must be owned by root along its whole path, which /tmp (world-writable) is not:
/// it is made under /run. Root is needed (CI is).
final class LocalSSH {
    let port: UInt16
    let directory: String
    /// The chroot; `files` under it is where a test puts what it serves.
    let jail: String
    var files: String { jail + "/files" }
    var hostKeyFingerprint = ""
    private var config: String { directory + "/sshd_config" }

    static var available: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/sbin/sshd") && getuid() == 0
    }

    /// `settings`: more sshd_config lines, before the Match block.
    init(directory: String, settings: [String] = []) throws {
        self.directory = directory
        port = try Nginx.freePort()
        jail = "/run/haul-test-sftp-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: jail + "/files", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true)
        chmod(jail, 0o755)
        for key in ["host_key", "user_key"] {
            try runCommand(
                "/usr/bin/ssh-keygen",
                [
                    "-q", "-t", "ed25519", "-N", "", "-C", "haul-test",
                    "-f", directory + "/" + key,
                ])
        }
        try FileManager.default.copyItem(atPath: directory + "/user_key.pub", toPath: directory + "/authorized_keys")
        let printed = try execute("/usr/bin/ssh-keygen", ["-lf", directory + "/host_key.pub"]).stdout
        hostKeyFingerprint = printed.split(separator: " ").dropFirst().first.map(String.init) ?? ""
        let hostKey = try String(contentsOfFile: directory + "/host_key.pub", encoding: .utf8)
        try "[127.0.0.1]:\(port) \(hostKey)".write(
            toFile: directory + "/known_hosts", atomically: true, encoding: .utf8)
        // The log (LogLevel DEBUG3) is what the tests read the logins back from.
        try """
        Port \(port)
        ListenAddress 127.0.0.1
        HostKey \(directory)/host_key
        PidFile \(directory)/sshd.pid
        AuthorizedKeysFile \(directory)/authorized_keys
        PermitRootLogin yes
        PasswordAuthentication yes
        KbdInteractiveAuthentication no
        UsePAM no
        StrictModes no
        LogLevel DEBUG3
        Subsystem sftp internal-sftp
        \(settings.joined(separator: "\n"))
        Match User root
            ChrootDirectory \(jail)
            ForceCommand internal-sftp
        """.write(toFile: config, atomically: true, encoding: .utf8)
        try start()
    }

    /// `user_key`: the private key `--ssh-key` names; `known_hosts`: the file `--ssh-known-hosts` names.
    func file(_ name: String) -> String { directory + "/" + name }

    func url(_ path: String, user: String = "root", host: String = "127.0.0.1") -> String {
        "sftp://\(user)@\(host):\(port)/files/\(path)"
    }

    func start() throws {
        // sshd forks into the background itself; -E appends its log, sessions' lines included.
        try runCommand("/usr/sbin/sshd", ["-f", config, "-E", directory + "/sshd.log"])
        try waitFor("sshd to listen") { LocalProxy.accepts(host: "127.0.0.1", port: port) }
    }

    /// Kills the listener and every session (SIGKILL): transfers end mid-way.
    func kill() {
        // Sessions are the listener's children (sshd forks one per connection): found by parent id, by pid.
        guard let listener = ProcessTree.pid(inFile: directory + "/sshd.pid") else { return }
        let members = ProcessTree.members(of: listener)
        ProcessTree.kill(listener)
        // Waited for until each has ended, not for a guess of how long that takes.
        waitFor("sshd's processes to end", timeout: 10) { members.allSatisfy(ProcessTree.isGone) }
    }

    var log: String { (try? String(contentsOfFile: directory + "/sshd.log", encoding: .utf8)) ?? "" }

    deinit {
        kill()
        try? FileManager.default.removeItem(atPath: jail)
    }
}

/// SFTP against a real OpenSSH server: exact files on one connection or eight, a server killed and started again
/// resumed where each segment stopped, a file replaced while paused fetched again from byte 0, host keys unknown,
/// changed or pinned, a login refused and a file missing, with their codes. The key is the operator's (`--ssh-key`),
/// the known hosts too (`--ssh-known-hosts`).
final class SFTPTests: HaulTestCase {
    private var ssh: LocalSSH!

    override var serveArguments: [String] { super.serveArguments + ["--min-split-size", "1M", "--max-attempts", "12"] }

    override func setUpWithError() throws {
        guard LocalSSH.available else { throw XCTSkip("sshd is not installed, or the test is not root (make deps)") }
        try super.setUpWithError()
        ssh = try LocalSSH(directory: sandbox.file("ssh"))
        haul.stop(signal: SIGTERM)
        try startHaul(extra: ["--ssh-key", ssh.file("user_key"), "--ssh-known-hosts", ssh.file("known_hosts")])
    }

    override func tearDownWithError() throws {
        ssh = nil
        try super.tearDownWithError()
    }

    private func serve(_ name: String, size: Int) throws -> String {
        let hash = try sandbox.makeRandomFile("www/" + name, size: size)
        try? FileManager.default.removeItem(atPath: ssh.files + "/" + name)
        try FileManager.default.copyItem(atPath: sandbox.file("www/" + name), toPath: ssh.files + "/" + name)
        return hash
    }

    private func code(_ download: [String: Any]) -> String? {
        (download["error"] as? [String: Any])?["code"] as? String
    }

    func testAFileIsExactOverSFTPWithOneAndEightConnections() throws {
        let hash = try serve("big.bin", size: 64 << 20)
        for connections in [1, 8] {
            let name = "sftp-\(connections).bin"
            let done = try waitForState(
                try add([
                    "url": ssh.url("big.bin"), "connections": connections,
                    "filename": name,
                ]), "completed", timeout: 120)
            XCTAssertEqual(try sha256(sandbox.file("downloads/" + name)), hash)
            XCTAssertEqual(done["resumable"] as? Bool, true)
            XCTAssertEqual(((done["segments"] as? [Any])?.count ?? 0) > 1, connections > 1)
        }
        XCTAssertTrue(ssh.log.contains("Accepted publickey for root"), "the operator's key logged in")
    }

    func testAKilledServerIsWaitedForAndEachSegmentGoesOnWhereItStopped() throws {
        let hash = try serve("slow.bin", size: 12 << 20)
        // Slowed by Haul itself (sshd has no throttle): time enough to kill the server on the way.
        let id = try add(["url": ssh.url("slow.bin"), "connections": 3, "max_speed": 3 << 20])
        try waitFor("a few megabytes", timeout: 60) { try self.int(self.download(id)["received_bytes"]) > 3 << 20 }
        ssh.kill()
        try ssh.start()
        XCTAssertEqual(try patch(id, ["max_speed": 0]).status, 200)
        let done = try waitForState(id, "completed", timeout: 120)
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        // Every byte written once: each segment went on from where it stopped rather than from its start (sftp-server
        // logs nothing of reads, so the count is Haul's own: body bytes written to part files).
        let metrics = try api.get("/metrics").text
        let written =
            metrics.split(separator: "\n").first { $0.hasPrefix("haul_downloaded_bytes_total ") }
            .flatMap { Double($0.split(separator: " ")[1]) } ?? -1
        XCTAssertEqual(written, Double(12 << 20), "what was had was not fetched again")
    }

    func testAFileReplacedWhilePausedIsFetchedAgainFromByteZero() throws {
        _ = try serve("changing.bin", size: 6 << 20)
        let id = try add(["url": ssh.url("changing.bin"), "connections": 2, "max_speed": 2 << 20])
        try waitFor("the first megabyte") { try self.int(self.download(id)["received_bytes"]) > 1 << 20 }
        XCTAssertEqual(try patch(id, ["state": "paused"]).status, 200)
        try waitForState(id, "paused")
        // Another version with a modification time of its own (set a minute on: the SFTP stat counts seconds).
        let hash = try serve("changing.bin", size: 5 << 20)
        try FileManager.default.setAttributes(
            [.modificationDate: Date().addingTimeInterval(60)],
            ofItemAtPath: ssh.files + "/changing.bin")
        XCTAssertEqual(try patch(id, ["state": "queued", "max_speed": 0]).status, 200)
        let done = try waitForState(id, "completed", timeout: 120)
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash, "never two versions spliced")
    }

    func testHostKeysUnknownChangedAndPinned() throws {
        let hash = try serve("keys.bin", size: 100_000)
        // localhost is not in the known hosts (127.0.0.1 is): unknown, and the error names the key to check.
        let unknown = try waitForState(
            try add(["url": ssh.url("keys.bin", host: "localhost"), "filename": "u.bin"]),
            "failed")
        XCTAssertEqual(code(unknown), "host_key_unknown")
        XCTAssertTrue(
            ((unknown["error"] as? [String: Any])?["message"] as? String ?? "").contains(ssh.hostKeyFingerprint))
        // Pinned by the download: let in.
        let pinned = try waitForState(
            try add([
                "url": ssh.url("keys.bin", host: "localhost"), "filename": "p.bin",
                "host_key": ssh.hostKeyFingerprint,
            ]), "completed")
        XCTAssertEqual(pinned["host_key"] as? String, ssh.hostKeyFingerprint)
        XCTAssertEqual(try sha256(sandbox.file("downloads/p.bin")), hash)
        // The pinned download's session is not left for one without the pin: still unknown.
        let stillUnknown = try waitForState(
            try add([
                "url": ssh.url("keys.bin", host: "localhost"),
                "filename": "u2.bin",
            ]), "failed")
        XCTAssertEqual(code(stillUnknown), "host_key_unknown")
        // Pinned to another key: refused, though the known hosts hold the server's key and a download without a pin
        // has just left a session to it open (a session checked against the known hosts is no proof of a pin).
        let known = try waitForState(try add(["url": ssh.url("keys.bin"), "filename": "k.bin"]), "completed")
        XCTAssertEqual(try sha256(try downloadedPath(known)), hash)
        let other = "SHA256:" + String(repeating: "A", count: 43)
        let wrongPin = try waitForState(
            try add(["url": ssh.url("keys.bin"), "filename": "w.bin", "host_key": other]),
            "failed")
        XCTAssertEqual(code(wrongPin), "host_key_mismatch")
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.file("downloads/w.bin")))
        // The known hosts name another key for this server: changed.
        try runCommand("/usr/bin/ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", sandbox.file("other_key")])
        let otherKey = try String(contentsOfFile: sandbox.file("other_key.pub"), encoding: .utf8)
        // (By the name of localhost: sessions to 127.0.0.1 checked against the file before it changed may still be
        // open for reuse, and a pinned download's session is never kept for another.)
        try "[localhost]:\(ssh.port) \(otherKey)".write(
            toFile: ssh.file("known_hosts"), atomically: true,
            encoding: .utf8)
        let changed = try waitForState(
            try add(["url": ssh.url("keys.bin", host: "localhost"), "filename": "c.bin"]),
            "failed")
        XCTAssertEqual(code(changed), "host_key_mismatch")
        XCTAssertEqual(
            try api.request("POST", "/downloads", json: ["url": ssh.url("keys.bin"), "host_key": "md5:x"])
                .status, 422)
    }

    func testAServerAdmittingTwoLoginsAtOnceStillGivesAllOfTheFile() throws {
        // sshd drops a connection from an address that already has two logins under way: six of eight sessions
        // are cut before their banner, and are met again later or not at all.
        let strict = try LocalSSH(
            directory: sandbox.file("ssh-strict"),
            settings: ["PerSourceMaxStartups 2", "MaxStartups 2:100:2"])
        let hash = try sandbox.makeRandomFile("www/eight.bin", size: 16 << 20)
        try FileManager.default.copyItem(atPath: sandbox.file("www/eight.bin"), toPath: strict.files + "/eight.bin")
        // The same user key and a known host key: Haul was started with the first server's files.
        try FileManager.default.removeItem(atPath: strict.file("authorized_keys"))
        try FileManager.default.copyItem(atPath: ssh.file("authorized_keys"), toPath: strict.file("authorized_keys"))
        try "[127.0.0.1]:\(strict.port) \(try String(contentsOfFile: strict.file("host_key.pub"), encoding: .utf8))"
            .write(toFile: ssh.file("known_hosts"), atomically: true, encoding: .utf8)
        let done = try waitForState(
            try add(["url": strict.url("eight.bin"), "connections": 8]), "completed",
            timeout: 120)
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertTrue(strict.log.contains("drop connection"), "sshd turned sessions away")
    }

    func testALoginRefusedAndAFileMissingHaveTheirCodes() throws {
        _ = try serve("here.bin", size: 1000)
        let refused = try waitForState(
            try add(["url": ssh.url("here.bin", user: "nobody"), "password": "wrong-one"]),
            "failed")
        XCTAssertEqual(code(refused), "login_failed")
        XCTAssertFalse("\(refused)".contains("wrong-one"))
        let missing = try waitForState(try add(["url": ssh.url("missing.bin")]), "failed")
        XCTAssertEqual(code(missing), "ftp_550")
    }
}
