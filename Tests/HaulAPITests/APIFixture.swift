import Foundation
import HaulCore
import HaulLoop
import HaulTestSupport
@testable import HaulAPI

/// A real API over a real engine and SQLite store in a temporary directory, called in-process: no socket, no
/// server. Transfers go to a fetcher that never answers and time is a manual clock, so what a test sees depends on
/// nothing but what it does.
final class APIFixture {
    let directory: String
    let loop: EventLoop
    let store: DownloadStore
    let engine: Engine
    let api: API
    let clock = ManualClock()
    /// The loop turns the last pending answer took.
    private(set) var turnsTaken = 0
    let fetcher = SilentFetcher()

    init(
        access: AccessPolicy = AccessPolicy(), events: EventStreamConfig = EventStreamConfig(),
        maxActive: Int = 5, limits: APILimits = APILimits(), aria2: Aria2Config = Aria2Config(),
        qbittorrent: QBittorrentConfig = QBittorrentConfig()
    ) throws {
        directory = NSTemporaryDirectory() + "haul-api-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory + "/downloads", withIntermediateDirectories: true)
        loop = try EventLoop()
        store = try DownloadStore(path: directory + "/haul.sqlite")
        var config = EngineConfig(downloadRoot: directory + "/downloads")
        config.maxActive = maxActive
        config.space = SpacePolicy(minFreeSpace: 0)
        engine = try Engine(
            loop: loop, store: store, config: config, log: Logger(minimum: .error), fetcher: fetcher,
            clock: clock)
        try engine.start()
        api = API(
            engine: engine, loop: loop, events: events, access: access, limits: limits, aria2: aria2,
            qbittorrent: qbittorrent)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    /// The answer to one request, as a client would send it (`Host` included unless given).
    func call(
        _ method: String, _ target: String, json: String? = nil, body: [UInt8]? = nil,
        headers: [(String, String)] = [], peer: String = "127.0.0.1"
    ) -> HTTPResponse {
        var all = headers.map { (name: $0.0, value: $0.1) }
        if !all.contains(where: { $0.name.lowercased() == "host" }) { all.append(("Host", "127.0.0.1:8080")) }
        if json != nil, !all.contains(where: { $0.name.lowercased() == "content-type" }) {
            all.append(("Content-Type", "application/json"))
        }
        let request = HTTPRequest(
            method: method, target: target, headers: all, body: body ?? Array((json ?? "").utf8),
            peer: peer)
        switch api.handle(request) {
        case .response(let response): return response
        case .eventStream(let stream): return HTTPResponse(status: 200, headers: stream.headers)
        case .fileStream(let stream):
            return HTTPResponse(
                status: stream.answer?.status ?? 200, headers: (stream.answer?.headers ?? []) + stream.headers)
        case .webSocket(let upgrade): return HTTPResponse(status: 101, headers: upgrade.headers)
        case .pending(let pending):
            // A bulk change goes a slice per loop turn: the turns are the manual clock's.
            turnsTaken = 0
            while pending.response == nil, turnsTaken < 100_000 {
                if !clock.fireNext() { clock.advance(0.001) }
                turnsTaken += 1
            }
            return pending.response ?? HTTPResponse(status: 599)
        }
    }

    /// Adds a paused download and returns its id.
    func addPaused(_ url: String = "http://127.0.0.1:9/x.bin", headers: [(String, String)] = []) -> String {
        let reply = call("POST", "/downloads", json: "{\"url\":\"\(url)\",\"start_paused\":true}", headers: headers)
        return json(reply)["id"] as? String ?? ""
    }

    func json(_ response: HTTPResponse) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any] ?? [:]
    }
}

/// An event stream's client side without a socket: what the hub writes, and a queue the test fills or drains.
final class FakeSink: EventSink {
    private(set) var written = ""
    /// While set, everything written stays queued (a client that stopped reading).
    var stalled = false
    private(set) var queuedBytes = 0
    private(set) var closed = false
    private(set) var finished = false
    var onDrained: (() -> Void)?
    var onClose: (() -> Void)?

    func write(_ text: String) {
        written += text
        if stalled { queuedBytes += text.utf8.count }
    }

    func close() {
        closed = true
        let onClose = self.onClose
        self.onClose = nil
        onClose?()
    }

    func finish() { finished = true }

    /// The client reads everything queued.
    func drain() {
        stalled = false
        queuedBytes = 0
        onDrained?()
    }

    /// The events written so far (`data:` lines joined as SSE does), comments left out.
    var events: [(id: String?, name: String, data: String)] {
        written.components(separatedBy: "\n\n").compactMap { block in
            var id: String?, name = "message", data: [String] = []
            for line in block.split(separator: "\n") {
                if line.hasPrefix("id: ") { id = String(line.dropFirst(4)) }
                if line.hasPrefix("event: ") { name = String(line.dropFirst(7)) }
                if line.hasPrefix("data: ") { data.append(String(line.dropFirst(6))) }
            }
            return data.isEmpty ? nil : (id, name, data.joined(separator: "\n"))
        }
    }
}
