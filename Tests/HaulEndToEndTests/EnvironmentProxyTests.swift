import Foundation
import XCTest

/// A server started with proxy variables in its environment: libcurl would send every transfer through that proxy
/// on its own, and `--deny-private-networks` would then check the proxy's address instead of the origin's. Every
/// transfer names its proxy (none), so the variables change nothing.
final class EnvironmentProxyTests: HaulTestCase {
    private var proxy: HostileOrigin!
    private var receiver: HostileOrigin!

    /// The origin at 127.0.0.1 stands for a public server (an exception), as the proxy would be.
    override var serveArguments: [String] {
        super.serveArguments + [
            "--deny-private-networks", "--allow-networks", "127.0.0.1/32",
            "--connections", "4", "--min-split-size", "64k",
        ]
    }

    override var serveEnvironment: [String: String]? {
        var environment = ProcessInfo.processInfo.environment
        for name in ["http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"] {
            environment[name] = proxy.baseURL
        }
        for name in ["no_proxy", "NO_PROXY"] { environment[name] = nil }
        return environment
    }

    override func setUpWithError() throws {
        // What a proxy would answer for anything asked of it: a file that is no origin's.
        proxy = try HostileOrigin { _ in
            .send(
                HostileOrigin.reply(headers: ["Content-Length: 7", "Connection: close"], body: Array("proxied".utf8)))
        }
        receiver = try HostileOrigin { _ in
            .send(HostileOrigin.reply("204 No Content", headers: ["Connection: close"]))
        }
        try super.setUpWithError()
    }

    override func tearDownWithError() throws {
        try super.tearDownWithError()
        proxy?.stop()
        receiver?.stop()
    }

    func testTheProxyOfTheEnvironmentIsNeverContacted() throws {
        let hook = try api.request(
            "POST", "/webhooks",
            json: [
                "url": receiver.baseURL + "/hook",
                "events": ["completed", "failed"],
            ])
        XCTAssertEqual(hook.status, 201, hook.text)

        // Probe and segments: the file comes from the origin, in four ranges.
        let hash = try sandbox.makeRandomFile("www/big.bin", size: 1 << 20)
        let done = try waitForState(try add(["url": originURL("big.bin")]), "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        XCTAssertGreaterThan(
            try originRequests().filter { ($0["path"] as? String)?.hasSuffix("big.bin") == true }
                .count, 1, "the origin served the segments itself")

        // Cloud metadata stays refused by its own address, not passed because the proxy's is allowed.
        let failed = try waitForState(try add(["url": "http://169.254.169.254/latest/meta-data/"]), "failed")
        let error = failed["error"] as? [String: Any]
        XCTAssertEqual(error?["code"] as? String, "blocked_address", "\(failed)")
        let message = error?["message"] as? String ?? ""
        XCTAssertTrue(message.contains("169.254.169.254"), message)
        XCTAssertFalse(message.contains("127.0.0.1"), "the message names the URL's address: \(message)")

        // The webhook's receiver is reached directly too.
        try waitFor("both webhook deliveries") { receiver.requests.count >= 2 }
        XCTAssertEqual(proxy.requests.count, 0, "the proxy was contacted: \(proxy.requests.map(\.line))")
    }
}
