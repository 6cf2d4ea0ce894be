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

    private func serve(_ handler: @escaping (any ServerExchange) -> Void) throws {
        io = try LoopThread(name: "test-api")
        home = try LoopThread(name: "test-engine")
        server = try HTTPServer(loop: io.loop, handledOn: home.loop, handler: handler)
        port = try server.bind(host: "127.0.0.1", port: 0)
        try io.start()
        try home.start()
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

    func testAnAnswerFromAnotherLoopKeepsTheConnectionForTheNextRequest() throws {
        try serve { exchange in
            let body = Array("answered \(exchange.message.target)".utf8)
            exchange.respond(HTTPResponse(status: 200, headers: [("Content-Type", "text/plain")], body: body))
        }
        for index in 0..<20 {
            let reply = try APIRequest(url: "http://127.0.0.1:\(port)/r\(index)").send()
            XCTAssertEqual(reply.status, 200)
            XCTAssertEqual(String(decoding: reply.body, as: UTF8.self), "answered /r\(index)")
        }
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
