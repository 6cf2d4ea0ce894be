import Foundation
import XCTest

@testable import HaulLoop

/// A connection held by one loop (the API's) and answered from another (the engine's), as `--threads` 2 or more
/// runs the server: each thread in its own loop, real HTTP over loopback.
final class ForwardedExchangeTests: XCTestCase {
    /// What the handler saw, written on the answering loop's thread and read by the test after a semaphore.
    private final class Seen: @unchecked Sendable {
        let lock = NSLock()
        var offTheAnsweringLoop = 0
        var queuedWhenDrained: [Int] = []
        var closes = 0
        var closedOnTheAnsweringLoop = false
        var sendAfterCloseQueued = -1
        func update(_ body: (Seen) -> Void) { lock.withLock { body(self) } }
    }

    private var io: LoopThread!
    private var home: LoopThread!
    private var server: HTTPServer!
    private var port: UInt16 = 0

    /// `oneLoop`: the connections are answered on their own loop, as with `--threads 1`.
    private func serve(
        oneLoop: Bool = false, connections: ConnectionPolicy = ConnectionPolicy(),
        answeredHere: ((HTTPRequest, Double) -> HTTPResponse?)? = nil,
        _ handler: @escaping (any ServerExchange) -> Void
    ) throws {
        io = try LoopThread(name: "test-api")
        home = oneLoop ? io : try LoopThread(name: "test-engine")
        server = try HTTPServer(
            loop: io.loop, handledOn: home.loop, connections: connections, answeredHere: answeredHere, handler: handler)
        port = try server.bind(host: "127.0.0.1", port: 0)
        try io.start()
        if !oneLoop { try home.start() }
    }

    override func setUp() {
        super.setUp()
        // As the server does (main.swift): a write to a connection the client or the deadline closed is an error
        // libevent handles, not the end of the process.
        signal(SIGPIPE, SIG_IGN)
    }

    override func tearDown() {
        io?.stop()
        home?.stop()
        server?.close()
        // Freed here: XCTest keeps its test cases to the end of the run, and LeakSanitizer counts the weak
        // references' tables of a server still alive then as leaked.
        server = nil
        io = nil
        home = nil
        super.tearDown()
    }

    private static func piece(_ index: Int) -> [UInt8] {
        (0..<(64 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) }
    }

    func testAStreamAnsweredFromAnotherLoopArrivesWholeAndEachDrainFollowsItsBytes() throws {
        let seen = Seen()
        let pieces = 48
        try serve { [unowned self] exchange in
            let home = self.home.loop
            if !home.inLoopThread { seen.update { $0.offTheAnsweringLoop += 1 } }
            exchange.startStream(status: 200, headers: [("Content-Type", "application/octet-stream")])
            exchange.limitSendBuffer(16 << 10)
            var sent = 0
            func next() {
                guard sent < pieces else { return exchange.end() }
                sent += 1
                exchange.send(Self.piece(sent)) {
                    if !home.inLoopThread { seen.update { $0.offTheAnsweringLoop += 1 } }
                    seen.update { $0.queuedWhenDrained.append(exchange.queuedBytes) }
                    next()
                }
            }
            next()
        }
        var received: [UInt8] = []
        let status = try APIRequest(url: "http://127.0.0.1:\(port)/stream").stream { _, chunk in
            received += chunk
            // A slow reader: the server's queue fills and its drains wait for the reader.
            if received.count % (256 << 10) < chunk.count { usleep(2_000) }
            return true
        }
        XCTAssertEqual(status, 200)
        XCTAssertEqual(received.count, pieces << 16)
        XCTAssertEqual(received, (1...pieces).flatMap(Self.piece), "the bytes arrived in order, whole")
        seen.update { seen in
            XCTAssertEqual(seen.offTheAnsweringLoop, 0, "the handler and its drains ran on the answering loop")
            XCTAssertEqual(seen.queuedWhenDrained.count, pieces)
            XCTAssertEqual(seen.queuedWhenDrained.filter { $0 != 0 }, [], "a drain means everything was written")
        }
    }

    func testAClientLeavingAStreamIsToldOnceOnTheAnsweringLoopAndLaterSendsAreDropped() throws {
        let seen = Seen()
        let closed = DispatchSemaphore(value: 0)
        try serve { [unowned self] exchange in
            let home = self.home.loop
            exchange.startStream(status: 200, headers: [])
            exchange.onClose = {
                seen.update {
                    $0.closes += 1
                    $0.closedOnTheAnsweringLoop = home.inLoopThread
                }
                exchange.send(Self.piece(0), drained: nil)
                seen.update { $0.sendAfterCloseQueued = exchange.queuedBytes }
                closed.signal()
            }
            exchange.send(Self.piece(1), drained: nil)
        }
        var first = 0
        _ = try APIRequest(url: "http://127.0.0.1:\(port)/leave").stream { _, chunk in
            first += chunk.count
            return false
        }
        XCTAssertGreaterThan(first, 0)
        XCTAssertEqual(closed.wait(timeout: .now() + 10), .success, "the answering loop heard the client leave")
        usleep(100_000)
        seen.update { seen in
            XCTAssertEqual(seen.closes, 1)
            XCTAssertTrue(seen.closedOnTheAnsweringLoop)
            XCTAssertEqual(seen.sendAfterCloseQueued, 0, "a send after the close queued nothing")
        }
    }

