import Foundation
import HaulLoop
import HaulTestSupport
import XCTest
@testable import HaulCore

/// Every outbound transfer is built in one place, from one policy: what a download's fetches and a webhook's
/// attempts carry, whoever starts them, and which dialect owns a URL.
final class OutboundTests: XCTestCase {
    func testEveryFetchOfADownloadCarriesTheOnePolicy() throws {
        let body = [UInt8](repeating: 3, count: 16 << 20)
        let fetcher = ScriptedFetcher(body: body)
        let clock = ManualClock()
        let engine = try makeEngine(fetcher: fetcher, clock: clock) { config in
            config.connectTimeout = 7
            config.addressPolicy = AddressPolicy()
        }
        var request = NewDownload(url: "http://origin.test/file.bin")
        request.connections = 4
        request.insecure = true
        request.headers = [HeaderField(name: "Cookie", value: "a=1")]
        let id = try engine.add(request).snapshot.download.id
        for _ in 0..<20_000 where engine.receivedBytes(id) != Int64(body.count) {
            fetcher.pump()
            clock.advance(0.01)
        }
        XCTAssertEqual(engine.receivedBytes(id), Int64(body.count), "every byte fetched")
        XCTAssertGreaterThan(fetcher.requests.count, 1, "the probe and at least one more segment")
        guard fetcher.requests.count > 1 else { return }
        for sent in fetcher.requests {
            XCTAssertEqual(sent.policy.schemes, ["http", "https"])
            XCTAssertEqual(sent.policy.proxy, .none)
            XCTAssertNotNil(sent.policy.addressPolicy)
            XCTAssertEqual(sent.policy.connectTimeout, 7)
            XCTAssertFalse(sent.policy.verifyTLS, "the download asked for no TLS check")
            XCTAssertNil(sent.policy.timeout, "a download may take hours")
            XCTAssertEqual(sent.policy.maxRedirects, 10)
            XCTAssertEqual(sent.headers.map(\.0), ["Cookie"])
        }
        XCTAssertEqual(fetcher.requests[0].range?.start, 0)
        XCTAssertNil(fetcher.requests[0].range?.end, "the probe asks for bytes=0-")
        XCTAssertNil(fetcher.requests[0].ifRange)
        for segment in fetcher.requests.dropFirst() {
            XCTAssertGreaterThan(segment.range?.start ?? 0, 0, "the probe's stream holds byte 0")
            XCTAssertEqual(segment.ifRange, "\"s1\"", "a segment asks for the version the probe saw")
        }
    }

    func testAWebhookAttemptIsAnHTTPPostThatFollowsNoRedirect() {
        var config = EngineConfig(downloadRoot: "/nonexistent")
        config.connectTimeout = 30
        config.addressPolicy = AddressPolicy()
        let policy = Outbound.webhookPolicy(config, timeout: 15)
        let request = Outbound.post(
            "http://hooks.test/in", body: Array("{}".utf8),
            headers: [("Content-Type", "application/json")], policy: policy)
        XCTAssertEqual(request.body, Array("{}".utf8))
        XCTAssertEqual(request.policy.schemes, ["http", "https"])
        XCTAssertEqual(request.policy.maxRedirects, 0)
        XCTAssertEqual(request.policy.timeout, 15)
        XCTAssertEqual(request.policy.connectTimeout, 15, "never longer than the attempt")
        XCTAssertEqual(request.policy.proxy, .none)
        XCTAssertNotNil(request.policy.addressPolicy)
        XCTAssertTrue(request.policy.userAgent.hasSuffix(" webhook"))
    }

    func testAProxyIsTheDownloadsElseTheCategorysElseTheSettingsAndOnlyTheOperatorsIsTrusted() throws {
        func server(_ text: String) throws -> ProxyServer { try ProxyServer.parse(text).get() }
        var config = EngineConfig(downloadRoot: "/nonexistent")
        config.noProxy = try NoProxy.parse(["internal.example", "10.0.0.0/8"]).get()
        var download = Download(
            id: "d", sequence: 1, url: "http://origin.test/f", headers: [],
            requestedFilename: nil, directory: "", state: .queued, connections: 1, priority: 0,
            maxSpeed: nil, createdAt: Date())
        let url = download.url
        XCTAssertNil(Outbound.proxy(config, for: download, category: nil, url: url), "none anywhere: direct")
        config.environmentProxies = ["http": try server("http://env:3128"), "*": try server("socks5://all:1080")]
        XCTAssertEqual(Outbound.proxy(config, for: download, category: nil, url: url)?.server.host, "env")
        XCTAssertEqual(Outbound.proxy(config, for: download, category: nil, url: "https://o/f")?.server.host, "all")

        config.proxy = .through(try server("http://settings:3128"))
        XCTAssertEqual(Outbound.proxy(config, for: download, category: nil, url: url)?.server.host, "settings")
        var category = Category(name: "c", directory: "c", proxy: .through(try server("socks5h://category:1080")))
        let fromCategory = Outbound.proxy(config, for: download, category: category, url: url)
        XCTAssertEqual(fromCategory?.server.host, "category")
        XCTAssertEqual(fromCategory?.trusted, true)
        category.proxy = .direct
        XCTAssertNil(Outbound.proxy(config, for: download, category: category, url: url), "none beats the settings")

        download.proxy = .through(try server("socks5://own:1080"))
        let own = Outbound.proxy(config, for: download, category: category, url: url)
        XCTAssertEqual(own?.server.host, "own")
        XCTAssertEqual(own?.trusted, false, "a client's own proxy is held to the address policy")
        download.proxy = config.proxy
        XCTAssertEqual(Outbound.proxy(config, for: download, category: nil, url: url)?.trusted, true)

        let bypass = try XCTUnwrap(own?.bypass)
        XCTAssertTrue(bypass.covers("internal.example"))
        XCTAssertTrue(bypass.covers("a.b.internal.example"))
        XCTAssertFalse(bypass.covers("notinternal.example"))
        XCTAssertTrue(bypass.covers("10.1.2.3"))
        XCTAssertFalse(bypass.covers("11.1.2.3"))
        XCTAssertEqual(bypass.curlList, "internal.example,10.0.0.0/8")
    }

