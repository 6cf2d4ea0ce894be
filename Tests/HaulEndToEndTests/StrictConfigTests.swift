import Foundation
import XCTest

/// Options are read strictly: a switch takes only its documented words (a guard that read `enabled` as "off"
/// failed open), a config file names each option once, and anything but a regular file is refused at once.
final class StrictConfigTests: XCTestCase {
    private var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        for (name, _) in environment where name.hasPrefix("HAUL_") { environment[name] = nil }
        return environment
    }

    /// `haul serve` with these arguments and variables, stopped after 10 s if it has not ended by itself.
    private func serve(_ arguments: [String], _ variables: [String: String] = [:]) throws -> CommandResult {
        let sandbox = try Sandbox()
        var environment = self.environment
        environment.merge(variables) { $1 }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: buildDirectory + "/haul")
        // A short token stops a start that got past the switches: its message shows they were read.
        process.arguments =
            [
                "serve", "--listen", "127.0.0.1:0", "--data-dir", sandbox.file("data"),
                "--download-dir", sandbox.file("dl"),
            ] + arguments
        process.environment = environment
        FileManager.default.createFile(atPath: sandbox.file("err"), contents: nil)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: sandbox.file("err")))
        try process.run()
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning, Date() < deadline { usleep(20_000) }
        let hung = process.isRunning
        if hung { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        let stderr = try String(contentsOfFile: sandbox.file("err"), encoding: .utf8)
        XCTAssertFalse(hung, "haul serve \(arguments) \(variables) did not end: \(stderr)")
        return CommandResult(status: process.terminationStatus, stdout: "", stderr: stderr)
    }

    func testASwitchTakesOnlyItsWordsWhereverItIsWritten() throws {
        let sandbox = try Sandbox()
        let refusedWords = ["enabled", "y", "2", "ture", "-1", " 1", "", "1 ", "yes please", "of"]
        for word in refusedWords {
            let variable = try serve(["--token", "short"], ["HAUL_DENY_PRIVATE_NETWORKS": word])
            XCTAssertEqual(variable.status, 2, "HAUL_DENY_PRIVATE_NETWORKS='\(word)'")
            XCTAssertTrue(
                variable.stderr.contains(
                    "HAUL_DENY_PRIVATE_NETWORKS takes 1, true, yes or on, or 0, false, "
                        + "no or off, not '\(word)'"), "'\(word)': \(variable.stderr)")
            let flag = try serve(["--deny-private-networks=\(word)", "--token", "short"])
            XCTAssertEqual(flag.status, 2, "--deny-private-networks='\(word)'")
            XCTAssertTrue(flag.stderr.contains("--deny-private-networks takes 1, true"), "'\(word)': \(flag.stderr)")
        }
        let unauthenticated = try serve(["--token", "short"], ["HAUL_ALLOW_UNAUTHENTICATED": "enabled"])
        XCTAssertTrue(unauthenticated.stderr.contains("HAUL_ALLOW_UNAUTHENTICATED takes"), unauthenticated.stderr)

        // In a config file: a quoted word that is not one, or a number other than 0 and 1.
        let toml = sandbox.file("haul.toml")
        for value in ["\"enabled\"", "2", "\"\"", "-1"] {
            try "deny-private-networks = \(value)\n".write(toFile: toml, atomically: true, encoding: .utf8)
            let result = try serve(["--config", toml, "--token", "short"])
            XCTAssertEqual(result.status, 2, value)
            XCTAssertTrue(
                result.stderr.contains("deny-private-networks in \(toml):1 takes 1, true"),
                "\(value): \(result.stderr)")
        }
        let json = sandbox.file("haul.json")
        try #"{"deny_private_networks": "enabled"}"#.write(toFile: json, atomically: true, encoding: .utf8)
        XCTAssertTrue(
            try serve(["--config", json, "--token", "short"]).stderr
                .contains("deny_private_networks in \(json) takes 1, true"))

        // The documented words pass (the start then stops at the short token, after the switches).
        for word in ["1", "true", "TRUE", "yes", "on", "0", "false", "no", "Off"] {
            let result = try serve(["--token", "short"], ["HAUL_DENY_PRIVATE_NETWORKS": word])
            XCTAssertTrue(result.stderr.contains("--token must be at least 16"), "'\(word)': \(result.stderr)")
        }
        for value in ["true", "false", "\"on\"", "1"] {
            try "deny-private-networks = \(value)\n".write(toFile: toml, atomically: true, encoding: .utf8)
            XCTAssertTrue(try serve(["--config", toml, "--token", "short"]).stderr.contains("--token must be"), value)
        }
    }

    /// The word decides: with `true` in the environment the guard is on and loopback is refused; with `off` it
    /// is fetched.
    func testTheWordsTurnTheGuardOnAndOff() throws {
        let sandbox = try Sandbox()
        try FileManager.default.createDirectory(atPath: sandbox.file("www"), withIntermediateDirectories: true)
        let hash = try sandbox.makeRandomFile("www/a.bin", size: 2000)
        let origin = try ServerProcess(
            executable: buildDirectory + "/TestOrigin",
            arguments: ["--root", sandbox.file("www")], logPath: sandbox.file("origin.log"))
        defer { origin.stop(signal: SIGKILL) }
        for (word, expected) in [("TRUE", "failed"), ("off", "completed")] {
            var environment = self.environment
            environment["HAUL_DENY_PRIVATE_NETWORKS"] = word
            let server = try ServerProcess(
                executable: buildDirectory + "/haul",
                arguments: [
                    "serve", "--listen", "127.0.0.1:0", "--data-dir", sandbox.file("data-\(word)"),
                    "--download-dir", sandbox.file("dl-\(word)"), "--min-free-space", "16M",
                ],
                environment: environment, logPath: sandbox.file("haul-\(word).log"))
            defer { server.stop(signal: SIGKILL) }
            let client = Client(base: server.baseURL)
            let added = try client.request("POST", "/downloads", json: ["url": origin.baseURL + "/files/a.bin"])
            let id = try XCTUnwrap(added.json["id"] as? String, added.text)
            var last: [String: Any] = [:]
            waitFor("\(word): \(expected)") {
                last = (try? client.get("/downloads/\(id)").json) ?? [:]
                return ["completed", "failed"].contains(last["state"] as? String ?? "")
            }
            XCTAssertEqual(last["state"] as? String, expected, "\(word): \(last)")
            if expected == "completed" {
                XCTAssertEqual(try sha256(sandbox.file("dl-\(word)/a.bin")), hash)
            } else {
                XCTAssertEqual((last["error"] as? [String: Any])?["code"] as? String, "blocked_address")
            }
        }
    }

    func testAClientSwitchTakesOnlyItsWords() throws {
        let result = try execute(buildDirectory + "/haul", ["ls", "--json=2", "--server", "http://127.0.0.1:9"])
        XCTAssertEqual(result.status, 2, result.output)
        XCTAssertTrue(
            result.stderr.contains("--json takes 1, true, yes or on, or 0, false, no or off, not '2'"),
            result.stderr)
    }

    /// The server and the client read command lines with one reader: the same spellings mean the same, and the same
    /// mistakes are refused by both, each in its own words.
    func testTheServerAndTheClientReadCommandLinesAlike() throws {
        for (arguments, message) in [
            (["--max-active"], "--max-active needs a value"),
            (["--bogus=1"], "unknown option --bogus"),
            (["stray"], "unexpected argument 'stray'"),
            (["-x"], "unexpected argument '-x'"),
            (["--", "--max-active", "3"], "unexpected argument '--max-active'"),
        ] {
            let result = try serve(arguments)
            XCTAssertEqual(result.status, 2, "\(arguments)")
            XCTAssertTrue(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
        // `--name=value` and `--name value` alike, the last of a flag given twice winning: the token is too short.
        let spellings = [
            ["--token=short"], ["--token", "short"], ["--token", "a-long-enough-token-1234", "--token=short"],
        ]
        for arguments in spellings {
            let result = try serve(arguments)
            XCTAssertEqual(result.status, 2, "\(arguments)")
            XCTAssertTrue(result.stderr.contains("token"), "\(arguments): \(result.stderr)")
        }
        let server = "http://127.0.0.1:9"
        for (arguments, message) in [
            (["ls", "--json", "--json"], "--json is given twice"),
            (["add", "--connections"], "--connections needs a value (N)"),
            (["ls", "-x"], "unknown option -x"),
            (["ls", "--bogus=1"], "unknown option --bogus"),
        ] {
            let result = try execute(buildDirectory + "/haul", ["--server", server] + arguments)
            XCTAssertEqual(result.status, 2, "\(arguments): \(result.output)")
            XCTAssertTrue(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
    }

    /// The TOML a config file may hold: CRLF line ends, a byte order mark and `\u` escapes are TOML and are read;
    /// a key given twice (also as `max_active` and `max-active`) is not, and is refused.
    func testTheConfigFileIsReadAsTOMLIsWritten() throws {
        let sandbox = try Sandbox()
        let toml = sandbox.file("haul.toml")
        let text =
            "\u{FEFF}# written on Windows\r\nlisten = \"127.0.0.1:0\"\r\nmax-active = 6\r\n"
            + "cors-origin = [\"https://\\u0061.example\", \"https://b\\U0000002Eexample\"]\r\n"
            + "download-dir = \"\(sandbox.file("dl"))\"\r\ndata-dir = \"\(sandbox.file("data"))\"\r\n"
        try text.write(toFile: toml, atomically: true, encoding: .utf8)
        let server = try ServerProcess(
            executable: buildDirectory + "/haul", arguments: ["serve", "--config", toml],
            environment: environment, logPath: sandbox.file("log"))
        defer { server.stop(signal: SIGKILL) }
        let client = Client(base: server.baseURL)
        XCTAssertEqual(try client.get("/settings").json["max_active"] as? Int, 6)
        for origin in ["https://a.example", "https://b.example"] {
            let preflight = try client.request(
                "OPTIONS", "/downloads",
                headers: [
                    "Origin": origin, "Access-Control-Request-Method": "POST",
                ])
            XCTAssertEqual(preflight.header("Access-Control-Allow-Origin"), origin, "the escape was read")
        }

        for (text, expected) in [
            (
                "max-active = 2\nmax-active = 3\n",
                "max-active in \(toml):2: max-active is given again (first as "
                    + "max-active in \(toml):1)"
            ),
            ("max_active = 2\nmax-active = 3\n", "max-active in \(toml):2: max-active is given again"),
            ("token = \"\\uD800\"\n", "token in \(toml):1: \\u takes 4 hex digits of a Unicode scalar"),
        ] {
            try text.write(toFile: toml, atomically: true, encoding: .utf8)
            let result = try serve(["--config", toml])
            XCTAssertEqual(result.status, 2, text)
            XCTAssertTrue(result.stderr.contains(expected), "\(text): \(result.stderr)")
        }
        let json = sandbox.file("haul.json")
        try #"{"max_active": 2, "max_active": 3}"#.write(toFile: json, atomically: true, encoding: .utf8)
        let twice = try serve(["--config", json])
        XCTAssertEqual(twice.status, 2)
        XCTAssertTrue(twice.stderr.contains("the name 'max_active' is given twice"), twice.stderr)
    }

    /// A FIFO (or a directory, or a device) is refused at once: opening a FIFO to read it waited for a writer
    /// forever, and the server never started.
    func testAConfigThatIsNoRegularFileIsRefusedAtOnce() throws {
        let sandbox = try Sandbox()
        XCTAssertEqual(mkfifo(sandbox.file("fifo"), 0o600), 0)
        for path in [sandbox.file("fifo"), sandbox.path, "/dev/zero"] {
            let result = try serve(["--config", path])
            XCTAssertEqual(result.status, 2, path)
            XCTAssertTrue(
                result.stderr.contains("the config file \(path) is not a regular file"),
                "\(path): \(result.stderr)")
        }
    }
}
