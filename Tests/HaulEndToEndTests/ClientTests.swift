import Foundation
import XCTest

/// The command-line client (`haul add|ls|pause|resume|rm|watch`) against a live server, as a user runs it.
final class ClientTests: HaulTestCase {
    private var haulPath: String { buildDirectory + "/haul" }

    /// Runs `haul ARGS --server <this test's server>`.
    private func haulCommand(_ arguments: [String], environment: [String: String] = [:]) throws -> CommandResult {
        var env = ProcessInfo.processInfo.environment
        env["HAUL_SERVER"] = haul.baseURL
        env.merge(environment) { _, new in new }
        return try execute(haulPath, arguments, environment: env)
    }

    func testAddWaitFollowsTheDownloadToItsEndInPlainLines() throws {
        let hash = try sandbox.makeRandomFile("www/plain.bin", size: 600_000)
        let result = try haulCommand(["add", originURL("plain.bin", "rate=300000"), "--wait", "--connections", "1"])
        XCTAssertEqual(result.status, 0, result.output)
        let id = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(id.count, 15, result.stdout)
        // Not a terminal: lines, no carriage returns, at least one with a percentage on the way.
        XCTAssertFalse(result.stderr.contains("\r"))
        XCTAssertTrue(result.stderr.contains("plain.bin: downloading"), result.stderr)
        XCTAssertTrue(result.stderr.range(of: #"downloading [0-9]+% \("#, options: .regularExpression) != nil,
                      result.stderr)
        XCTAssertTrue(result.stderr.hasSuffix("plain.bin: completed, 585.9 KiB -> plain.bin\n"), result.stderr)
        XCTAssertEqual(try sha256(sandbox.file("downloads/plain.bin")), hash)
        XCTAssertEqual(try download(id)["state"] as? String, "completed")
    }

    func testAddWaitOnATerminalDrawsABar() throws {
        _ = try sandbox.makeRandomFile("www/bar.bin", size: 400_000)
        // script(1) gives the client a pseudo-terminal; what it drew comes back on script's output.
        let command = "HAUL_SERVER=\(haul.baseURL) COLUMNS=100 \(haulPath) add '\(originURL("bar.bin", "rate=200000"))' --wait"
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
        XCTAssertTrue(result.stderr.hasSuffix("haul: absent.bin failed: http_404: the server answered HTTP 404\n"),
                      result.stderr)
    }

    func testProblemsAreShownWithTheirFields() throws {
        let result = try haulCommand(["add", "ftp://example.com/x", "--connections", "99"])
        XCTAssertEqual(result.status, 1, result.output)
        XCTAssertTrue(result.stderr.contains("\n  url: "), result.stderr)
        XCTAssertTrue(result.stderr.contains("\n  connections: "), result.stderr)
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
        XCTAssertTrue(lines.contains { $0.hasPrefix(id) && $0.contains(" paused ") }, listed.stdout)
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
        XCTAssertTrue(FileManager.default.fileExists(atPath: sandbox.file("downloads/renamed.bin")),
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
        XCTAssertEqual(try execute(haulPath, ["health", "--server", "http://127.0.0.1:1"], environment: environment)
            .status, 3, "--server wins")
    }

    func testAnUnreachableServerAndBadUsageHaveTheirOwnStatus() throws {
        let healthy = try haulCommand(["health"])
        XCTAssertEqual(healthy.status, 0, healthy.output)
        XCTAssertEqual(healthy.stdout, "ok\n")
        XCTAssertEqual(try execute(haulPath, ["health", "--server", "http://127.0.0.1:1"]).status, 3)
        let unreachable = try execute(haulPath, ["ls", "--server", "http://127.0.0.1:1"])
        XCTAssertEqual(unreachable.status, 3)
        XCTAssertTrue(unreachable.stderr.hasPrefix("haul: cannot reach the server at http://127.0.0.1:1: "),
                      unreachable.stderr)
        for arguments in [["add"], ["ls", "--bogus"], ["pause"], ["frobnicate"], ["add", "http://x/", "--connections"]] {
            let result = try haulCommand(arguments)
            XCTAssertEqual(result.status, 2, "\(arguments): \(result.output)")
            XCTAssertTrue(result.stderr.contains("usage: haul"), "\(arguments)")
        }
    }
}

final class ClientTokenTests: HaulTestCase {
    let token = "client-test-token-abcdefgh"

    override var serveArguments: [String] { super.serveArguments + ["--token", token] }

    func testTheTokenComesFromTheFlagOrTheEnvironment() throws {
        XCTAssertEqual(try execute(buildDirectory + "/haul", ["health", "--server", haul.baseURL]).status, 0,
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
        let added = try execute(buildDirectory + "/haul", ["add", originURL("t.bin"), "--wait"], environment: environment)
        XCTAssertEqual(added.status, 0, added.output)
    }
}
