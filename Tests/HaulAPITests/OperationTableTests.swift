import Foundation
import HaulCore
import HaulLoop
import XCTest
@testable import HaulAPI

/// REST is one wire format over the operation table: every route and method serves exactly one operation, says
/// the same as the operation about changing state and about who may call it, and openapi.yaml names both.
final class OperationTableTests: XCTestCase {
    private var routes: [RouteEntry] = []

    override func setUpWithError() throws {
        let dir = NSTemporaryDirectory() + "haul-ops-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: dir) }
        let loop = try EventLoop()
        let engine = try Engine(
            loop: loop, store: try DownloadStore(path: dir + "/haul.sqlite"),
            config: EngineConfig(downloadRoot: dir), log: Logger())
        routes = API(engine: engine, loop: loop).routeTable
    }

    func testEveryRouteServesOneOperationThatSaysWhatTheRouteDoes() {
        XCTAssertFalse(routes.isEmpty)
        var seen: Set<String> = []
        for route in routes {
            let name = "\(route.method) \(route.path)"
            XCTAssertTrue(seen.insert(name).inserted, "\(name) is served twice")
            XCTAssertEqual(
                route.changesState, route.operation.changesState,
                "\(name) and \(route.operation.rawValue) disagree about changing state")
            XCTAssertEqual(route.changesState, route.method != "GET", "\(name): only GET reads")
            XCTAssertEqual(
                route.open, route.operation.scope == nil,
                "\(name) is open exactly when \(route.operation.rawValue) needs no scope")
        }
        let served = Set(routes.map(\.operation))
        XCTAssertEqual(Set(HaulCore.Operation.allCases).subtracting(served), [], "operations no route serves")
    }

    func testScopesGrowFromReadToAdmin() {
        func scope(_ method: String, _ path: String) -> Scope?? {
            routes.first { $0.method == method && $0.path == path }.map { $0.operation.scope }
        }
        XCTAssertEqual(scope("GET", "/downloads"), .read)
        XCTAssertEqual(scope("GET", "/downloads/{id}/file"), .read)
        XCTAssertEqual(scope("POST", "/tickets"), .read, "a read-only dashboard needs links to files")
        XCTAssertEqual(scope("POST", "/downloads"), .add)
        XCTAssertEqual(scope("PATCH", "/downloads/{id}"), .add)
        XCTAssertEqual(scope("DELETE", "/downloads"), .manage, "every download of a category, not one's own")
        XCTAssertEqual(scope("PATCH", "/settings"), .manage)
        XCTAssertEqual(scope("PUT", "/categories/{name}"), .manage)
        for method in ["GET", "POST"] { XCTAssertEqual(scope(method, "/webhooks"), .admin, "their secrets sign") }
        XCTAssertEqual(scope("GET", "/healthz"), .some(nil))
        XCTAssertTrue(Scope.read < Scope.add && Scope.add < Scope.manage && Scope.manage < Scope.admin)
    }

    func testTheSpecNamesEachRoutesOperationAndScope() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let yaml = try String(contentsOf: root.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        // (METHOD path) -> (x-haul-operation, x-haul-scope), read from the `paths:` section's indentation.
        var documented: [String: (operation: String?, scope: String?)] = [:]
        var inPaths = false
        var path: String?
        var current: String?
        for line in yaml.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if !line.hasPrefix(" ") && !line.isEmpty { inPaths = line == "paths:"; continue }
            guard inPaths else { continue }
            if line.hasPrefix("  /"), !line.hasPrefix("   "), line.hasSuffix(":") {
                path = String(line.dropFirst(2).dropLast())
            } else if let path, line.hasPrefix("    "), !line.hasPrefix("     "), line.hasSuffix(":"),
                ["get:", "post:", "put:", "patch:", "delete:"].contains(line.trimmingCharacters(in: .whitespaces))
            {
                current = line.trimmingCharacters(in: .whitespaces).dropLast().uppercased() + " " + path
                documented[current!] = (nil, nil)
            } else if let key = current, line.hasPrefix("      x-haul-operation: ") {
                documented[key]?.operation = String(line.dropFirst("      x-haul-operation: ".count))
            } else if let key = current, line.hasPrefix("      x-haul-scope: ") {
                documented[key]?.scope = String(line.dropFirst("      x-haul-scope: ".count))
            }
        }
        XCTAssertEqual(documented.count, routes.count)
        for route in routes {
            let name = "\(route.method) \(route.path)"
            XCTAssertEqual(documented[name]?.operation, route.operation.rawValue, name)
            XCTAssertEqual(documented[name]?.scope, route.operation.scope?.name ?? "none", name)
        }
    }
}
