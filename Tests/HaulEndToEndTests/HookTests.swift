import Foundation
import XCTest

/// The operator's hooks from the config file: a program run without a shell after a download completes (once its
/// file is in its completed folder) or fails, with the download in its environment and on its standard input; its
/// exit status in the resource; killed at its timeout; one at a time with --hook-concurrency 1; and one a kill -9
/// kept from running runs once after the restart.
final class HookTests: HaulTestCase {
    /// Outside the sandbox, which is made after the config must exist.
    private var hookDirectory: String!
    private var crashAt: String?

    override var serveEnvironment: [String: String]? {
        var environment = ProcessInfo.processInfo.environment
        environment["HAUL_CRASH_AT"] = crashAt
        // A server setting in the environment: the hook must not see it (a token would be one); nor the server's
        // other secrets (a database password, a proxy's credentials).
        environment["HAUL_LOG_LEVEL"] = "info"
        environment["PGPASSWORD"] = "pg-secret-for-hooks"
        environment["https_proxy"] = "http://user:proxy-secret@127.0.0.1:9"
        environment["LANG"] = "C.UTF-8"
        return environment
    }

    override var serveArguments: [String] {
        super.serveArguments + [
            "--config", hookDirectory + "/haul.toml", "--hook-timeout", "1",
            "--hook-concurrency", "1",
        ]
    }