    func testAProxyURLIsCheckedAndShownWithoutItsPassword() throws {
        let server = try ProxyServer.parse("socks5h://alice:s%40cret@proxy.lan:1080").get()
        XCTAssertEqual(server.kind, .socks5h)
        XCTAssertTrue(server.resolvesNames)
        XCTAssertTrue(server.hasCredentials)
        XCTAssertEqual(server.shown, "socks5h://alice:***@proxy.lan:1080")
        XCTAssertEqual(try ProxyServer.parse("http://proxy.lan:3128").get().shown, "http://proxy.lan:3128")
        XCTAssertFalse(try ProxyServer.parse("socks5://[::1]:1080").get().resolvesNames)
        XCTAssertEqual(try ProxyChoice.parse("NONE").get(), .direct)
        for bad in [
            "ftp://proxy:21", "proxy.lan:3128", "http://proxy.lan:3128/path", "http://:3128",
            "http://proxy.lan:99999", "http://pro xy:1",
        ] {
            XCTAssertThrowsError(try ProxyServer.parse(bad).get(), bad)
        }
        XCTAssertThrowsError(try NoProxy.parse(["good.example", "bad host"]).get())
    }

    func testAURLsSchemeNamesItsDialect() {
        XCTAssertEqual(Origins.schemes, ["http", "https", "ftp", "ftps", "sftp"])
        for url in ["http://a.test/x", "HTTPS://a.test/x", "Http://a.test"] {
            XCTAssertEqual(Origins.dialect(for: url)?.schemes, ["http", "https"], url)
        }
        for url in ["ftp://a.test/x", "FTPS://a.test:990/x", "sftp://a.test/x"] {
            XCTAssertEqual(Origins.dialect(for: url)?.schemes, ["ftp", "ftps", "sftp"], url)
        }
        for url in ["file:///etc/passwd", "gopher://a.test", "no-scheme", ""] {
            XCTAssertNil(Origins.dialect(for: url), url)
        }
    }

    func testTheHTTPDialectAsksForEachKindOfFetch() {
        let http = HTTPDialect()
        let policy = OutboundPolicy()
        func sent(_ kind: FetchKind) -> TransferRequest {
            http.request(kind, url: "http://a.test/f", headers: [], policy: policy)
        }
        XCTAssertEqual(sent(.probe).range?.start, 0)
        XCTAssertNil(sent(.probe).range?.end)
        XCTAssertEqual(sent(.head).method, .head)
        XCTAssertNil(sent(.head).range)
        XCTAssertNil(sent(.whole).range)
        XCTAssertEqual(sent(.whole).method, .get)
        let range = sent(.range(start: 10, end: 19, ifRange: "\"v\""))
        XCTAssertEqual(range.range?.start, 10)
        XCTAssertEqual(range.range?.end, 19)
        XCTAssertEqual(range.ifRange, "\"v\"")
        let compare = sent(.compare(start: 0, end: 99, ifRange: nil))
        XCTAssertEqual(compare.range?.end, 99)
        XCTAssertNil(compare.ifRange)
        let answer = TransferResponse(
            status: 200,
            headers: [
                ("etag", "W/\"weak\""),
                ("last-modified", "Tue, 01 Dec 2026 10:00:00 GMT"),
            ],
            effectiveURL: "http://a.test/f")
        let validators = http.validators(answer)
        XCTAssertNil(validators.etag, "a weak tag cannot guard a range")
        XCTAssertEqual(validators.lastModified, "Tue, 01 Dec 2026 10:00:00 GMT")
        XCTAssertEqual(http.error(status: 404, response: nil).code, .http(404))
        XCTAssertTrue(http.error(status: 503, response: nil).retryable)
    }
}
