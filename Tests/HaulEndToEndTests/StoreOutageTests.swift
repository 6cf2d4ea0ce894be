import Foundation
import HaulLoop
import HaulTestSupport
import XCTest

/// PostgreSQL out of reach: what needs the store answers 503 with Retry-After (nothing was changed, try again),
/// not 500; `/readyz` says so for a load balancer while `/healthz` stays 200; and it all comes back by itself.
final class StoreOutageTests: HaulTestCase {
    private var storeURL: String!
    /// The database's name: `postgresql:///NAME?host=...`.
    private var database: String {
        String(storeURL.dropFirst("postgresql:///".count).prefix { $0 != "?" })
    }

    override var serveArguments: [String] { super.serveArguments + ["--store", storeURL] }

    override func setUpWithError() throws {
        storeURL = try PostgresServer.shared().createDatabase()
        try super.setUpWithError()
    }

    override func tearDownWithError() throws {
        try? setConnections(allowed: true)
        try super.tearDownWithError()
    }

    /// Lets the database take connections or not; not, its sessions (Haul's) are ended too: an outage.
    private func setConnections(allowed: Bool) throws {
        let admin = try PostgresDatabase(url: try PostgresServer.shared().url("postgres"))
        try admin.execute("ALTER DATABASE \(database) ALLOW_CONNECTIONS \(allowed)")
        if !allowed {
            try admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(database)'")
        }
    }

    func testAnUnreachableStoreIsAServiceUnavailableThatPasses() throws {
        let hash = try sandbox.makeRandomFile("www/before.bin", size: 20_000)
        let before = try waitForState(try add(["url": originURL("before.bin")]), "completed")
        XCTAssertEqual(try api.get("/readyz").status, 200)
        XCTAssertEqual(try api.get("/readyz").json["status"] as? String, "ready")

        try setConnections(allowed: false)
        var refused: Client.Reply!
        try waitFor("a POST refused while the store is away") {
            refused = try api.request("POST", "/downloads", json: ["url": originURL("during.bin")])
            return refused.status != 201
        }
        XCTAssertEqual(refused.status, 503, refused.text)
        XCTAssertEqual(refused.header("Retry-After"), "5")
        XCTAssertEqual(refused.header("Content-Type"), "application/problem+json")
        XCTAssertEqual(refused.json["type"] as? String, "urn:haul:problem:store-unavailable")
        for reply in [
            try patch(try XCTUnwrap(before["id"] as? String), ["priority": 3]),
            try api.request("PUT", "/categories/films", json: [:]),
            try api.request("PATCH", "/settings", json: ["max_active": 2]),
        ] {
            XCTAssertEqual(reply.status, 503, reply.text)
        }
        try waitFor("/readyz to say the store is away") { try api.get("/readyz").status == 503 }
        let unready = try api.get("/readyz")
        XCTAssertEqual(unready.json["status"] as? String, "unavailable")
        XCTAssertEqual(unready.header("Retry-After"), "5")
        XCTAssertTrue((unready.json["reason"] as? String ?? "").contains("store"), unready.text)
        // Alive, and what it knows is still served.
        XCTAssertEqual(try api.get("/healthz").status, 200)
        let listed = try api.get("/downloads")
        XCTAssertEqual(listed.status, 200)
        XCTAssertEqual((listed.json["downloads"] as? [[String: Any]])?.count, 1)
        XCTAssertEqual(try api.get("/downloads/\(try XCTUnwrap(before["id"] as? String))/file").body.count, 20_000)

        // Back: ready again, and the same POST succeeds.
        try setConnections(allowed: true)
        try waitFor("/readyz to be 200 again") { try api.get("/readyz").status == 200 }
        let again = try sandbox.makeRandomFile("www/during.bin", size: 30_000)
        let done = try waitForState(try add(["url": originURL("during.bin")]), "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), again)
        XCTAssertEqual(try sha256(try downloadedPath(before)), hash)
    }
}
