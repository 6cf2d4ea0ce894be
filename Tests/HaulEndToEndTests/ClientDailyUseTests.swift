import Foundation
import XCTest

/// The client as transmission-remote's and aria2's users reach for it every day: several bars on a real terminal
/// (tmux, 70 and 120 columns), a server restarted under them, Ctrl-C; ids by their first characters, `all`, states
/// and categories; `info`, `set`, `ls` that fits 80 columns; and errors in the user's words.
final class ClientDailyUseTests: HaulTestCase {
    override var serveArguments: [String] { super.serveArguments + ["--min-split-size", "256k"] }

    /// The lines of a screen that are bars: `name [###---] ...`.
    private func bars(_ screen: [String]) -> [String] {
        screen.filter { $0.contains(" [") && $0.contains("]") && !$0.hasPrefix("haul:") }
    }

    func testSeveralDownloadsDrawABarEachAndATotalThatFitTheTerminal() throws {
        guard TerminalSession.available else { throw XCTSkip("tmux is not installed (make deps)") }
        let files = [
            ("alpha.iso", 1_200_000), ("beta.bin", 500_000), ("a-file-with-a-rather-long-name.tar.gz", 300_000),
        ]
        var hashes: [String: String] = [:]
        for (name, size) in files { hashes[name] = try sandbox.makeRandomFile("www/" + name, size: size) }
        for columns in [70, 120] {
            let urls = files.map { "'" + originURL($0.0, "rate=250000&width=\(columns)") + "'" }.joined(separator: " ")
            let session = try TerminalSession(
                "HAUL_SERVER=\(haul.baseURL) \(haulPath) add \(urls) --wait "
                    + "--connections 1", columns: columns)
            // On the way: a bar a download and the total under them, each inside the terminal, the bars ending in
            // one column; nothing else on the screen but the ids printed first.
            let running = try session.wait(for: "bars on the way at \(columns) columns") { screen in
                let block = bars(screen)
                return block.count == 4 && block[3].hasPrefix("total ") && block.contains { $0.contains("/s") }
            }
            let block = bars(running)
            XCTAssertEqual(
                Set(block.map { line in line.firstIndex(of: "]").map { line.distance(from: line.startIndex, to: $0) } })
                    .count, 1,
                "the bars end in one column:\n" + block.joined(separator: "\n"))
            for line in running where !line.isEmpty {
                XCTAssertLessThan(line.count, columns, "wider than the terminal: '\(line)'")
                XCTAssertTrue(
                    block.contains(line)
                        || line.range(of: "^[0-9a-z]{15}$", options: .regularExpression)
                            != nil,
                    "a line that is no bar and no id (wrapped?): '\(line)'")
            }
            XCTAssertTrue(block[0].hasPrefix("alpha.iso "), block[0])
            XCTAssertTrue(
                block[2].hasPrefix("a-file-with") && block[2].contains("… ["),
                "cut to fit, from its start: \(block[2])")
            let done = try session.wait(for: "the end at \(columns) columns") { $0.contains("exit=0") }
            XCTAssertTrue(done.contains("3 of 3 completed"), done.joined(separator: "\n"))
            // Under 100 columns the numbers are in their short forms.
            let count = columns < 100 ? "total 3/3 " : "3 of 3 done"
            XCTAssertTrue(bars(done).last?.contains(count) == true, done.joined(separator: "\n"))
            XCTAssertEqual(bars(done).filter { $0.contains("100%") }.count, 4, done.joined(separator: "\n"))
            session.stop()
            for (name, _) in files { XCTAssertEqual(try sha256(sandbox.file("downloads/" + name)), hashes[name]) }
            XCTAssertEqual(try api.request("DELETE", "/downloads?state=completed&delete_file=true").status, 200)
        }
    }

