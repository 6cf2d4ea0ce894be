import Foundation
import XCTest

/// Every `haul serve` option has an environment twin, is listed by `--help`, and is in README's table.
final class ConfigurationTests: XCTestCase {
    private var readme: String {
        get throws {
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
            return try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        }
    }

    /// `--help` entries: the option name and the text of its entry (continuation lines included).
    private func helpEntries() throws -> [(name: String, text: String)] {
        let help = try execute(buildDirectory + "/haul", ["serve", "--help"])
        XCTAssertEqual(help.status, 0)
        var entries: [(name: String, text: String)] = []
        for line in help.stdout.split(separator: "\n").dropFirst() {
            let text = line.drop(while: { $0 == " " })
            if text.hasPrefix("--") {
                entries.append((String(text.dropFirst(2).prefix(while: { $0 != " " })), String(text)))
            } else if !entries.isEmpty {
                entries[entries.count - 1].text += " " + text
            }
        }
        return entries
    }

    func testEveryOptionHasAnEnvironmentTwinAndIsInTheReadme() throws {
        let entries = try helpEntries()
        XCTAssertGreaterThan(entries.count, 20)
        let readme = try self.readme
        for (name, text) in entries {
            let variable = "HAUL_" + name.uppercased().replacingOccurrences(of: "-", with: "_")
            XCTAssertTrue(text.contains(variable), "--\(name) names no \(variable) in --help")
            XCTAssertTrue(readme.contains("| `--\(name)"), "README's table lacks --\(name)")
            XCTAssertTrue(readme.contains("`\(variable)"), "README lacks \(variable)")
        }
    }