    override func setUpWithError() throws {
        hookDirectory = NSTemporaryDirectory() + "haul-hooks-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: hookDirectory, withIntermediateDirectories: true)
        let script = hookDirectory + "/hook.sh"
        // Records its arguments, the HAUL_ variables and its input in a file of its own per download, then acts
        // as the file's name says: exit 3, sleep past the timeout, or take a second.
        try """
        #!/bin/sh
        out="$1/$HAUL_ID.$HAUL_STATE"
        shift
        { echo "start $(date +%s.%N)"
          for a in "$@"; do echo "arg [$a]"; done
          env | sort
          echo "stdin $(cat)"
        } >> "$out"
        echo "hook says hello"
        case "$HAUL_NAME" in
          exit3*) exit 3 ;;
          sleep*) sleep 30 ;;
          second*) sleep 1 ;;
        esac
        echo "end $(date +%s.%N)" >> "$out"
        """.write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o755)
        try """
        on-complete = ["\(script)", "\(hookDirectory!)", "one, two", "$HOME"]
        on-failed = ["\(script)", "\(hookDirectory!)"]
        """.write(toFile: hookDirectory + "/haul.toml", atomically: true, encoding: .utf8)
        try super.setUpWithError()
    }

    override func tearDownWithError() throws {
        try super.tearDownWithError()
        try? FileManager.default.removeItem(atPath: hookDirectory)
    }

    private func record(_ id: String, _ state: String) -> String {
        (try? String(contentsOfFile: "\(hookDirectory!)/\(id).\(state)", encoding: .utf8)) ?? ""
    }

    /// Waits for the resource's hook to have run.
    @discardableResult
    private func waitForHook(_ id: String) throws -> [String: Any] {
        var hook: [String: Any] = [:]
        try waitFor("the hook of \(id)") {
            hook = try self.download(id)["hook"] as? [String: Any] ?? [:]
            return hook["pending"] as? Bool == false
        }
        return hook
    }

    func testACompletedDownloadsHookGetsItsArgumentsEnvironmentAndInput() throws {
        XCTAssertEqual(try api.request("PUT", "/categories/tv", json: ["completed_directory": "done"]).status, 201)
        let hash = try sandbox.makeRandomFile("www/show.bin", size: 50_000)
        let id = try add(["url": originURL("show.bin"), "category": "tv"])
        try waitForState(id, "completed")
        let hook = try waitForHook(id)
        XCTAssertEqual(hook["status"] as? Int, 0, "\(hook)")
        XCTAssertNotNil(hook["at"] as? String)
        let text = record(id, "completed")
        // Argument by argument, as written: no shell split "one, two" or expanded $HOME.
        XCTAssertTrue(text.contains("arg [one, two]\narg [$HOME]\n"), text)
        let path = sandbox.file("downloads/done/show.bin")
        XCTAssertEqual(try sha256(path), hash)
        for line in [
            "HAUL_ID=\(id)", "HAUL_STATE=completed", "HAUL_NAME=show.bin", "HAUL_SIZE=50000",
            "HAUL_CATEGORY=tv", "HAUL_URL=\(originURL("show.bin"))", "HAUL_PATH=\(path)", "HAUL_ERROR=",
        ] {
            XCTAssertTrue(text.contains(line + "\n"), "\(line) in \(text)")
        }
        XCTAssertFalse(text.contains("HAUL_LOG_LEVEL"), "the server's own settings stay out of a hook's environment")
        XCTAssertFalse(text.contains("pg-secret-for-hooks"), text)
        XCTAssertFalse(text.contains("proxy-secret"), text)
        XCTAssertTrue(text.contains("\nLANG=C.UTF-8\n"), text)
        XCTAssertTrue(text.contains("\nPATH="), text)
        let input = try XCTUnwrap(text.split(separator: "\n").first { $0.hasPrefix("stdin ") })
        let json = try JSONSerialization.jsonObject(with: Data(input.dropFirst(6).utf8)) as? [String: Any]
        XCTAssertEqual(json?["id"] as? String, id)
        XCTAssertEqual(json?["path"] as? String, "done/show.bin")
        // Its output is in the server's log.
        let log = try String(contentsOfFile: sandbox.file("haul.log"), encoding: .utf8)
        XCTAssertTrue(log.contains("hook says hello"), log)
    }

    func testAFailedHookAndOneThatOutstaysItsTimeoutAreShownAsSuch() throws {
        _ = try sandbox.makeRandomFile("www/exit3.bin", size: 1000)
        _ = try sandbox.makeRandomFile("www/sleep.bin", size: 1000)
        let failing = try add(["url": originURL("exit3.bin")])
        let hook = try waitForHook(failing)
        XCTAssertEqual(hook["status"] as? Int, 3, "\(hook)")
        let sleeping = try add(["url": originURL("sleep.bin")])
        let killed = try waitForHook(sleeping)
        XCTAssertTrue(killed["status"] is NSNull, "\(killed)")
        XCTAssertTrue((killed["error"] as? String)?.contains("timed out") == true, "\(killed)")
        XCTAssertFalse(record(sleeping, "completed").contains("end "), "killed before it ended")
        // A failed download runs on-failed, with its error.
        let missing = try add(["url": originURL("nothere.bin")])
        try waitForState(missing, "failed")
        XCTAssertEqual(try waitForHook(missing)["status"] as? Int, 0)
        XCTAssertTrue(record(missing, "failed").contains("HAUL_ERROR=http_404\n"), record(missing, "failed"))
    }

    func testHooksRunOneAtATimeWithConcurrencyOne() throws {
        _ = try sandbox.makeRandomFile("www/second-a.bin", size: 1000)
        _ = try sandbox.makeRandomFile("www/second-b.bin", size: 1000)
        let first = try add(["url": originURL("second-a.bin")])
        let second = try add(["url": originURL("second-b.bin")])
        try waitForHook(first)
        try waitForHook(second)
        func times(_ id: String) -> (start: Double, end: Double) {
            let lines = record(id, "completed").split(separator: "\n")
            let start = lines.first { $0.hasPrefix("start ") }.flatMap { Double($0.dropFirst(6)) } ?? 0
            let end = lines.first { $0.hasPrefix("end ") }.flatMap { Double($0.dropFirst(4)) } ?? 0
            return (start, end)
        }
        let (a, b) = (times(first), times(second))
        XCTAssertTrue(a.end <= b.start || b.end <= a.start, "they overlapped: \(a) \(b)")
    }

    func testOnlyTheConfigFileNamesAHook() throws {
        let flagged = try execute(buildDirectory + "/haul", ["serve", "--on-complete", "/bin/true"])
        XCTAssertNotEqual(flagged.status, 0)
        XCTAssertTrue(flagged.stderr.contains("unknown option --on-complete"), flagged.stderr)
        let relative = hookDirectory + "/relative.toml"
        try "on-complete = [\"notify\", \"--done\"]\n".write(toFile: relative, atomically: true, encoding: .utf8)
        let refused = try execute(buildDirectory + "/haul", ["serve", "--config", relative])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("absolute path"), refused.stderr)
        // Neither REST nor the aria2 front takes one.
        XCTAssertEqual(
            try api.request("POST", "/downloads", json: ["url": originURL("x"), "on_complete": "/bin/sh"])
                .status, 422)
        let rpc = try api.request(
            "POST", "/jsonrpc",
            json: [
                "jsonrpc": "2.0", "id": 1, "method": "aria2.addUri",
                "params": [[originURL("x")], ["on-download-complete": "/bin/sh"]],
            ])
        XCTAssertNotNil(rpc.json["error"], rpc.text)
    }

    func testAHookAKillKeptFromRunningRunsOnceAfterTheRestart() throws {
        haul.stop(signal: SIGKILL)
        crashAt = "hook-pending"
        try startHaul()
        _ = try sandbox.makeRandomFile("www/late.bin", size: 20_000)
        let reply = try api.request("POST", "/downloads", json: ["url": originURL("late.bin")])
        let id = try XCTUnwrap(reply.json["id"] as? String)
        try waitFor("haul to die before the hook") { !self.haul.isRunning }
        XCTAssertEqual(record(id, "completed"), "", "the hook must not have run yet")
        crashAt = nil
        try startHaul()
        XCTAssertEqual(try waitForHook(id)["status"] as? Int, 0)
        // Restarted once more: it does not run again.
        let ran = try download(id)["hook"] as? [String: Any]
        haul.stop(signal: SIGTERM)
        try startHaul()
        // A hook still due is stored as pending before it runs: none is, and the last run is the same one.
        let after = try download(id)
        XCTAssertEqual(after["state"] as? String, "completed")
        let hook = after["hook"] as? [String: Any]
        XCTAssertEqual(hook?["pending"] as? Bool, false, "\(after)")
        XCTAssertEqual(hook?["at"] as? String, ran?["at"] as? String)
        XCTAssertEqual(record(id, "completed").components(separatedBy: "start ").count - 1, 1, record(id, "completed"))
    }
}
