import Foundation
import XCTest

/// The command-line client (`haul add|ls|pause|resume|rm|watch`) against a live server, as a user runs it.
final class ClientTests: HaulTestCase {

    func testAddWaitFollowsTheDownloadToItsEndInPlainLines() throws {
        let hash = try sandbox.makeRandomFile("www/plain.bin", size: 600_000)
        let result = try haulCommand(["add", originURL("plain.bin", "rate=300000"), "--wait", "--connections", "1"])
        XCTAssertEqual(result.status, 0, result.output)
        let id = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(id.count, 15, result.stdout)
        // Not a terminal: lines, no carriage returns, at least one with a percentage on the way.
        XCTAssertFalse(result.stderr.contains("\r"))
        XCTAssertTrue(result.stderr.contains("plain.bin: downloading"), result.stderr)
        XCTAssertTrue(
            result.stderr.range(of: #"downloading [0-9]+% \("#, options: .regularExpression) != nil,
            result.stderr)
        XCTAssertTrue(result.stderr.hasSuffix("plain.bin: completed, 585.9 KiB -> plain.bin\n"), result.stderr)
        XCTAssertEqual(try sha256(sandbox.file("downloads/plain.bin")), hash)
        XCTAssertEqual(try download(id)["state"] as? String, "completed")
    }

    func testAddTakesACookiesFileAndTheOriginsLoginAndSettingsTakeAProxy() throws {
        let hash = try sandbox.makeRandomFile("www/login.bin", size: 5000)
        let jar = sandbox.file("cookies.txt")
        try "# Netscape HTTP Cookie File\n127.0.0.1\tFALSE\t/\tFALSE\t0\tsid\tcli-42\n"
            .write(toFile: jar, atomically: true, encoding: .utf8)
        let result = try haulCommand([
            "add", originURL("login.bin", "needcookie=sid=cli-42&auth=basic&user=u&pass=p"),
            "--cookies", jar, "--user", "u", "--password", "p",
            "--referer", "https://from.example/", "--wait",
        ])
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertEqual(try sha256(sandbox.file("downloads/login.bin")), hash)
        let sent = try XCTUnwrap(try originRequests().last?["headers"] as? [String: String])
        XCTAssertEqual(sent["referer"], "https://from.example/")

        let set = try haulCommand(["settings", "proxy=socks5h://ann:pw@127.0.0.1:9"])
        XCTAssertEqual(set.status, 0, set.output)
        XCTAssertTrue(set.stdout.contains("socks5h://ann:***@127.0.0.1:9"), set.stdout)
        XCTAssertFalse(set.stdout.contains(":pw@"), set.stdout)
        let refused = try haulCommand(["settings", "proxy=ftp://x"])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("proxy"), refused.stderr)
    }

    func testAddWaitOnATerminalDrawsABar() throws {
        _ = try sandbox.makeRandomFile("www/bar.bin", size: 400_000)
        // script(1) gives the client a pseudo-terminal; what it drew comes back on script's output.
        let command =
            "HAUL_SERVER=\(haul.baseURL) COLUMNS=100 \(haulPath) add '\(originURL("bar.bin", "rate=200000"))' --wait"
        let result = try execute("/usr/bin/script", ["-qefc", command, "/dev/null"])
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertTrue(result.stdout.contains("\rbar.bin  ["), result.stdout)
        XCTAssertTrue(result.stdout.contains("[" + String(repeating: "#", count: 20)), result.stdout)
        XCTAssertTrue(result.stdout.contains("100%"), result.stdout)
        XCTAssertTrue(result.stdout.contains("bar.bin: completed"), result.stdout)
    }

    func testAddWaitFailsWithTheReason() throws {
        let result = try haulCommand(["add", originURL("absent.bin"), "--wait"])
        XCTAssertEqual(result.status, 1, result.output)
        XCTAssertTrue(
            result.stderr.hasSuffix("haul: absent.bin failed: http_404: the server answered HTTP 404\n"),
            result.stderr)
    }