    func testARestartIsToldOnALineOfItsOwnAndCtrlCLeavesTheDownloadsRunning() throws {
        guard TerminalSession.available else { throw XCTSkip("tmux is not installed (make deps)") }
        _ = try sandbox.makeRandomFile("www/slow-a.bin", size: 3_000_000)
        _ = try sandbox.makeRandomFile("www/slow-b.bin", size: 3_000_000)
        let urls = ["slow-a.bin", "slow-b.bin"].map { "'" + originURL($0, "rate=100000") + "'" }.joined(separator: " ")
        let session = try TerminalSession(
            "HAUL_SERVER=\(haul.baseURL) \(haulPath) add \(urls) --wait "
                + "--connections 1", columns: 100)
        try session.wait(for: "the bars") { bars($0).count == 3 }
        let port = haul.port
        haul.stop(signal: SIGTERM)
        try startHaul(extra: ["--listen", "127.0.0.1:\(port)"])
        let after = try session.wait(for: "the notices") { screen in
            screen.contains("haul: reconnected") && bars(screen).count == 3
        }
        XCTAssertTrue(
            after.contains("haul: lost the event stream from \(haul.baseURL); reconnecting"),
            "the notice, alone on its line:\n" + after.joined(separator: "\n"))
        // The notices come before the block, which is drawn again under them.
        let notice = try XCTUnwrap(after.firstIndex(of: "haul: reconnected"))
        XCTAssertTrue(after[(notice + 1)...].contains { $0.hasPrefix("total ") }, after.joined(separator: "\n"))

        try session.press("C-c")
        let stopped = try session.wait(for: "Ctrl-C's words") { $0.contains("exit=130") }
        let said = stopped.joined(separator: " ").replacingOccurrences(of: "  ", with: " ")
        XCTAssertTrue(said.contains("haul: stopped following; the 2 downloads go on on the server"), said)
        XCTAssertTrue(said.contains("haul ls"), said)
        let downloads = try api.get("/downloads").json["downloads"] as? [[String: Any]] ?? []
        XCTAssertEqual(downloads.count, 2)
        for d in downloads {
            XCTAssertNotEqual(d["state"] as? String, "paused", "Ctrl-C stops following, not the download")
        }
    }

    func testIDsByTheirFirstCharactersAllAndStatesOfACategory() throws {
        XCTAssertEqual(try api.request("PUT", "/categories/films", json: [:]).status, 201)
        _ = try sandbox.makeRandomFile("www/f1.bin", size: 20_000)
        _ = try sandbox.makeRandomFile("www/f2.bin", size: 20_000)
        _ = try sandbox.makeRandomFile("www/slow.bin", size: 2_000_000)
        let films = try ["f1.bin", "f2.bin"].map { try add(["url": originURL($0), "category": "films"]) }
        for id in films { try waitForState(id, "completed") }
        // Enough others that some first characters are shared (40 ids, 32 characters).
        let list = (0..<40).map { originURL("many/\($0).bin") }.joined(separator: "\n")
        let many = try execute(
            haulPath, ["add", "-i", "-", "--paused"], input: Data(list.utf8),
            environment: ProcessInfo.processInfo.environment.merging(["HAUL_SERVER": haul.baseURL]) { _, new in new })
        XCTAssertEqual(many.status, 0, many.output)
        let ids = many.stdout.split(separator: "\n").map(String.init) + films

        // The first characters that only one id starts with name it.
        let target = ids[0]
        let prefix = try XCTUnwrap(
            (1...15).lazy.map { String(target.prefix($0)) }
                .first { p in ids.filter { $0.hasPrefix(p) }.count == 1 })
        let info = try haulCommand(["info", prefix])
        XCTAssertEqual(info.status, 0, info.output)
        XCTAssertTrue(info.stdout.hasPrefix("id            \(target)\n"), info.stdout)
        // Characters more than one id starts with name none, and say so.
        let shared = try XCTUnwrap(Dictionary(grouping: ids) { String($0.prefix(1)) }.first { $0.value.count > 1 }?.key)
        let ambiguous = try haulCommand(["rm", shared])
        XCTAssertEqual(ambiguous.status, 1)
        XCTAssertTrue(ambiguous.stderr.contains("'\(shared)' starts more than one id"), ambiguous.stderr)
        XCTAssertTrue(ambiguous.stderr.contains("give more of it"), ambiguous.stderr)
        XCTAssertEqual(try api.get("/stats").json["downloads"] as? Int, 42, "nothing removed")

        // A completed download is said to be so.
        let completed = try haulCommand(["resume", String(films[0].prefix(12))])
        XCTAssertEqual(completed.status, 1)
        XCTAssertEqual(
            completed.stderr,
            "haul: \(films[0].prefix(12)): f1.bin is completed already: there is nothing "
                + "to resume\n")

        // all: every download the command applies to.
        let slow = try add(["url": originURL("slow.bin", "rate=100000")])
        try waitForState(slow, "downloading")
        let paused = try haulCommand(["pause", "all"])
        XCTAssertEqual(paused.status, 0, paused.output)
        XCTAssertEqual(paused.stdout, "\(slow) paused slow.bin\n")
        XCTAssertEqual(try download(slow)["state"] as? String, "paused")

        // By state and category: the completed films go, their files stay; then all the rest.
        let cleaned = try haulCommand(["rm", "--state", "completed", "--category", "films"])
        XCTAssertEqual(cleaned.status, 0, cleaned.output)
        XCTAssertEqual(Set(cleaned.stdout.split(separator: "\n").map(String.init)), Set(films.map { "\($0) removed" }))
        XCTAssertTrue(FileManager.default.fileExists(atPath: sandbox.file("downloads/films/f1.bin")))
        XCTAssertEqual(try api.get("/stats").json["downloads"] as? Int, 41)
        XCTAssertEqual(try haulCommand(["rm", "all", "x"]).status, 2, "all stands alone")
        XCTAssertEqual(try haulCommand(["rm", "--state", "bogus"]).status, 2)
        let everything = try haulCommand(["rm", "all"])
        XCTAssertEqual(everything.status, 0, everything.output)
        XCTAssertEqual(try api.get("/stats").json["downloads"] as? Int, 0)
    }