    /// The option table walked row by row: each row's sample value, given by flag, by its environment twin and by
    /// the config file, is what `haul serve --check` says the option is; and README's table is the one the option
    /// table makes.
    func testEveryOptionRowTakesItsValueFromEachSourceAndREADMEShowsTheTable() throws {
        let described = try execute(buildDirectory + "/haul", ["serve", "--describe-options"])
        let rows = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data(described.stdout.utf8)) as? [[String: Any]])
        XCTAssertGreaterThan(rows.count, 40)
        let walked = rows.filter { !["check", "config"].contains($0["name"] as? String) }
        var environment = ProcessInfo.processInfo.environment
        for key in environment.keys where key.hasPrefix("HAUL_") { environment[key] = nil }
        func expect(_ result: CommandResult, _ source: String) {
            XCTAssertEqual(result.status, 0, "\(source): \(result.output)")
            let lines = Set(result.stdout.split(separator: "\n").map(String.init))
            for row in walked {
                let line = "\(row["name"] as? String ?? "?") = \(row["shown"] as? String ?? "?")"
                XCTAssertTrue(lines.contains(line), "\(source): no '\(line)' in:\n\(result.stdout)")
            }
        }
        // By flag.
        var flags = ["serve", "--check"]
        for row in walked {
            let name = row["name"] as? String ?? "", sample = row["sample"] as? String ?? ""
            flags += row["switch"] as? Bool == true ? ["--" + name + "=" + sample] : ["--" + name, sample]
        }
        expect(try execute(buildDirectory + "/haul", flags, environment: environment), "flags")
        // By the environment.
        var twins = environment
        for row in walked { twins[row["variable"] as? String ?? ""] = row["sample"] as? String }
        twins["HAUL_CHECK"] = "1"
        expect(try execute(buildDirectory + "/haul", ["serve"], environment: twins), "environment")
        // By the config file, names with underscores.
        let sandbox = try Sandbox()
        let file = sandbox.file("all.toml")
        try walked.map { row in
            let name = (row["name"] as? String ?? "").replacingOccurrences(of: "-", with: "_")
            return "\(name) = \"\(row["sample"] as? String ?? "")\""
        }.joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        expect(
            try execute(buildDirectory + "/haul", ["serve", "--check", "--config", file], environment: environment),
            "config file")
        // README's table is the table's.
        let table = try execute(buildDirectory + "/haul", ["serve", "--help-markdown"]).stdout
        XCTAssertTrue(try readme.contains(table), "README's table of options differs from `haul serve --help-markdown`")
        // The options PATCH /settings changes say so.
        for row in rows where row["settings"] is String {
            XCTAssertTrue(table.contains("`PATCH /settings` `\(row["settings"] as? String ?? "")`"), "\(row)")
        }
    }

    func testTheEnvironmentTwinTakesEffectAndTheFlagWins() throws {
        let sandbox = try Sandbox()
        var environment = ProcessInfo.processInfo.environment
        environment["HAUL_LOG_FORMAT"] = "json"
        environment["HAUL_MAX_ACTIVE"] = "0"
        let refused = try execute(
            buildDirectory + "/haul", ["serve", "--data-dir", sandbox.file("d")],
            environment: environment)
        XCTAssertEqual(refused.status, 2, "HAUL_MAX_ACTIVE=0 is out of range")
        XCTAssertTrue(
            refused.stderr.contains("haul: HAUL_MAX_ACTIVE must be an integer from 1 to 1000"),
            "the variable is named as the user wrote it: \(refused.stderr)")
        let flagged = try execute(buildDirectory + "/haul", ["serve", "--max-active", "0"], environment: environment)
        XCTAssertTrue(flagged.stderr.contains("haul: --max-active must be an integer from 1 to 1000"), flagged.stderr)
        // The store and the node's name: a URL of the one database Haul speaks, a name that can name a file.
        for (arguments, message) in [
            (["--store", "mysql://db/haul"], "--store takes a postgres:// URL"),
            (["--store", "postgres://db/haul", "--node", ".."], "--node takes up to 64 letters"),
            (["--store", "postgres://db/haul", "--node", "a/b"], "--node takes up to 64 letters"),
            (["--lease", "1"], "--lease must be"),
        ] {
            let wrong = try execute(buildDirectory + "/haul", ["serve"] + arguments, environment: environment)
            XCTAssertEqual(wrong.status, 2, "\(arguments)")
            XCTAssertTrue(wrong.stderr.contains(message), "\(arguments): \(wrong.stderr)")
        }
        environment["HAUL_LISTEN"] = "127.0.0.1:0"
        environment["HAUL_DOWNLOAD_DIR"] = sandbox.file("dl")
        environment["HAUL_DATA_DIR"] = sandbox.file("data")
        // The schedule's times are the server's: /settings names its zone (Tokyo keeps +09:00 all year).
        environment["TZ"] = "Asia/Tokyo"
        let server = try ServerProcess(
            executable: buildDirectory + "/haul", arguments: ["serve", "--max-active", "2"],
            environment: environment, logPath: sandbox.file("log"))
        defer { server.stop(signal: SIGKILL) }
        XCTAssertEqual(try Client(base: server.baseURL).get("/healthz").status, 200)
        let settings = try Client(base: server.baseURL).get("/settings").json
        XCTAssertEqual(settings["time_zone"] as? String, "Asia/Tokyo")
        XCTAssertEqual(settings["utc_offset"] as? String, "+09:00")
        let log = try String(contentsOfFile: sandbox.file("log"), encoding: .utf8)
        XCTAssertTrue(log.hasPrefix("{\"time\":"), "HAUL_LOG_FORMAT=json: \(log)")
        XCTAssertTrue(FileManager.default.fileExists(atPath: sandbox.file("data/haul.sqlite")))
    }

    /// A directory the server cannot write stops it at once, with the path, the option that set it, its owner, the
    /// user the server runs as and the fix, rather than failing downloads later with an error naming no file. Run
    /// as another user, which needs root (CI is).
    func testAnUnwritableDirectoryIsNamedAtStartWithItsOwnerAndTheFix() throws {
        guard geteuid() == 0 else { throw XCTSkip("runs the server as uid 65534, which needs root") }
        let sandbox = try Sandbox()
        // The binary is copied where uid 65534 may run it, whatever the checkout's permissions.
        let binary = sandbox.file("haul")
        try FileManager.default.copyItem(atPath: buildDirectory + "/haul", toPath: binary)
        for directory in ["dl", "data"] {
            try FileManager.default.createDirectory(
                atPath: sandbox.file(directory), withIntermediateDirectories: false,
                attributes: [.posixPermissions: 0o755])
        }
        func serveAsNobody() throws -> CommandResult {
            try execute(
                "/usr/bin/setpriv",
                [
                    "--reuid=65534", "--regid=65534", "--clear-groups", binary, "serve",
                    "--listen", "127.0.0.1:0", "--download-dir", sandbox.file("dl"),
                    "--data-dir", sandbox.file("data"),
                ])
        }
        let downloads = try serveAsNobody()
        XCTAssertEqual(downloads.status, 1, downloads.output)
        XCTAssertTrue(
            downloads.stderr.contains(
                "cannot write to \(sandbox.file("dl")), the download directory "
                    + "(--download-dir, HAUL_DOWNLOAD_DIR): permission denied; it belongs to uid 0 gid 0 and Haul runs as "
                    + "uid 65534 gid 65534: chown -R 65534:65534 \(sandbox.file("dl"))"), downloads.stderr)
        XCTAssertFalse(downloads.stderr.contains("--user 0:0"), "never the advice to run as root")

        XCTAssertEqual(chown(sandbox.file("dl"), 65534, 65534), 0)
        XCTAssertEqual(chown(sandbox.file("data"), 1234, 1234), 0)
        let data = try serveAsNobody()
        XCTAssertEqual(data.status, 1, data.output)
        XCTAssertTrue(
            data.stderr.contains(
                "cannot write to \(sandbox.file("data")), the data directory "
                    + "(--data-dir, HAUL_DATA_DIR): permission denied; it belongs to uid 1234 gid 1234"), data.stderr)
        XCTAssertTrue(data.stderr.contains("or run Haul as its owner (docker run --user 1234:1234)"), data.stderr)

        XCTAssertEqual(chown(sandbox.file("data"), 65534, 65534), 0)
        XCTAssertTrue(
            FileManager.default.createFile(
                atPath: sandbox.file("data/haul.sqlite"), contents: nil,
                attributes: [.posixPermissions: 0o600]))
        let database = try serveAsNobody()
        XCTAssertEqual(database.status, 1, database.output)
        XCTAssertTrue(
            database.stderr.contains(
                "cannot open \(sandbox.file("data/haul.sqlite")), the database "
                    + "(--data-dir, HAUL_DATA_DIR): permission denied"), database.stderr)

        XCTAssertEqual(chown(sandbox.file("data/haul.sqlite"), 65534, 65534), 0)
        let server = try ServerProcess(
            executable: "/usr/bin/setpriv",
            arguments: [
                "--reuid=65534", "--regid=65534", "--clear-groups", binary, "serve",
                "--listen", "127.0.0.1:0", "--download-dir", sandbox.file("dl"),
                "--data-dir", sandbox.file("data"),
            ],
            logPath: sandbox.file("log"))
        defer { server.stop(signal: SIGKILL) }
        XCTAssertEqual(try Client(base: server.baseURL).get("/healthz").status, 200, "all theirs: it starts")
    }

    /// --config FILE (TOML, or JSON for .json) for every option --help lists; the environment and flags win, and an
    /// error names the file and line.
    func testAConfigFileGivesOptionsUnderTheEnvironmentAndTheFlags() throws {
        let sandbox = try Sandbox()
        let toml = sandbox.file("haul.toml")
        try """
        # Haul's settings
        listen = "127.0.0.1:0"
        download-dir = "\(sandbox.file("dl"))"
        data_dir = '\(sandbox.file("data"))'
        max-active = 7            # downloads at once
        max-speed = "1.5M"
        log-format = "json"
        cors-origin = ["https://a.example", "https://b.example:8443"]
        deny-private-networks = false

        """.write(toFile: toml, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        for name in ["HAUL_MAX_ACTIVE", "HAUL_LOG_FORMAT", "HAUL_CONFIG"] { environment[name] = nil }
        let server = try ServerProcess(
            executable: buildDirectory + "/haul", arguments: ["serve", "--config", toml],
            environment: environment, logPath: sandbox.file("log"))
        let client = Client(base: server.baseURL)
        var settings = try client.get("/settings").json
        XCTAssertEqual(settings["max_active"] as? Int, 7)
        XCTAssertEqual(settings["max_speed"] as? Int, 1_572_864)
        let preflight = try client.request(
            "OPTIONS", "/downloads",
            headers: [
                "Origin": "https://b.example:8443", "Access-Control-Request-Method": "POST",
            ])
        XCTAssertEqual(preflight.header("Access-Control-Allow-Origin"), "https://b.example:8443", "the list's second")
        server.stop(signal: SIGKILL)
        XCTAssertTrue(try String(contentsOfFile: sandbox.file("log"), encoding: .utf8).hasPrefix("{\"time\":"))

        // HAUL_CONFIG finds the file; the environment beats it, a flag beats the environment.
        environment["HAUL_CONFIG"] = toml
        environment["HAUL_MAX_ACTIVE"] = "3"
        let second = try ServerProcess(
            executable: buildDirectory + "/haul", arguments: ["serve"],
            environment: environment, logPath: sandbox.file("log2"))
        settings = try Client(base: second.baseURL).get("/settings").json
        XCTAssertEqual((settings["defaults"] as? [String: Any])?["max_active"] as? Int, 3)
        second.stop(signal: SIGKILL)
        let third = try ServerProcess(
            executable: buildDirectory + "/haul", arguments: ["serve", "--max-active", "2"],
            environment: environment, logPath: sandbox.file("log3"))
        settings = try Client(base: third.baseURL).get("/settings").json
        XCTAssertEqual((settings["defaults"] as? [String: Any])?["max_active"] as? Int, 2)
        third.stop(signal: SIGKILL)

        environment["HAUL_CONFIG"] = nil
        environment["HAUL_MAX_ACTIVE"] = nil
        for (text, expected) in [
            ("listen = \"127.0.0.1:0\"\nmax-active = 0\n", "max-active in \(toml):2 must be an integer from 1 to 1000"),
            ("colour = \"red\"\n", "colour in \(toml):1: no such option"),
            ("[serve]\n", "\(toml):1: tables are not used"),
            ("token = \"unterminated\n", "token in \(toml):1: a string is not closed"),
            ("max-speed = fast lane\n", "max-speed in \(toml):1: unexpected text after the value"),
        ] {
            try text.write(toFile: toml, atomically: true, encoding: .utf8)
            let result = try execute(buildDirectory + "/haul", ["serve", "--config", toml], environment: environment)
            XCTAssertEqual(result.status, 2, text)
            XCTAssertTrue(result.stderr.contains(expected), "\(text): \(result.stderr)")
        }
        let json = sandbox.file("haul.json")
        try
            #"{"listen": "127.0.0.1:0", "max_connections_per_host": 9, "allow_unauthenticated": true, "max_active": "x"}"#
            .write(toFile: json, atomically: true, encoding: .utf8)
        let refused = try execute(buildDirectory + "/haul", ["serve", "--config", json], environment: environment)
        XCTAssertTrue(
            refused.stderr.contains("max_active in \(json) must be an integer from 1 to 1000"), refused.stderr)
        let missing = try execute(
            buildDirectory + "/haul", ["serve", "--config", sandbox.file("nope.toml")],
            environment: environment)
        XCTAssertTrue(
            missing.stderr.contains("cannot read the config file \(sandbox.file("nope.toml")): No such file"),
            missing.stderr)
    }
}