    /// A handler that starts a stream once `wait` returns (on a thread of its own), and counts the close it hears.
    private func startingLate(
        _ seen: Seen, _ closed: DispatchSemaphore, after wait: @escaping @Sendable () -> Void
    )
        -> (any ServerExchange) -> Void
    {
        { [unowned self] exchange in
            let home = LoopBound(self.home.loop)
            let held = LoopBound(exchange)
            DispatchQueue.global().async {
                wait()
                home.value.post {
                    let exchange = held.value
                    exchange.startStream(status: 200, headers: [])
                    exchange.onClose = {
                        seen.update { $0.closes += 1 }
                        closed.signal()
                    }
                    exchange.send(Self.piece(1), drained: nil)
                }
            }
        }
    }

    /// The streams the server holds open, counted on its loop.
    private func openStreams() -> Int {
        let streams = Seen()
        let counted = DispatchSemaphore(value: 0)
        let server = LoopBound(self.server!)
        io.loop.post {
            streams.update { $0.closes = server.value.streams.count }
            counted.signal()
        }
        XCTAssertEqual(counted.wait(timeout: .now() + 10), .success)
        return streams.lock.withLock { streams.closes }
    }

    /// A client that leaves before its stream starts (the handler was slow to answer: evhttp has detached the
    /// request from the closed connection by then) is told once, as one that leaves during the stream, and the
    /// server lets the exchange go: nothing waits for ever on a stream no one reads. Answered from the same loop
    /// and from another.
    func testAClientLeavingBeforeItsStreamStartsIsToldOnceAndLetGo() throws {
        for oneLoop in [true, false] {
            tearDown()
            let seen = Seen()
            let arrived = DispatchSemaphore(value: 0)
            let left = DispatchSemaphore(value: 0)
            let closed = DispatchSemaphore(value: 0)
            try serve(
                oneLoop: oneLoop,
                startingLate(seen, closed) {
                    // Started once the client has closed its socket and the server's loop has seen it.
                    arrived.signal()
                    _ = left.wait(timeout: .now() + 10)
                    usleep(200_000)
                })
            let connection = try KeptAlive(port: port)
            try connection.write("GET /late HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            XCTAssertEqual(arrived.wait(timeout: .now() + 10), .success)
            connection.close()
            left.signal()
            XCTAssertEqual(
                closed.wait(timeout: .now() + 10), .success, "told of the client gone (one loop: \(oneLoop))")
            usleep(100_000)
            XCTAssertEqual(seen.lock.withLock { seen.closes }, 1)
            XCTAssertEqual(openStreams(), 0, "no stream held open (one loop: \(oneLoop))")
        }
    }

    /// A stream started after the request deadline closed its connection (the handler took longer than the
    /// deadline) is told of the close once, and the server lets it go; a write to the closed socket is an error
    /// libevent handles.
    func testAStreamStartedPastItsRequestDeadlineIsToldOfTheCloseAndLetGo() throws {
        for oneLoop in [true, false] {
            tearDown()
            let seen = Seen()
            let closed = DispatchSemaphore(value: 0)
            try serve(
                oneLoop: oneLoop, connections: ConnectionPolicy(requestDeadline: 0.3),
                startingLate(seen, closed) { usleep(1_000_000) })
            let connection = try KeptAlive(port: port)
            try connection.write("GET /late HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            XCTAssertEqual(closed.wait(timeout: .now() + 5), .success, "told of the client gone (one loop: \(oneLoop))")
            connection.close()
            XCTAssertEqual(seen.lock.withLock { seen.closes }, 1)
            XCTAssertEqual(openStreams(), 0, "no stream held open (one loop: \(oneLoop))")
        }
    }

    /// Twenty requests on one kept-alive connection, answered from the other loop or, every third, on the
    /// connection's own loop (`answeredHere`, which the handler then never sees): each answer whole, in order, on
    /// the same socket.
    func testOneKeptAliveConnectionTakesAnswersFromEitherLoopInOrder() throws {
        let seen = Seen()
        let answeredOnIO = Seen()
        try serve(
            answeredHere: { request, _ in
                answeredOnIO.update { $0.closes += 1 }
                guard request.target.hasSuffix("/here") else { return nil }
                return HTTPResponse(status: 200, body: Array("here \(request.target)".utf8))
            }
        ) { exchange in
            seen.update { $0.closes += 1 }
            let body = Array("answered \(exchange.message.target)".utf8)
            exchange.respond(HTTPResponse(status: 200, headers: [("Content-Type", "text/plain")], body: body))
        }
        let connection = try KeptAlive(port: port)
        defer { connection.close() }
        for index in 0..<20 {
            let here = index % 3 == 0
            let target = here ? "/r\(index)/here" : "/r\(index)"
            let reply = try connection.get(target)
            XCTAssertTrue(reply.head.hasPrefix("HTTP/1.1 200"), reply.head)
            XCTAssertEqual(reply.body, (here ? "here " : "answered ") + target)
        }
        XCTAssertEqual(seen.lock.withLock { seen.closes }, 13, "the handler saw only the forwarded requests")
        XCTAssertEqual(answeredOnIO.lock.withLock { answeredOnIO.closes }, 20, "asked of every request")
    }

    /// The engine's loop takes requests from the API's without pause under load: posted work at its timers'
    /// priority leaves them their turns. At the API's priority, a busy inbox held the engine's tick back for ten
    /// seconds under `wrk`, and this test's timer fired under ten times in its second (checked; not asserted, as
    /// how much a loaded machine lets the poster keep up is not this test's to promise).
    func testALoopTakingPostsWithoutPauseStillRunsItsTimers() throws {
        do {
            let engine = try LoopThread(name: "test-engine")
            engine.loop.prioritizeInbox(.transfer)
            let fired = Seen()
            let timer = LoopTimer(loop: engine.loop, delay: 0.01, repeating: true, priority: .transfer) {
                fired.update { $0.closes += 1 }
            }
            let loop = LoopBound(engine.loop)
            // Armed before its loop runs (nothing else touches the loop yet).
            timer.start()
            try engine.start()
            // A poster that keeps the inbox from running dry (each job a request's few microseconds of work, at
            // most 256 waiting), for a second or until the timer fired ten times.
            let waiting = Seen()
            let deadline = Date().addingTimeInterval(1)
            while Date() < deadline, fired.lock.withLock({ fired.closes }) < 10 {
                guard waiting.lock.withLock({ waiting.closes }) < 256 else {
                    usleep(20)
                    continue
                }
                waiting.update { $0.closes += 1 }
                loop.value.post {
                    var sum = 0
                    for value in 0..<2_000 { sum &+= value &* value }
                    waiting.update { $0.closes -= 1 + (sum == 1 ? 1 : 0) }
                }
            }
            engine.stop()
            let count = fired.lock.withLock { fired.closes }
            XCTAssertEqual(count, 10, "the timer ran \(count) times in a second of posts")
            withExtendedLifetime(timer) {}
        }
    }
}

/// One HTTP/1.1 connection to loopback, kept alive across requests: each `get` writes a request and reads its
/// answer by its Content-Length.
private final class KeptAlive {
    private let fd: Int32
    private var pending: [UInt8] = []

    init(port: UInt16) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
    }

    func close() { _ = Glibc.close(fd) }

    func write(_ text: String) throws {
        let bytes = Array(text.utf8)
        guard send(fd, bytes, bytes.count, 0) == bytes.count else { throw POSIXError(.EPIPE) }
    }

    func get(_ target: String) throws -> (head: String, body: String) {
        let request = Array("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        guard send(fd, request, request.count, 0) == request.count else { throw POSIXError(.EPIPE) }
        let separator = Array("\r\n\r\n".utf8)
        var headEnd: Int?
        while headEnd == nil {
            headEnd = pending.indices.dropLast(3).first { Array(pending[$0..<$0 + 4]) == separator }
            if headEnd == nil { try receive() }
        }
        let head = String(decoding: pending[..<headEnd!], as: UTF8.self)
        let length =
            head.split(separator: "\r\n").compactMap { line -> Int? in
                let parts = line.split(separator: ":", maxSplits: 1)
                guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
                return Int(parts[1].trimmingCharacters(in: .whitespaces))
            }.first ?? 0
        let bodyStart = headEnd! + 4
        while pending.count < bodyStart + length { try receive() }
        let body = String(decoding: pending[bodyStart..<bodyStart + length], as: UTF8.self)
        pending.removeFirst(bodyStart + length)
        return (head, body)
    }

    private func receive() throws {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(fd, &buffer, buffer.count, 0)
        guard count > 0 else { throw POSIXError(.ECONNRESET) }
        pending += buffer[..<count]
    }
}