    func testInfoSetAndAListThatFits80Columns() throws {
        XCTAssertEqual(try api.request("PUT", "/categories/films", json: [:]).status, 201)
        let hook = try api.request("POST", "/webhooks", json: ["url": originURL("hook"), "events": ["completed"]])
        XCTAssertEqual(hook.status, 201)
        _ = try sandbox.makeRandomFile("www/a-long-name-for-a-film-that-does-not-fit.mkv", size: 600_000)
        let film = try add([
            "url": originURL("a-long-name-for-a-film-that-does-not-fit.mkv"), "category": "films", "tags": "hd, new",
        ])
        let missing = try add(["url": originURL("missing.iso")])
        try waitForState(film, "completed")
        try waitForState(missing, "failed")
        let first = try add(["url": originURL("one.bin"), "start_paused": true])
        let second = try add(["url": originURL("two.bin"), "start_paused": true])

        // info: everything, the whole error and what the webhook was sent among it.
        try waitFor("the webhook's attempt") {
            ((try self.api.get("/downloads/\(film)/deliveries").json["deliveries"] as? [[String: Any]])?.first?[
                "attempts"] as? Int ?? 0) > 0
        }
        let info = try haulCommand(["info", film])
        XCTAssertEqual(info.status, 0, info.output)
        for expected in [
            "state         completed",
            "category      films", "tags          hd, new",
            "path          films/a-long-name-for-a-film-that-does-not-fit.mkv",
            "url           \(originURL("a-long-name-for-a-film-that-does-not-fit.mkv"))",
            "segments", ": done", "completed     20", "webhooks      1 sent", "completed to ",
        ] {
            XCTAssertTrue(info.stdout.contains(expected), "'\(expected)' in:\n\(info.stdout)")
        }
        let failed = try haulCommand(["info", missing])
        XCTAssertTrue(failed.stdout.contains("error         http_404: the server answered HTTP 404\n"), failed.stdout)

        // set: speed, connections, priority; a place in the queue.
        let set = try haulCommand(["set", second, "--max-speed", "1M", "--connections", "4", "--priority", "5"])
        XCTAssertEqual(set.status, 0, set.output)
        XCTAssertEqual(set.stdout, "\(second) paused two.bin: priority 5, 4 connections, max speed 1.00 MiB/s\n")
        let changed = try download(second)
        XCTAssertEqual(changed["max_speed"] as? Int, 1 << 20)
        XCTAssertEqual(changed["connections"] as? Int, 4)
        let moved = try haulCommand(["set", first, "--position", "top"])
        XCTAssertEqual(moved.status, 0, moved.output)
        XCTAssertTrue(
            moved.stdout.contains("priority 5") && moved.stdout.hasSuffix("place 0 in the queue\n"),
            "moved above a priority 5, it takes it: \(moved.stdout)")
        let queue = try api.get("/downloads?state=paused&sort=queue").json["downloads"] as? [[String: Any]]
        XCTAssertEqual(queue?.compactMap { $0["id"] as? String }, [first, second])
        XCTAssertEqual(try haulCommand(["set", first]).status, 2, "nothing to change")
        XCTAssertEqual(try haulCommand(["set", film, "--position", "top"]).status, 1, "a completed one has no place")

        // ls in 80 and 70 columns: the ids' first characters (enough to tell them apart, as the help promises), an
        // ETA and a category column, a failure's code where a speed would be, names cut to fit, the totals under.
        for columns in [80, 70] {
            let list = try haulCommand(["ls"], environment: ["COLUMNS": String(columns)])
            XCTAssertEqual(list.status, 0, list.output)
            let lines = list.stdout.split(separator: "\n").map(String.init)
            XCTAssertEqual(lines.count, 6, list.stdout)
            for line in lines { XCTAssertLessThan(line.count, columns, "'\(line)'") }
            XCTAssertNotNil(
                lines[0].range(
                    of: "^ID +STATE +DONE +SIZE +SPEED +ETA +CAT(EGORY)? +NAME$",
                    options: .regularExpression), lines[0])
            let short = try XCTUnwrap(lines[1].split(separator: " ").first.map(String.init))
            XCTAssertTrue(short.count >= 6 && short.count < film.count, "short ids: \(list.stdout)")
            let filmLine = try XCTUnwrap(lines.first { $0.hasPrefix(String(film.prefix(short.count))) })
            XCTAssertTrue(
                filmLine.contains(" films ") && filmLine.contains("a-long") && filmLine.hasSuffix("…"),
                filmLine)
            let missingLine = try XCTUnwrap(lines.first { $0.hasPrefix(String(missing.prefix(short.count))) })
            XCTAssertTrue(
                missingLine.contains(" failed ") && missingLine.contains(" http_404 ")
                    && missingLine.contains("missing.iso"), missingLine)
            XCTAssertEqual(lines.last, "4 downloads: 2 paused, 1 completed, 1 failed")
            // The short id is taken wherever an id is.
            XCTAssertEqual(try haulCommand(["info", String(missing.prefix(short.count))]).status, 0)
        }
        let bogus = try haulCommand(["ls", "--state", "bogus"])
        XCTAssertEqual(bogus.status, 2)
        XCTAssertTrue(
            bogus.stderr.contains("no state 'bogus'") && bogus.stderr.hasSuffix("(haul ls --help)\n"),
            bogus.stderr)

        // Waiting to retry: a state of the list of its own.
        _ = try sandbox.makeRandomFile("www/busy.bin", size: 10_000)
        let busy = try add(["url": originURL("busy.bin", "fail=3&status=503")])
        var retrying = ""
        try waitFor("ls --state retrying to list it") {
            retrying = try self.haulCommand(["ls", "--state", "retrying"]).stdout
            return retrying.contains(String(busy.prefix(6)))
        }
        XCTAssertTrue(retrying.contains(" retrying ") && retrying.contains("(http_503)"), retrying)
        XCTAssertFalse(retrying.contains(String(first.prefix(6))), "only those waiting to try again: \(retrying)")

        // The webhook's deliveries: a header, then each with its time.
        let hookID = try XCTUnwrap(hook.json["id"] as? String)
        let deliveries = try haulCommand(["webhook", "deliveries", hookID, "--limit", "1"])
        XCTAssertEqual(deliveries.status, 0, deliveries.output)
        let rows = deliveries.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(rows.count, 2, deliveries.stdout)
        XCTAssertTrue(rows[0].hasPrefix("TIME "), rows[0])
        XCTAssertNotNil(
            rows[1].range(
                of: "^20[0-9]{2}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} completed ",
                options: .regularExpression), rows[1])
        XCTAssertTrue(rows[1].contains(film), rows[1])
    }

