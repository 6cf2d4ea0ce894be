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

    func testTheEnvironmentTwinTakesEffectAndTheFlagWins() throws {
        let sandbox = try Sandbox()
        var environment = ProcessInfo.processInfo.environment
        environment["HAUL_LOG_FORMAT"] = "json"
        environment["HAUL_MAX_ACTIVE"] = "0"
        let refused = try execute(buildDirectory + "/haul", ["serve", "--data-dir", sandbox.file("d")],
                                  environment: environment)
        XCTAssertEqual(refused.status, 2, "HAUL_MAX_ACTIVE=0 is out of range")
        XCTAssertTrue(refused.stderr.contains("--max-active must be an integer from 1"), refused.stderr)
        environment["HAUL_LISTEN"] = "127.0.0.1:0"
        environment["HAUL_DOWNLOAD_DIR"] = sandbox.file("dl")
        environment["HAUL_DATA_DIR"] = sandbox.file("data")
        let server = try ServerProcess(executable: buildDirectory + "/haul", arguments: ["serve", "--max-active", "2"],
                                       environment: environment, logPath: sandbox.file("log"))
        defer { server.stop(signal: SIGKILL) }
        XCTAssertEqual(try Client(base: server.baseURL).get("/healthz").status, 200)
        let log = try String(contentsOfFile: sandbox.file("log"), encoding: .utf8)
        XCTAssertTrue(log.hasPrefix("{\"time\":"), "HAUL_LOG_FORMAT=json: \(log)")
        XCTAssertTrue(FileManager.default.fileExists(atPath: sandbox.file("data/haul.sqlite")))
    }
}