    func testProblemsAreShownWithTheirFields() throws {
        let result = try haulCommand(["add", "gopher://example.com/x", "--connections", "99"])
        XCTAssertEqual(result.status, 1, result.output)
        // Each problem once, on one line (the detail repeats the fields, so it is not printed beside them).
        XCTAssertEqual(
            result.stderr,
            "haul: url: scheme must be http, https, ftp, ftps or sftp, not gopher; connections: must be an "
                + "integer from 1 to 32\n")
        XCTAssertEqual(try api.get("/stats").json["downloads"] as? Int, 0)
    }

    func testListPauseResumeRemove() throws {
        let hash = try sandbox.makeRandomFile("www/cycle.bin", size: 50_000)
        let added = try haulCommand(["add", originURL("cycle.bin"), "--paused", "--filename", "renamed.bin"])
        XCTAssertEqual(added.status, 0, added.output)
        let id = added.stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let listed = try haulCommand(["ls"])
        XCTAssertEqual(listed.status, 0, listed.output)
        let lines = listed.stdout.split(separator: "\n")
        XCTAssertTrue(lines.first?.hasPrefix("ID ") == true, listed.stdout)
        // The id's first characters: enough to tell it apart, at least 6.
        XCTAssertTrue(
            lines.contains { $0.hasPrefix(String(id.prefix(6)) + " ") && $0.contains(" paused ") },
            listed.stdout)
        let json = try haulCommand(["ls", "--json", "--state", "paused"])
        let array = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]]
        XCTAssertEqual(array?.map { $0["id"] as? String }, [id])

        let resumed = try haulCommand(["resume", id])
        XCTAssertEqual(resumed.status, 0, resumed.output)
        XCTAssertTrue(resumed.stdout.hasPrefix("\(id) "), resumed.stdout)
        XCTAssertFalse(resumed.stdout.contains("paused"), resumed.stdout)
        try waitForState(id, "completed")
        XCTAssertEqual(try sha256(sandbox.file("downloads/renamed.bin")), hash)
        let paused = try haulCommand(["pause", id])
        XCTAssertEqual(paused.status, 1, "a completed download cannot be paused")
        XCTAssertFalse(paused.stderr.isEmpty)

        let removed = try haulCommand(["rm", id])
        XCTAssertEqual(removed.status, 0, removed.output)
        XCTAssertEqual(try api.get("/downloads/\(id)").status, 404)
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: sandbox.file("downloads/renamed.bin")),
            "rm keeps a finished file unless --delete-file")
        let again = try haulCommand(["rm", id])
        XCTAssertEqual(again.status, 1)
        XCTAssertTrue(again.stderr.contains(id), again.stderr)
    }

    func testWatchPrintsEveryChange() throws {
        _ = try sandbox.makeRandomFile("www/w.bin", size: 20_000)
        let output = sandbox.file("watch.out")
        FileManager.default.createFile(atPath: output, contents: nil)
        let watcher = Process()
        watcher.executableURL = URL(fileURLWithPath: haulPath)
        watcher.arguments = ["watch", "--server", haul.baseURL]
        watcher.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        try watcher.run()
        defer {
            watcher.terminate()
            watcher.waitUntilExit()
        }
        // The stream is open once the server counts it.
        try waitFor("the watcher to connect") { try self.api.get("/stats").json["event_streams"] as? Int == 1 }
        let id = try add(["url": originURL("w.bin")])
        try waitForState(id, "completed")
        XCTAssertEqual(try api.request("DELETE", "/downloads/\(id)").status, 204)
        try waitFor("the watcher to print the removal") {
            (try String(contentsOfFile: output, encoding: .utf8)).contains("\(id) removed")
        }
        let lines = try String(contentsOfFile: output, encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(lines.first, "\(id) queued w.bin")
        XCTAssertTrue(lines.contains("\(id) completed w.bin -> w.bin"), "\(lines)")

        // A server restart under the watcher: it reconnects with Last-Event-ID and goes on.
        let port = haul.port
        haul.stop(signal: SIGTERM)
        try startHaul(extra: ["--listen", "127.0.0.1:\(port)"])
        try waitFor("the watcher to reconnect") { try self.api.get("/stats").json["event_streams"] as? Int == 1 }
        let second = try add(["url": originURL("w.bin", "v=2"), "start_paused": true])
        try waitFor("the watcher to print the new download") {
            (try String(contentsOfFile: output, encoding: .utf8)).contains("\(second) paused w.bin")
        }
    }

    func testWatchingOneDownloadEndsWithIt() throws {
        _ = try sandbox.makeRandomFile("www/one.bin", size: 200_000)
        let id = try add(["url": originURL("one.bin", "rate=200000")])
        let result = try haulCommand(["watch", id])
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertTrue(result.stderr.hasSuffix("one.bin: completed, 195.3 KiB -> one.bin\n"), result.stderr)
        let finished = try haulCommand(["watch", id])
        XCTAssertEqual(finished.status, 0, "a finished download ends the watch at once: \(finished.output)")
    }

    func testEveryCommandHasItsHelpAndTheVersionIsTheSpecs() throws {
        for command in [
            "add", "ls", "pause", "resume", "rm", "watch", "settings", "category", "webhook", "stats", "health",
        ] {
            for arguments in [[command, "--help"], [command, "-h"], ["help", command]] {
                let result = try execute(haulPath, arguments)
                XCTAssertEqual(result.status, 0, "\(arguments): \(result.output)")
                XCTAssertTrue(result.stdout.hasPrefix("usage: haul \(command)"), "\(arguments): \(result.stdout)")
                XCTAssertTrue(result.stdout.contains("--server URL"), "\(arguments)")
                XCTAssertEqual(result.stderr, "")
            }
        }
        let add = try execute(haulPath, ["add", "--help"]).stdout
        for option in ["-i, --input FILE", "--wait", "--max-speed SIZE", "--header", "--paused"] {
            XCTAssertTrue(add.contains(option), "add --help lacks \(option)")
        }
        let serve = try execute(haulPath, ["help", "serve"])
        XCTAssertTrue(serve.stdout.hasPrefix("usage: haul serve"), serve.output)
        let version = try execute(haulPath, ["--version"])
        XCTAssertEqual(version.status, 0)
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let spec = try String(contentsOf: root.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        let specVersion = try XCTUnwrap(spec.split(separator: "\n").first { $0.hasPrefix("  version: ") })
        XCTAssertEqual(version.stdout, "haul \(specVersion.dropFirst("  version: ".count))\n")
        let usage = try execute(haulPath, ["--help"])
        XCTAssertEqual(usage.status, 0)
        for command in ["add URL...", "ls", "pause ID...", "watch [ID]", "serve"] {
            XCTAssertTrue(usage.stdout.contains(command), "haul --help lacks \(command)")
        }
        XCTAssertEqual(try execute(haulPath, []).status, 2, "no command is a usage error")
    }

    func testListSearchesAndSorts() throws {
        let small = try add(["url": originURL("small-ubuntu.iso"), "start_paused": true])
        let large = try add(["url": originURL("Large-Ubuntu.iso"), "start_paused": true])
        _ = try add(["url": originURL("debian.iso"), "start_paused": true])
        let result = try haulCommand(["ls", "--search", "UBUNTU", "--sort", "-name"])
        XCTAssertEqual(result.status, 0, result.output)
        // The header, a line each, the totals.
        let ids = result.stdout.split(separator: "\n").dropFirst().dropLast().map { String($0.prefix { $0 != " " }) }
        XCTAssertEqual(ids.count, 2, result.stdout)
        XCTAssertTrue(small.hasPrefix(ids.first ?? "-") && large.hasPrefix(ids.last ?? "-"), result.stdout)
        XCTAssertTrue(result.stdout.hasSuffix("\n2 downloads: 2 paused\n"), result.stdout)
        let colour = try haulCommand(["ls", "--sort", "colour"])
        XCTAssertEqual(colour.status, 2, "a usage error, said before anything is asked")
        XCTAssertEqual(
            colour.stderr,
            "haul: --sort takes created, name, size, progress, speed, queue (-KEY for "
                + "descending), not 'colour' (haul ls --help)\n")
    }

    func testGlobalOptionsComeBeforeTheCommand() throws {
        var environment = ProcessInfo.processInfo.environment
        environment["HAUL_SERVER"] = nil
        environment["HAUL_LISTEN"] = nil
        let id = try add(["url": originURL("g.bin"), "start_paused": true])
        let before = try execute(haulPath, ["--server", haul.baseURL, "ls"], environment: environment)
        XCTAssertEqual(before.status, 0, before.output)
        XCTAssertTrue(before.stdout.contains(String(id.prefix(6))), before.stdout)
        let equals = try execute(haulPath, ["--server=" + haul.baseURL, "rm", id], environment: environment)
        XCTAssertEqual(equals.status, 0, equals.output)
        XCTAssertEqual(equals.stdout, "\(id) removed\n")
        XCTAssertEqual(
            try execute(haulPath, ["--server", "http://127.0.0.1:1", "ls"], environment: environment).status,
            3)
    }

    func testOneBadIDDoesNotStopTheOthers() throws {
        let first = try add(["url": originURL("one.bin"), "start_paused": true])
        let second = try add(["url": originURL("two.bin"), "start_paused": true])
        let result = try haulCommand(["resume", first, "nosuchid", second])
        XCTAssertEqual(result.status, 1, result.output)
        XCTAssertEqual(
            result.stderr, "haul: nosuchid: no download's id starts with 'nosuchid' (haul ls lists them)\n",
            "printed once, and alone")
        let lines = result.stdout.split(separator: "\n")
        XCTAssertEqual(lines.count, 2, result.stdout)
        XCTAssertTrue(lines.first?.hasPrefix("\(first) ") ?? false, result.stdout)
        XCTAssertTrue(lines.last?.hasPrefix("\(second) ") ?? false, result.stdout)
        let removed = try haulCommand(["rm", "nosuchid", first, second])
        XCTAssertEqual(removed.status, 1, removed.output)
        XCTAssertEqual(removed.stdout, "\(first) removed\n\(second) removed\n")
        XCTAssertEqual(try api.get("/stats").json["downloads"] as? Int, 0)
    }

    func testAWaitToRetryIsShownWithItsReason() throws {
        let hash = try sandbox.makeRandomFile("www/busy.bin", size: 50_000)
        // Three 503s, each with Retry-After: 1: about three seconds of waiting to retry.
        let url = originURL("busy.bin", "fail=3&status=503")
        let wait = Process()
        wait.executableURL = URL(fileURLWithPath: haulPath)
        wait.arguments = ["add", url, "--wait"]
        wait.environment = ProcessInfo.processInfo.environment.merging(["HAUL_SERVER": haul.baseURL]) { _, new in new }
        let errors = Pipe()
        wait.standardError = errors
        wait.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        try wait.run()
        var listed = ""
        try waitFor("ls to show the wait", timeout: 10) {
            listed = try haulCommand(["ls"]).stdout
            return listed.contains(" retrying ")
        }
        // The state says it waits, the ETA column for how long, the name why (haul info has the whole reason).
        XCTAssertNotNil(
            listed.range(of: #" retrying .* [0-9]s busy\.bin \(http_503\)\n"#, options: .regularExpression),
            listed)
        wait.waitUntilExit()
        let progress = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(wait.terminationStatus, 0, progress)
        XCTAssertTrue(progress.contains("busy.bin: probing, retrying in "), progress)
        XCTAssertTrue(progress.contains(": http_503: the server answered HTTP 503"), progress)
        XCTAssertEqual(try sha256(sandbox.file("downloads/busy.bin")), hash)
    }

    func testMirrorsAreGivenWithTheDownload() throws {
        let added = try haulCommand([
            "add", originURL("m.bin"), "--paused", "--mirror", "http://127.0.0.1:9/m.bin",
            "--mirror", "http://127.0.0.1:10/m.bin",
        ])
        XCTAssertEqual(added.status, 0, added.output)
        let id = added.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let mirrors = try download(id)["mirrors"] as? [[String: Any]] ?? []
        XCTAssertEqual(
            mirrors.compactMap { $0["url"] as? String },
            ["http://127.0.0.1:9/m.bin", "http://127.0.0.1:10/m.bin"])
        XCTAssertEqual(
            try haulCommand([
                "add", originURL("a.bin"), originURL("b.bin"), "--mirror",
                "http://127.0.0.1:9/x",
            ]).status, 2, "a mirror is of one download")
    }

    func testCategoriesAreMadeUsedAndCleaned() throws {
        let made = try haulCommand([
            "category", "put", "films", "--directory", "media/films", "--connections", "2",
            "--max-speed", "1M",
        ])
        XCTAssertEqual(made.status, 0, made.output)
        XCTAssertEqual(made.stdout, "films            media/films  connections 2  max-speed 1.00 MiB/s\n")
        let hash = try sandbox.makeRandomFile("www/cli-film.bin", size: 200_000)
        let added = try haulCommand(["add", originURL("cli-film.bin"), "--category", "films", "--wait"])
        XCTAssertEqual(added.status, 0, added.output)
        XCTAssertEqual(try sha256(sandbox.file("downloads/media/films/cli-film.bin")), hash)
        _ = try add(["url": "http://127.0.0.1:9/other.bin", "start_paused": true])
        let listed = try haulCommand(["ls", "--category", "films"])
        XCTAssertTrue(listed.stdout.contains("cli-film.bin"), listed.stdout)
        XCTAssertFalse(listed.stdout.contains("other.bin"), listed.stdout)
        XCTAssertTrue(try haulCommand(["category", "ls"]).stdout.hasPrefix("films "))
        let cleaned = try haulCommand(["category", "clean", "films"])
        XCTAssertEqual(cleaned.status, 0, cleaned.output)
        XCTAssertTrue(cleaned.stdout.hasSuffix(" removed\n"), cleaned.stdout)
        XCTAssertEqual((try api.get("/downloads").json["downloads"] as? [[String: Any]])?.count, 1)
        XCTAssertEqual(try haulCommand(["category", "rm", "films"]).stdout, "films removed\n")
        XCTAssertEqual(try haulCommand(["add", originURL("cli-film.bin"), "--category", "films"]).status, 1)
        XCTAssertEqual(try haulCommand(["category", "put"]).status, 2)
    }

    func testWebhooksAreAddedListedAndRemoved() throws {
        let added = try haulCommand(["webhook", "add", "http://127.0.0.1:9/hook", "--events", "completed,failed"])
        XCTAssertEqual(added.status, 0, added.output)
        let words = added.stdout.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        XCTAssertEqual(words.count, 2, added.stdout)
        XCTAssertTrue(words.last?.hasPrefix("whsec_") ?? false, added.stdout)
        let listed = try haulCommand(["webhook", "ls"])
        XCTAssertTrue(listed.stdout.contains("http://127.0.0.1:9/hook  completed,failed"), listed.stdout)
        XCTAssertFalse(listed.stdout.contains("whsec_"), "the secret is shown once")
        XCTAssertEqual(try haulCommand(["webhook", "deliveries", words[0]]).status, 0)
        XCTAssertEqual(try haulCommand(["webhook", "rm", words[0]]).stdout, "\(words[0]) removed\n")
        XCTAssertEqual(try haulCommand(["webhook", "rm", words[0]]).status, 1, "gone")
        XCTAssertEqual(try haulCommand(["webhook", "add", "ftp://x/", "--events", "completed"]).status, 1)
        XCTAssertEqual(try haulCommand(["webhook", "frobnicate"]).status, 2)
    }

    func testStatsShowTheTotalsAndTheDisk() throws {
        _ = try add(["url": "http://127.0.0.1:9/later.bin", "start_paused": true])
        let shown = try haulCommand(["stats"])
        XCTAssertEqual(shown.status, 0, shown.output)
        XCTAssertTrue(shown.stdout.hasPrefix("downloads     1\n"), shown.stdout)
        XCTAssertTrue(shown.stdout.contains("paused        1\n"), shown.stdout)
        XCTAssertTrue(shown.stdout.contains(" usable for downloads ("), shown.stdout)
        let json = try haulCommand(["stats", "--json"])
        let stats = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        XCTAssertNotNil((stats?["disk"] as? [String: Any])?["free_bytes"] as? Int, json.stdout)
        XCTAssertEqual(try haulCommand(["stats", "extra"]).status, 2)
    }

    func testSettingsAreShownAndChanged() throws {
        let shown = try haulCommand(["settings"])
        XCTAssertEqual(shown.status, 0, shown.output)
        XCTAssertTrue(
            shown.stdout.hasPrefix("max-active                5\nmax-speed                 none\n"), shown.stdout)
        let changed = try haulCommand([
            "settings", "max-active=2", "max-speed=1.5M",
            "schedule=mon-fri 09:00-18:00 2M; sat,sun 00:00-24:00 0",
        ])
        XCTAssertEqual(changed.status, 0, changed.output)
        XCTAssertTrue(changed.stdout.contains("max-active                2 (default 5)\n"), changed.stdout)
        XCTAssertTrue(changed.stdout.contains("max-speed                 1.50 MiB/s (default none)\n"), changed.stdout)
        XCTAssertTrue(
            changed.stdout.contains(
                "schedule                  mon-fri 09:00-18:00 2.00 MiB/s; sat,sun "
                    + "00:00-24:00 none (default none)\n"), changed.stdout)
        let settings = try api.get("/settings").json
        XCTAssertEqual(settings["max_speed"] as? Int, 1_572_864)
        XCTAssertEqual(
            (settings["speed_schedule"] as? [[String: Any]])?.first?["days"] as? [String],
            ["mon", "tue", "wed", "thu", "fri"])
        let reset = try haulCommand(["settings", "max-active=default", "schedule=none", "--json"])
        XCTAssertEqual(reset.status, 0, reset.output)
        let json = try JSONSerialization.jsonObject(with: Data(reset.stdout.utf8)) as? [String: Any]
        XCTAssertEqual(json?["max_active"] as? Int, 5)
        XCTAssertEqual((json?["speed_schedule"] as? [Any])?.count, 0)
        for arguments in [
            ["settings", "max-active=lots"], ["settings", "colour=red"], ["settings", "max-active"],
            ["settings", "schedule=someday 9-5 fast"],
        ] {
            XCTAssertEqual(try haulCommand(arguments).status, 2, "\(arguments)")
        }
        let refused = try haulCommand(["settings", "max-active=0"])
        XCTAssertEqual(refused.status, 1)
        XCTAssertEqual(
            refused.stderr, "haul: max-active: must be an integer from 1 to 1000, or default\n",
            "in the command line's words")
    }

    func testSizesAreReadAsPeopleWriteThem() throws {
        for (text, bytes) in [
            ("1.5M", 1_572_864), ("10MB", 10_485_760), ("500k", 512_000), ("2048", 2048),
            ("1GiB", 1_073_741_824),
        ] {
            let result = try haulCommand(["add", originURL("s\(bytes).bin"), "--paused", "--max-speed", text])
            XCTAssertEqual(result.status, 0, result.output)
            let id = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            XCTAssertEqual(int(try download(id)["max_speed"]), Int64(bytes), text)
        }
        for text in ["fast", "1.5", "-1k", "1e3", "k", "1.2.3m"] {
            let result = try haulCommand(["add", originURL("bad.bin"), "--max-speed", text])
            XCTAssertEqual(result.status, 2, "\(text): \(result.output)")
        }
    }

    func testEveryOptionOfTheTableHasItsFlag() throws {
        let digest = "md5:" + String(repeating: "0", count: 32)
        let result = try haulCommand([
            "add", originURL("opts.bin"), "--paused", "--priority", "7", "--connections",
            "3", "--insecure", "--header", "X-Token: abc", "--checksum", digest,
        ])
        XCTAssertEqual(result.status, 0, result.output)
        let shown = try download(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        XCTAssertEqual(int(shown["priority"]), 7)
        XCTAssertEqual(int(shown["connections"]), 3)
        XCTAssertEqual(shown["insecure"] as? Bool, true)
        XCTAssertEqual(shown["state"] as? String, "paused")
        XCTAssertEqual(shown["checksum"] as? String, digest)
        XCTAssertNil(shown["headers"], "headers are never shown back")
        let two = try haulCommand(["add", originURL("a.bin"), originURL("b.bin"), "--checksum", "md5:00"])
        XCTAssertEqual(two.status, 2)
        XCTAssertTrue(two.stderr.contains("--checksum is for one URL, not 2"), two.stderr)
        let bad = try haulCommand(["add", originURL("a.bin"), "--priority", "high"])
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.stderr.contains("--priority takes a number, not 'high'"), bad.stderr)
    }

    func testSeveralURLsGoAsBatchesEachAnsweredOnItsOwn() throws {
        let hashes = try (0..<3).map { try sandbox.makeRandomFile("www/b\($0).bin", size: 100_000 + $0) }
        let result = try haulCommand(["add", originURL("b0.bin"), "gopher://nope/x", originURL("b1.bin"), "--wait"])
        XCTAssertEqual(result.status, 1, result.output)
        let ids = result.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(ids.count, 2, result.stdout)
        XCTAssertTrue(
            result.stderr.contains(
                "haul: gopher://nope/x: url: scheme must be http, https, ftp, ftps or sftp, not gopher\n"),
            result.stderr)
        XCTAssertTrue(result.stderr.contains("b0.bin: completed"), result.stderr)
        XCTAssertTrue(result.stderr.contains("b1.bin: completed"), result.stderr)
        XCTAssertEqual(try sha256(sandbox.file("downloads/b0.bin")), hashes[0])
        XCTAssertEqual(try sha256(sandbox.file("downloads/b1.bin")), hashes[1])

        // From standard input, comments and blank lines skipped; all good, so exit 0.
        let list = "# mirrors\n\n  \(originURL("b2.bin"))  \n\(originURL("b0.bin"))\n"
        let piped = try execute(
            haulPath, ["add", "-i", "-", "--paused"], input: Data(list.utf8),
            environment: ProcessInfo.processInfo.environment.merging(["HAUL_SERVER": haul.baseURL]) { _, new in new })
        XCTAssertEqual(piped.status, 0, piped.output)
        XCTAssertEqual(piped.stdout.split(separator: "\n").count, 2, piped.stdout)
        XCTAssertEqual(try api.get("/stats").json["downloads"] as? Int, 4)
        _ = hashes

        // A list longer than one batch goes as several: every URL added once, its id printed in order.
        let long = (0..<2_500).map { originURL("many/\($0).bin") }.joined(separator: "\n")
        let many = try execute(
            haulPath, ["add", "-i", "-", "--paused"], input: Data(long.utf8),
            environment: ProcessInfo.processInfo.environment.merging(["HAUL_SERVER": haul.baseURL]) { _, new in new })
        XCTAssertEqual(many.status, 0, String(many.stderr.prefix(500)))
        let manyIDs = many.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(manyIDs.count, 2_500)
        XCTAssertEqual(Set(manyIDs).count, 2_500)
        XCTAssertEqual(try api.get("/stats").json["downloads"] as? Int, 2_504)
        let last = try api.get("/downloads/\(manyIDs[2_499])").json
        XCTAssertEqual(last["url"] as? String, originURL("many/2499.bin"))
        XCTAssertEqual(last["state"] as? String, "paused")
    }

    func testTheBarFitsTheTerminalAndKeepsTheETA() throws {
        _ = try sandbox.makeRandomFile("www/narrow-terminal-file-with-a-long-name.bin", size: 600_000)
        // stty sets the pseudo-terminal's size, which the client reads with TIOCGWINSZ; COLUMNS is not set.
        let url = originURL("narrow-terminal-file-with-a-long-name.bin", "rate=150000")
        let command =
            "stty cols 72 rows 20; unset COLUMNS; HAUL_SERVER=\(haul.baseURL) \(haulPath) add '\(url)' "
            + "--wait --connections 1"
        let result = try execute("/usr/bin/script", ["-qefc", command, "/dev/null"])
        XCTAssertEqual(result.status, 0, result.output)
        // The terminal ends lines with CR LF, one Character to Swift: made LF first, so the bar's own CRs split.
        let frames = result.stdout.replacingOccurrences(of: "\r\n", with: "\n").split(separator: "\r")
            .map { $0.replacingOccurrences(of: "\u{1B}[K", with: "") }
            .filter { $0.contains("[") && $0.contains("]") }
        XCTAssertGreaterThan(frames.count, 2, result.stdout)
        for frame in frames {
            let line = frame.split(separator: "\n").first.map(String.init) ?? ""
            XCTAssertLessThanOrEqual(line.count, 71, "wider than the terminal: '\(line)'")
        }
        let withETA = frames.compactMap { $0.split(separator: "\n").first }.filter { $0.contains("  ETA ") }
        XCTAssertFalse(withETA.isEmpty, "no frame shows the ETA: \(frames)")
        for frame in withETA {
            XCTAssertNotNil(
                frame.range(of: #"ETA [0-9]+ (s|min [0-9]{2} s) *$"#, options: .regularExpression),
                "the ETA is cut: '\(frame)'")
        }
    }

    /// With only HAUL_LISTEN set (as in the container, whose HEALTHCHECK is `haul health`), the client finds the
    /// server at that address, a wildcard one on loopback; HAUL_SERVER and --server still come first.
    func testTheClientFindsTheServerThroughHAULLISTEN() throws {
        let port = try XCTUnwrap(URLComponents(string: haul.baseURL)?.port)
        var environment = ProcessInfo.processInfo.environment
        environment["HAUL_SERVER"] = nil
        for listen in ["127.0.0.1:\(port)", "0.0.0.0:\(port)"] {
            environment["HAUL_LISTEN"] = listen
            let result = try execute(haulPath, ["health"], environment: environment)
            XCTAssertEqual(result.status, 0, "HAUL_LISTEN=\(listen): \(result.output)")
            XCTAssertEqual(result.stdout, "ok\n")
        }
        environment["HAUL_LISTEN"] = "0.0.0.0:1"
        let elsewhere = try execute(haulPath, ["health"], environment: environment)
        XCTAssertEqual(elsewhere.status, 3, "no server on the port HAUL_LISTEN names")
        XCTAssertTrue(elsewhere.stderr.contains("http://127.0.0.1:1"), elsewhere.stderr)
        environment["HAUL_SERVER"] = haul.baseURL
        XCTAssertEqual(try execute(haulPath, ["health"], environment: environment).status, 0, "HAUL_SERVER wins")
        XCTAssertEqual(
            try execute(haulPath, ["health", "--server", "http://127.0.0.1:1"], environment: environment)
                .status, 3, "--server wins")
    }

    func testAnUnreachableServerAndBadUsageHaveTheirOwnStatus() throws {
        let healthy = try haulCommand(["health"])
        XCTAssertEqual(healthy.status, 0, healthy.output)
        XCTAssertEqual(healthy.stdout, "ok\n")
        XCTAssertEqual(try execute(haulPath, ["health", "--server", "http://127.0.0.1:1"]).status, 3)
        let unreachable = try execute(haulPath, ["ls", "--server", "http://127.0.0.1:1"])
        XCTAssertEqual(unreachable.status, 3)
        XCTAssertTrue(
            unreachable.stderr.hasPrefix("haul: cannot reach the server at http://127.0.0.1:1: "),
            unreachable.stderr)
        // A usage error is one line that says where the help is.
        for (arguments, message) in [
            (["add"], "haul: give at least one URL (or -i FILE) (haul add --help)"),
            (["ls", "--bogus"], "haul: unknown option --bogus (haul ls --help)"),
            (["pause"], "haul: give the id of at least one download, or all (haul pause --help)"),
            (["frobnicate"], "haul: unknown command 'frobnicate' (haul --help)"),
            (["add", "http://x/", "--connections"], "haul: --connections needs a value (N) (haul add --help)"),
            (["--bogus", "ls"], "haul: unknown option --bogus before the command (haul --help)"),
        ] {
            let result = try haulCommand(arguments)
            XCTAssertEqual(result.status, 2, "\(arguments): \(result.output)")
            XCTAssertEqual(result.stderr, message + "\n", "\(arguments)")
            XCTAssertEqual(result.stdout, "")
        }
    }
}

final class ClientTokenTests: HaulTestCase {
    let token = "client-test-token-abcdefgh"

    override var serveArguments: [String] { super.serveArguments + ["--token", token] }

    func testTheTokenComesFromTheFlagOrTheEnvironment() throws {
        XCTAssertEqual(
            try execute(buildDirectory + "/haul", ["health", "--server", haul.baseURL]).status, 0,
            "the container's health check needs no token")
        let bare = try execute(buildDirectory + "/haul", ["ls", "--server", haul.baseURL])
        XCTAssertEqual(bare.status, 1)
        XCTAssertTrue(bare.stderr.contains("HAUL_TOKEN"), bare.stderr)
        let flag = try execute(buildDirectory + "/haul", ["ls", "--server", haul.baseURL, "--token", token])
        XCTAssertEqual(flag.status, 0, flag.output)
        var environment = ProcessInfo.processInfo.environment
        environment["HAUL_TOKEN"] = token
        environment["HAUL_SERVER"] = haul.baseURL
        _ = try sandbox.makeRandomFile("www/t.bin", size: 1000)
        let added = try execute(
            buildDirectory + "/haul", ["add", originURL("t.bin"), "--wait"], environment: environment)
        XCTAssertEqual(added.status, 0, added.output)
    }
}