    func testErrorsAreInTheUsersWords() throws {
        let setting = try haulCommand(["settings", "max-active=0"])
        XCTAssertEqual(setting.status, 1)
        XCTAssertEqual(setting.stderr, "haul: max-active: must be an integer from 1 to 1000, or default\n")
        let name = try haulCommand(["category", "put", "bad/name"])
        XCTAssertEqual(name.status, 2)
        XCTAssertEqual(
            name.stderr,
            "haul: 'bad/name' cannot be a category's name: it must be 1 to 64 letters, "
                + "digits, '-', '_' or '.', starting with a letter or digit (haul category --help)\n")
        // An empty HAUL_SERVER (a script's `HAUL_SERVER=`) is no setting: HAUL_LISTEN, here this server's, is used.
        var environment = ProcessInfo.processInfo.environment
        environment["HAUL_SERVER"] = ""
        environment["HAUL_LISTEN"] = "127.0.0.1:\(haul.port)"
        let empty = try execute(haulPath, ["ls"], environment: environment)
        XCTAssertEqual(empty.status, 0, empty.output)
        XCTAssertTrue(empty.stdout.hasPrefix("no downloads") || empty.stdout.hasPrefix("ID "), empty.stdout)
        // A URL that is no Haul server (the test origin) is said to be none.
        let elsewhere = try haulCommand(["ls"], environment: ["HAUL_SERVER": origin.baseURL])
        XCTAssertEqual(elsewhere.status, 1)
        XCTAssertTrue(
            elsewhere.stderr.contains(
                "\(origin.baseURL) answered HTTP 404, and not as Haul does: it is not "
                    + "a Haul server"), elsewhere.stderr)
        for (arguments, command) in [
            (["set", "x"], "set"), (["pause"], "pause"), (["add"], "add"),
            (["webhook", "deliveries", "x", "--limit", "0"], "webhook"),
        ] {
            let usage = try haulCommand(arguments)
            XCTAssertEqual(usage.status, 2, "\(arguments)")
            XCTAssertTrue(usage.stderr.hasSuffix("(haul \(command) --help)\n"), "\(arguments): \(usage.stderr)")
        }
    }
}
