import Foundation
import HaulAssets
import HaulCore
import HaulLoop
import XCTest
@testable import HaulAPI

/// The contract and the server must describe the same API: every route served is in openapi.yaml and every
/// operation in openapi.yaml is served.
final class OpenAPIContractTests: XCTestCase {
    private var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
    }

    private func specText() throws -> String {
        try String(contentsOf: packageRoot.appendingPathComponent("openapi.yaml"), encoding: .utf8)
    }

    /// `(path, METHOD)` pairs of the `paths:` section, read from its indentation.
    private func specOperations(_ yaml: String) -> Set<String> {
        var operations: Set<String> = []
        var inPaths = false
        var currentPath: String?
        for line in yaml.split(separator: "\n", omittingEmptySubsequences: false) {
            if !line.hasPrefix(" ") && !line.isEmpty { inPaths = line == "paths:"; continue }
            guard inPaths else { continue }
            if line.hasPrefix("  /"), line.hasSuffix(":"), !line.hasPrefix("   ") {
                currentPath = String(line.dropFirst(2).dropLast())
            } else if let path = currentPath, line.hasPrefix("    "), !line.hasPrefix("     ") {
                let key = line.trimmingCharacters(in: .whitespaces).dropLast()
                if ["get", "post", "put", "patch", "delete"].contains(String(key)) {
                    operations.insert("\(key.uppercased()) \(path)")
                }
            }
        }
        return operations
    }

    func testEveryRouteIsInTheSpecAndEveryOperationIsServed() throws {
        let dir = NSTemporaryDirectory() + "haul-api-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let loop = try EventLoop()
        let store = try DownloadStore(path: dir + "/haul.sqlite")
        let engine = try Engine(loop: loop, store: store, config: EngineConfig(downloadRoot: dir), log: Logger())
        let api = API(engine: engine, loop: loop)
        let served = Set(api.routes.map { "\($0.method) \($0.path)" })
        let documented = specOperations(try specText())
        XCTAssertFalse(documented.isEmpty)
        XCTAssertEqual(served.subtracting(documented), [], "served but not in openapi.yaml")
        XCTAssertEqual(documented.subtracting(served), [], "in openapi.yaml but not served")
    }

    /// The files at the top of the tree are the ones compiled in (one copy, linked from there).
    func testTheServedDocumentAndDashboardAreTheFilesOfTheTree() throws {
        XCTAssertEqual(String(decoding: Assets.openAPI, as: UTF8.self), try specText())
        for (name, embedded) in [
            ("index.html", Assets.dashboardPage), ("app.js", Assets.dashboardScript),
            ("app.css", Assets.dashboardStyle),
        ] {
            let source = try Data(contentsOf: packageRoot.appendingPathComponent("dashboard/" + name))
            XCTAssertEqual(Data(embedded), source, name)
        }
    }

    func testTheDashboardIsServedWithItsPolicyAndRevalidated() throws {
        let page = Dashboard.asset(
            Assets.dashboardPage, type: "text/html",
            for: HTTPRequest(method: "GET", target: "/"))
        XCTAssertEqual(page.status, 200)
        XCTAssertEqual(page.header("Content-Type"), "text/html; charset=utf-8")
        XCTAssertTrue(page.header("Content-Security-Policy")?.contains("script-src 'self'") == true)
        let tag = try XCTUnwrap(page.header("ETag"))
        let again = Dashboard.asset(
            Assets.dashboardPage, type: "text/html",
            for: HTTPRequest(method: "GET", target: "/", headers: [("If-None-Match", tag)]))
        XCTAssertEqual(again.status, 304)
        XCTAssertTrue(again.body.isEmpty)
    }

    func testTheReadmeShowsACurlExampleForEveryOperation() throws {
        let readme = try String(contentsOf: packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        // Commands joined across backslash continuations, then (METHOD, path) for each URL a curl line names.
        let commands = readme.replacingOccurrences(of: "\\\n", with: " ").split(separator: "\n")
            .filter { $0.hasPrefix("curl ") }
        var examples: [(method: String, path: String)] = []
        for command in commands {
            let words = command.split(separator: " ")
            var method = command.contains(" -d ") ? "POST" : "GET"
            if let flag = words.firstIndex(of: "-X"), flag + 1 < words.count { method = String(words[flag + 1]) }
            for word in words {
                let trimmed = word.trimmingCharacters(in: CharacterSet(charactersIn: "'\""))
                guard let slash = trimmed.firstIndex(of: "/"),
                    trimmed.hasPrefix("localhost:") || trimmed.hasPrefix("host:")
                else { continue }
                let path = trimmed[slash...].prefix(while: { $0 != "?" })
                examples.append((method, String(path)))
            }
        }
        XCTAssertGreaterThan(examples.count, 10)
        for operation in specOperations(try specText()).sorted() {
            let parts = operation.split(separator: " ")
            let (method, pattern) = (String(parts[0]), parts[1].split(separator: "/", omittingEmptySubsequences: false))
            let shown = examples.contains { example in
                let path = example.path.split(separator: "/", omittingEmptySubsequences: false)
                return example.method == method && path.count == pattern.count
                    && zip(path, pattern).allSatisfy { $1.hasPrefix("{") || $0 == $1 }
            }
            XCTAssertTrue(shown, "README has no curl example for \(operation)")
        }
    }
}
