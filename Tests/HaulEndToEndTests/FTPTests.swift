import Foundation
import XCTest

/// FTP and explicit FTPS against a real server on loopback (pyftpdlib, Tests/Servers/ftp_server.py), with the
/// guarantees HTTP downloads have: exact files on one connection or eight, a server killed mid-file and started
/// again resumed where each segment stopped (its log shows the REST offsets), a file replaced while paused fetched
/// again from byte 0, a PASV reply naming another address not followed, a login refused and a file missing with
/// their codes, a server with two sessions to spare still finishing a download that asked for eight, one without
/// SIZE or REST fetched whole on one connection, and mirrors across HTTP and FTP.
final class FTPTests: HaulTestCase {
    // Attempts enough for a server killed and started again: each of a download's connections counts its own.
    override var serveArguments: [String] { super.serveArguments + ["--min-split-size", "1M", "--max-attempts", "12"] }

    override func setUpWithError() throws {
        guard LocalFTP.available else { throw XCTSkip("pyftpdlib is not in .build/venv (make test installs it)") }
        try super.setUpWithError()
    }

    private var servers: [LocalFTP] = []

    override func tearDownWithError() throws {
        for server in servers { server.kill() }
        servers = []
        try super.tearDownWithError()
    }

    /// An FTP server on the sandbox's www, explicit FTPS with `tls`.
    private func ftp(tls: Bool = false, _ options: [String] = []) throws -> LocalFTP {
        var pem: String?
        if tls {
            let (certificate, key) = try sandbox.selfSignedCertificate()
            pem = sandbox.file("ftp.pem")
            let both =
                try String(contentsOfFile: key, encoding: .utf8) + String(contentsOfFile: certificate, encoding: .utf8)
            try both.write(toFile: pem!, atomically: true, encoding: .utf8)
        }
        let server = try LocalFTP(
            root: sandbox.file("www"), directory: sandbox.file("ftp-\(servers.count)"), tls: pem,
            options: options)
        servers.append(server)
        return server
    }

    private func add(_ url: String, _ extra: [String: Any] = [:]) throws -> String {
        try add(["url": url].merging(extra) { _, new in new })
    }

    func testAFileIsExactOverFTPAndFTPSWithOneAndEightConnections() throws {
        let hash = try sandbox.makeRandomFile("www/big.bin", size: 64 << 20)
        let plain = try ftp()
        let secure = try ftp(tls: true)
        for (server, scheme) in [(plain, "ftp"), (secure, "ftps")] {
            for connections in [1, 8] {
                let name = "\(scheme)-\(connections).bin"
                let id = try add(
                    server.url("big.bin", scheme: scheme),
                    ["connections": connections, "filename": name, "insecure": true])
                let done = try waitForState(id, "completed", timeout: 120)
                XCTAssertEqual(try sha256(sandbox.file("downloads/" + name)), hash, name)
                XCTAssertEqual(done["resumable"] as? Bool, true, name)
                XCTAssertEqual(
                    done["url"] as? String, server.url("big.bin", scheme: scheme, login: false),
                    "the password is taken out of the URL shown")
                XCTAssertEqual(done["username"] as? String, server.user)
                XCTAssertEqual((done["segments"] as? [Any])?.count ?? 0 > 1, connections > 1, name)
            }
        }
        // Eight connections started at offsets; over FTPS the login went over TLS (AUTH TLS before USER).
        XCTAssertGreaterThan(plain.commands("REST").filter { $0 != "0" }.count, 1)
        XCTAssertEqual(secure.commands("AUTH").first, "TLS")
        XCTAssertFalse(plain.log.contains(plain.password) || secure.log.contains(secure.password))
        let log = try String(contentsOfFile: sandbox.file("haul.log"), encoding: .utf8)
        XCTAssertFalse(log.contains(plain.password), "the password is never logged")
    }

