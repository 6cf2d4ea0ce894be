import Foundation
import XCTest

/// Starts a TestOrigin and a `haul serve`, each on a free loopback port in a fresh sandbox, and drives them.
class HaulTestCase: XCTestCase {
    var sandbox: Sandbox!
    var origin: ServerProcess!
    var haul: ServerProcess!
    var api: Client!
    var originClient: Client!

    /// Extra `haul serve` flags for a test class.
    var serveArguments: [String] { ["--retry-wait", "0.1", "--max-attempts", "4"] }
    /// The environment of `haul serve` for a test class (nil: the runner's).
    var serveEnvironment: [String: String]? { nil }

    override func setUpWithError() throws {
        sandbox = try Sandbox()
        try FileManager.default.createDirectory(atPath: sandbox.file("www"), withIntermediateDirectories: true)
        chmod(sandbox.file("www"), 0o755)
        origin = try ServerProcess(
            executable: buildDirectory + "/TestOrigin",
            arguments: ["--root", sandbox.file("www")], logPath: sandbox.file("origin.log"))
        originClient = Client(base: origin.baseURL)
        try startHaul()
    }

    override func tearDownWithError() throws {
        if underSanitizer, let haul, haul.isRunning {
            // A clean stop runs LeakSanitizer's exit check; any sanitizer report fails the test.
            XCTAssertEqual(haul.stop(signal: SIGTERM), 0, "haul under a sanitizer did not exit cleanly")
            let log = (try? String(contentsOfFile: sandbox.file("haul.log"), encoding: .utf8)) ?? ""
            XCTAssertFalse(log.contains("Sanitizer"), String(log.suffix(4000)))
        }
        haul?.stop(signal: SIGKILL)
        origin?.stop(signal: SIGKILL)
        // totalFailureCount counts thrown errors too, which failureCount leaves out (and hasSucceeded is false
        // until the run has stopped, after this).
        if let run = testRun, run.totalFailureCount > 0,
            let log = try? String(contentsOfFile: sandbox.file("haul.log"), encoding: .utf8)
        {
            print("---- haul.log ----\n\(log.suffix(6000))")
        }
        haul = nil
        origin = nil
        sandbox = nil
    }

    func startHaul(extra: [String] = []) throws {
        haul = try ServerProcess(
            executable: buildDirectory + "/haul",
            // The default free-space reserve (1 GiB) would fail every download on a nearly full CI disk; tests that
            // are about the reserve set their own.
            arguments: [
                "serve", "--listen", "127.0.0.1:0", "--download-dir", sandbox.file("downloads"),
                "--data-dir", sandbox.file("data"), "--min-free-space", "16M",
            ] + serveArguments + extra,
            environment: serveEnvironment, logPath: sandbox.file("haul.log"))
        api = Client(base: haul.baseURL)
    }

    // MARK: helpers

    var haulPath: String { buildDirectory + "/haul" }

    /// Runs the client, `haul ARGS`, against this test's server (HAUL_SERVER).
    func haulCommand(_ arguments: [String], environment: [String: String] = [:]) throws -> CommandResult {
        var env = ProcessInfo.processInfo.environment
        env["HAUL_SERVER"] = haul.baseURL
        env.merge(environment) { _, new in new }
        return try execute(haulPath, arguments, environment: env)
    }

    /// Another TestOrigin serving the same files at `address` (127.0.0.2, 127.0.0.3: other hosts on loopback),
    /// logging to `name`.log; the caller stops it.
    func otherOrigin(at address: String, name: String) throws -> ServerProcess {
        try ServerProcess(
            executable: buildDirectory + "/TestOrigin",
            arguments: ["--root", sandbox.file("www"), "--listen", address + ":0"],
            logPath: sandbox.file(name + ".log"))
    }

    /// POSTs a download and returns its id, requiring 201 and a Location.
    func add(_ body: [String: Any], file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let reply = try api.request("POST", "/downloads", json: body)
        XCTAssertEqual(reply.status, 201, reply.text, file: file, line: line)
        let id = try XCTUnwrap(reply.json["id"] as? String, file: file, line: line)
        XCTAssertEqual(reply.header("Location"), "/downloads/\(id)", file: file, line: line)
        return id
    }

    func download(_ id: String) throws -> [String: Any] {
        let reply = try api.get("/downloads/\(id)")
        XCTAssertEqual(reply.status, 200, reply.text)
        return reply.json
    }

    /// Polls until the download is in `state`; fails early if it ends in another final state.
    @discardableResult
    func waitForState(
        _ id: String, _ state: String, timeout: TimeInterval = 60,
        file: StaticString = #filePath, line: UInt = #line
    ) throws -> [String: Any] {
        var last: [String: Any] = [:]
        try waitFor("\(id) to be \(state)", timeout: timeout, file: file, line: line) {
            last = try download(id)
            let now = last["state"] as? String
            if now != state, now == "completed" || now == "failed" {
                XCTFail("expected \(state), got \(now!): \(last["error"] ?? "")", file: file, line: line)
                return true
            }
            return now == state
        }
        return last
    }

    func patch(_ id: String, _ body: [String: Any]) throws -> Client.Reply {
        try api.request("PATCH", "/downloads/\(id)", json: body)
    }

    func originURL(_ name: String, _ query: String = "") -> String {
        origin.baseURL + "/files/" + name + (query.isEmpty ? "" : "?" + query)
    }

    /// What the origin received, oldest first.
    func originRequests() throws -> [[String: Any]] {
        let reply = try originClient.get("/_requests")
        return (try JSONSerialization.jsonObject(with: reply.body)) as? [[String: Any]] ?? []
    }

    func originActiveStreams() throws -> Int {
        (try originClient.get("/_stats").json["active_streams"] as? Int) ?? -1
    }

    func downloadedPath(_ resource: [String: Any]) throws -> String {
        sandbox.file("downloads/" + (try XCTUnwrap(resource["path"] as? String)))
    }

    func int(_ value: Any?) -> Int64 { (value as? NSNumber)?.int64Value ?? -1 }
}