    func testAKilledServerIsWaitedForAndEachSegmentGoesOnWhereItStopped() throws {
        let hash = try sandbox.makeRandomFile("www/slow.bin", size: 12 << 20)
        let server = try ftp(["--slow", "1000000"])
        let id = try add(server.url("slow.bin"), ["connections": 3])
        try waitFor("a few megabytes", timeout: 60) { try self.int(self.download(id)["received_bytes"]) > 3 << 20 }
        server.kill()
        // What each segment had when the server went: the next server's REST asks for nothing before it.
        let had = (try download(id)["segments"] as? [[String: Any]] ?? []).map {
            (start: int($0["start"]), received: int($0["received"]))
        }
        let before = server.log.count
        try waitFor("the download to see its sessions cut") { int(try download(id)["active_connections"]) == 0 }
        try server.start()
        let done = try waitForState(id, "completed", timeout: 120)
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        let again = LocalFTP.commands("REST", in: String(server.log.dropFirst(before)))
        XCTAssertFalse(again.isEmpty, "the second server was asked for offsets")
        for segment in had where segment.received > 0 {
            XCTAssertFalse(
                again.contains(String(segment.start)),
                "segment at \(segment.start) had \(segment.received) bytes and was fetched from its start")
        }
    }

    func testAFileReplacedWhilePausedIsFetchedAgainFromByteZero() throws {
        _ = try sandbox.makeRandomFile("www/changing.bin", size: 6 << 20)
        let server = try ftp(["--slow", "1500000"])
        let id = try add(server.url("changing.bin"), ["connections": 2])
        try waitFor("the first megabyte") { try self.int(self.download(id)["received_bytes"]) > 1 << 20 }
        XCTAssertEqual(try patch(id, ["state": "paused"]).status, 200)
        try waitForState(id, "paused")
        // Another version: another size, another modification time (set a minute on: MDTM counts seconds).
        let hash = try sandbox.makeRandomFile("www/changing.bin", size: 5 << 20)
        try FileManager.default.setAttributes(
            [.modificationDate: Date().addingTimeInterval(60)],
            ofItemAtPath: sandbox.file("www/changing.bin"))
        XCTAssertEqual(try patch(id, ["state": "queued"]).status, 200)
        let done = try waitForState(id, "completed", timeout: 120)
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash, "never two versions spliced")
        XCTAssertEqual(int(done["total_bytes"]), 5 << 20)
    }

    /// The new version is shorter than where the download stopped: the server refuses the RETR after REST, and the
    /// download starts over instead of failing.
    func testAFileThatShrankPastWhereItStoppedIsFetchedAgain() throws {
        _ = try sandbox.makeRandomFile("www/shrinking.bin", size: 6 << 20)
        let server = try ftp(["--slow", "1500000"])
        let id = try add(server.url("shrinking.bin"), ["connections": 1])
        try waitFor("five and a half megabytes") { try self.int(self.download(id)["received_bytes"]) > 11 << 19 }
        XCTAssertEqual(try patch(id, ["state": "paused"]).status, 200)
        try waitForState(id, "paused")
        let hash = try sandbox.makeRandomFile("www/shrinking.bin", size: 5 << 20)
        try FileManager.default.setAttributes(
            [.modificationDate: Date().addingTimeInterval(60)],
            ofItemAtPath: sandbox.file("www/shrinking.bin"))
        XCTAssertEqual(try patch(id, ["state": "queued"]).status, 200)
        let done = try waitForState(id, "completed", timeout: 120)
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash, "never two versions spliced")
        XCTAssertEqual(int(done["total_bytes"]), 5 << 20)
    }

    func testAPassiveReplyNamingAnotherAddressIsNotFollowed() throws {
        let hash = try sandbox.makeRandomFile("www/pasv.bin", size: 3 << 20)
        // No EPSV: curl falls back to PASV, whose reply names an address no one listens on.
        let server = try ftp(["--without", "EPSV", "--pasv-address", "10.255.255.1"])
        let done = try waitForState(try add(server.url("pasv.bin"), ["connections": 2]), "completed", timeout: 60)
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertFalse(server.commands("PASV").isEmpty)
        XCTAssertTrue(server.log.contains("10,255,255,1"), "the reply named the other address")
    }

    func testALoginRefusedAndAFileMissingHaveTheirCodes() throws {
        _ = try sandbox.makeRandomFile("www/here.bin", size: 1000)
        let server = try ftp()
        let wrong = server.url("here.bin").replacingOccurrences(of: server.password, with: "wrong")
        let refused = try waitForState(try add(wrong), "failed")
        XCTAssertEqual((refused["error"] as? [String: Any])?["code"] as? String, "login_failed")
        XCTAssertFalse("\(refused)".contains("wrong"), "the password is never shown")
        let missing = try waitForState(try add(server.url("missing.bin")), "failed")
        XCTAssertEqual((missing["error"] as? [String: Any])?["code"] as? String, "ftp_550")
        XCTAssertEqual(int(missing["attempts"]), 1, "a 550 is not tried again")
    }

    func testTwoSessionsToSpareStillFinishADownloadThatAskedForEight() throws {
        let hash = try sandbox.makeRandomFile("www/few.bin", size: 16 << 20)
        let server = try ftp(["--max-per-ip", "2", "--slow", "4000000"])
        let done = try waitForState(try add(server.url("few.bin"), ["connections": 8]), "completed", timeout: 120)
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertTrue(server.log.contains("-> 421"), "the server refused sessions beyond two")
    }

    func testAServerWithoutSizeOrRestIsFetchedWholeOnOneConnection() throws {
        let hash = try sandbox.makeRandomFile("www/plain.bin", size: 5 << 20)
        for missing in ["SIZE", "REST"] {
            let server = try ftp(["--without", missing])
            let id = try add(server.url("plain.bin"), ["connections": 4, "filename": "without-\(missing).bin"])
            let done = try waitForState(id, "completed", timeout: 60)
            XCTAssertEqual(try sha256(sandbox.file("downloads/without-\(missing).bin")), hash, missing)
            XCTAssertEqual(done["resumable"] as? Bool, false, missing)
            XCTAssertEqual((done["segments"] as? [Any])?.count, 1, missing)
            XCTAssertTrue(
                server.commands("REST").allSatisfy { $0 == "0" } || missing == "REST",
                "nothing asked from an offset: \(server.commands("REST"))")
        }
    }

    func testAFileLongerThanItsSizeSaysIsNotCutShort() throws {
        // SIZE says 100, the data connection carries 5,000 bytes: the size is wrong, and neither the first 100
        // bytes nor the whole file is the file that was planned. On one connection and on several.
        _ = try sandbox.makeRandomFile("www/longer.bin", size: 5000)
        _ = try sandbox.makeRandomFile("www/longer-big.bin", size: 3 << 20)
        let server = try ftp(["--size-says", "100"])
        let big = try ftp(["--size-says", String(2 << 20)])
        for (url, name, connections) in [
            (server.url("longer.bin"), "short.bin", 1),
            (big.url("longer-big.bin"), "short-big.bin", 4),
        ] {
            let failed = try waitForState(
                try add(url, ["filename": name, "connections": connections]), "failed",
                timeout: 60)
            XCTAssertEqual((failed["error"] as? [String: Any])?["code"] as? String, "size_mismatch", "\(failed)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.file("downloads/" + name)), name)
        }
    }

    func testMirrorsGoFromHTTPToFTPAndBack() throws {
        let hash = try sandbox.makeRandomFile("www/both.bin", size: 8 << 20)
        let server = try ftp()
        let fromHTTP = try waitForState(
            try add(
                originURL("both.bin"),
                [
                    "connections": 4, "filename": "a.bin",
                    "mirrors": [server.url("both.bin")],
                ]),
            "completed", timeout: 60)
        XCTAssertEqual(try sha256(try downloadedPath(fromHTTP)), hash)
        let fromFTP = try waitForState(
            try add(
                server.url("both.bin"),
                [
                    "connections": 4, "filename": "b.bin",
                    "mirrors": [originURL("both.bin")],
                ]),
            "completed", timeout: 60)
        XCTAssertEqual(try sha256(try downloadedPath(fromFTP)), hash)
        let mirrors = (fromFTP["mirrors"] as? [[String: Any]]) ?? []
        XCTAssertEqual(mirrors.first?["state"] as? String == "dropped", false, "\(mirrors)")
        XCTAssertFalse(server.commands("RETR").isEmpty)
    }

    /// ftps:// on port 990 is implicit FTPS (TLS from the first byte), served by Debian's vsftpd; elsewhere it is
    /// explicit (AUTH TLS), as the tests above are.
    func testImplicitFTPSOnPort990() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/vsftpd"), getuid() == 0 else {
            throw XCTSkip("vsftpd is not installed, or port 990 needs root")
        }
        guard !LocalProxy.accepts(host: "127.0.0.1", port: 990) else { throw XCTSkip("port 990 is taken") }
        let hash = try sandbox.makeRandomFile("www/implicit.bin", size: 6 << 20)
        let (certificate, key) = try sandbox.selfSignedCertificate()
        let directory = sandbox.file("vsftpd")
        try FileManager.default.createDirectory(atPath: directory + "/empty", withIntermediateDirectories: true)
        chmod(sandbox.file("www"), 0o755)
        let config = """
            listen=YES
            listen_address=127.0.0.1
            listen_port=990
            background=NO
            anonymous_enable=YES
            no_anon_password=YES
            anon_root=\(sandbox.file("www"))
            local_enable=NO
            write_enable=NO
            secure_chroot_dir=\(directory)/empty
            ssl_enable=YES
            implicit_ssl=YES
            allow_anon_ssl=YES
            force_anon_logins_ssl=YES
            force_anon_data_ssl=YES
            require_ssl_reuse=NO
            rsa_cert_file=\(certificate)
            rsa_private_key_file=\(key)
            seccomp_sandbox=NO
            log_ftp_protocol=YES
            xferlog_enable=YES
            dual_log_enable=YES
            vsftpd_log_file=\(directory)/vsftpd.log
            """
        try config.write(toFile: directory + "/vsftpd.conf", atomically: true, encoding: .utf8)
        // Its sessions are processes of their own that outlive the listener: it is started in the background by a
        // shell that closes every descriptor but the standard three first (Process would otherwise wait for the
        // sessions to end too), and killed, sessions and all, by its pid and its children's.
        let started = try execute(
            "/bin/bash",
            [
                "-c",
                "for fd in /proc/$$/fd/*; do fd=${fd##*/}; [ \"$fd\" -gt 2 ] && "
                    + "eval \"exec $fd>&-\"; done; /usr/sbin/vsftpd \"$0\" 2>\"$1\" </dev/null >/dev/null & "
                    + "echo $!", directory + "/vsftpd.conf", directory + "/stderr",
            ])
        XCTAssertEqual(started.status, 0, started.output)
        let pid = try XCTUnwrap(pid_t(started.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), started.output)
        defer { ProcessTree.kill(pid) }
        let listening = { !ProcessTree.isGone(pid) }
        try waitFor("vsftpd to listen") { LocalProxy.accepts(host: "127.0.0.1", port: 990) || !listening() }
        guard listening() else {
            let said = (try? String(contentsOfFile: directory + "/stderr", encoding: .utf8)) ?? ""
            throw XCTSkip("vsftpd could not listen on port 990: \(said)")
        }
        let done = try waitForState(
            try add("ftps://127.0.0.1:990/implicit.bin", ["connections": 4, "insecure": true]),
            "completed", timeout: 60)
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        let log = (try? String(contentsOfFile: directory + "/vsftpd.log", encoding: .utf8)) ?? ""
        XCTAssertTrue(log.contains("RETR implicit.bin"), log.suffix(2000).description)
        XCTAssertFalse(log.contains("AUTH TLS"), "implicit: TLS before any command")
    }

    func testTheAddressGuardHoldsForFTP() throws {
        _ = try sandbox.makeRandomFile("www/inside.bin", size: 1000)
        let server = try ftp()
        haul.stop(signal: SIGTERM)
        try startHaul(extra: ["--deny-private-networks"])
        let blocked = try waitForState(try add(server.url("inside.bin")), "failed")
        XCTAssertEqual((blocked["error"] as? [String: Any])?["code"] as? String, "blocked_address")
        XCTAssertTrue(server.commands("USER").isEmpty, "the server was never reached")
    }
}

extension LocalFTP {
    /// The arguments of the commands `verb` in `log`.
    static func commands(_ verb: String, in log: String) -> [String] {
        log.split(separator: "\n").compactMap { line in
            guard let range = line.range(of: "<- \(verb)") else { return nil }
            return String(line[range.upperBound...]).trimmingCharacters(in: .whitespaces)
        }
    }
}
