import Foundation
import HaulLoop
import XCTest

/// Transfers on loops of their own (`TransferLoops`, `--threads` 2 and more) against a real origin on loopback:
/// their delegates hear, on the home loop, what a multi on it would have told them, byte for byte.
final class TransferLoopsTests: XCTestCase {
    /// Hears one transfer; decides on each chunk by `decide` (its index among the taken ones).
    final class Recorder: FetchDelegate {
        var response: TransferResponse?
        var body: [UInt8] = []
        var taken = 0
        var result: TransferResult?
        var accept = true
        var decide: (Int) -> ChunkDecision = { _ in .consumed }
        var onEnd: () -> Void = {}

        func transfer(_ id: TransferID, responded response: TransferResponse) -> Bool {
            XCTAssertNil(self.response, "one response")
            self.response = response
            onResponse()
            return accept
        }

        func transfer(_ id: TransferID, received chunk: TransferChunk) -> ChunkDecision {
            XCTAssertNotNil(response, "no body byte before the response")
            XCTAssertNil(result, "no body byte after the end")
            let decision = decide(taken)
            if decision == .consumed {
                onChunk(chunk, index)
                chunk.append(to: &body)
                taken += 1
            }
            return decision
        }

        /// Bytes the loop wrote under a grant, in calls.
        var wroteBytes = 0
        var wroteCalls = 0
        /// The index after the last body byte the loop wrote.
        var writtenEnd: Int64 = 0
        /// Body bytes heard so far, written or not: the index of the next.
        var index: Int64 { Int64(body.count + wroteBytes) }
        var onChunk: (TransferChunk, Int64) -> Void = { _, _ in }
        var onResponse: () -> Void = {}

        func transfer(_ id: TransferID, wrote count: Int) -> ChunkDecision {
            XCTAssertNotNil(response, "no body byte before the response")
            writtenEnd = index + Int64(count)
            wroteBytes += count
            wroteCalls += 1
            return .consumed
        }

        func transfer(_ id: TransferID, ended result: TransferResult) {
            XCTAssertNil(self.result, "one end")
            self.result = result
            onEnd()
        }
    }

    private static func reply(_ body: [UInt8]) -> [UInt8] {
        Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n".utf8) + body
    }

    private static func randomBytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        return (0..<count).map { _ in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
    }

    /// Runs `loop` until `done` is called or `seconds` pass (a failure).
    private func run(_ loop: EventLoop, seconds: Double = 30) {
        let watchdog = LoopTimer(loop: loop, delay: seconds) {
            XCTFail("the transfers did not end in \(seconds) s")
            loop.stop()
        }
        watchdog.start()
        loop.run()
        watchdog.cancel()
    }

    /// A transfer the home loop holds (a speed limit's pause) is held in curl on its own loop once about a
    /// megabyte waits: the bytes that reach the delegate at its resume are what was queued, not the whole body,
    /// and every byte arrives in order through pauses on every seventh chunk.
    func testPausedTransferIsHeldOnItsLoopAndEveryByteArrives() throws {
        let body = Self.randomBytes(6 << 20, seed: 1)
        let origin = try HostileOrigin { _ in .send(Self.reply(body)) }
        defer { origin.stop() }
        let loop = try EventLoop()
        let loops = try TransferLoops(home: loop, count: 2)
        defer { loops.close() }
        let recorder = Recorder()
        let id = TransferID(1)
        var firstPause = true
        var deliveredAtResume = -1
        // The measured resume takes all that waits: no pause inside it.
        var measuring = false
        var pausedAt: Set<Int> = []
        var timers: [LoopTimer] = []
        func resumeLater(_ delay: Double, measure: Bool) {
            let timer = LoopTimer(loop: loop, delay: delay) {
                let before = recorder.body.count
                measuring = measure
                loops.resume(id)
                measuring = false
                if measure { deliveredAtResume = recorder.body.count - before }
            }
            timers.append(timer)
            timer.start()
        }
        recorder.decide = { taken in
            if taken == 1, firstPause {
                firstPause = false
                resumeLater(0.5, measure: true)
                return .pause
            }
            if taken > 1, taken % 7 == 0, !firstPause, !measuring, pausedAt.insert(taken).inserted {
                resumeLater(0, measure: false)
                return .pause
            }
            return .consumed
        }
        recorder.onEnd = { loop.stop() }
        try loops.start(id, TransferRequest(url: origin.baseURL + "/big"), delegate: recorder)
        run(loop)
        XCTAssertEqual(recorder.response?.status, 200)
        XCTAssertNil(recorder.result?.failure, recorder.result?.message ?? "")
        XCTAssertEqual(recorder.result?.bodyBytes, Int64(body.count))
        XCTAssertEqual(recorder.body.count, body.count)
        XCTAssertTrue(recorder.body == body, "the bytes in order")
        XCTAssertGreaterThan(deliveredAtResume, 0, "what was queued during the pause arrives at the resume")
        // At most the limit and the chunk that crossed it (curl's buffer, 100 KiB), never the 6 MiB body.
        XCTAssertLessThanOrEqual(deliveredAtResume, TransferLoops.queuedLimit + 100 * 1024)
        XCTAssertGreaterThan(pausedAt.count, 3, "paused again and again")
    }

    /// A refused response and a refused chunk end their transfer as aborted; a cancelled transfer is never heard
    /// from again while others go on; a request that cannot be made throws at `start`.
    func testRefusalsCancelAndBadRequests() throws {
        let body = Self.randomBytes(512 << 10, seed: 2)
        let origin = try HostileOrigin { request in
            request.path == "/forever"
                ? .sendForever(
                    Array("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".utf8),
                    chunk: [UInt8](repeating: 7, count: 16384))
                : .send(Self.reply(body))
        }
        defer { origin.stop() }
        let loop = try EventLoop()
        let loops = try TransferLoops(home: loop, count: 2)
        defer { loops.close() }
        let refusedAnswer = Recorder(), refusedChunk = Recorder(), cancelled = Recorder(), plain = Recorder()
        refusedAnswer.accept = false
        refusedChunk.decide = { _ in .abort }
        var pending = 3
        var settle: LoopTimer?
        for recorder in [refusedAnswer, refusedChunk, plain] {
            recorder.onEnd = {
                pending -= 1
                guard pending == 0 else { return }
                // A while more for anything the cancelled transfer could still say.
                settle = LoopTimer(loop: loop, delay: 0.3) { loop.stop() }
                settle?.start()
            }
        }
        var cancelTimer: LoopTimer?
        cancelled.decide = { taken in
            if taken == 2, cancelTimer == nil {
                cancelTimer = LoopTimer(loop: loop, delay: 0) { loops.cancel(TransferID(3)) }
                cancelTimer?.start()
            }
            return .consumed
        }
        try loops.start(TransferID(1), TransferRequest(url: origin.baseURL + "/a"), delegate: refusedAnswer)
        try loops.start(TransferID(2), TransferRequest(url: origin.baseURL + "/b"), delegate: refusedChunk)
        try loops.start(TransferID(3), TransferRequest(url: origin.baseURL + "/forever"), delegate: cancelled)
        try loops.start(TransferID(4), TransferRequest(url: origin.baseURL + "/c"), delegate: plain)
        var bad = TransferRequest(url: origin.baseURL + "/d")
        bad.headers = [("X-Split", "one\r\nInjected: yes")]
        XCTAssertThrowsError(try loops.start(TransferID(5), bad, delegate: Recorder()))
        run(loop)
        XCTAssertEqual(refusedAnswer.result?.failure, .aborted)
        XCTAssertEqual(refusedAnswer.taken, 0)
        XCTAssertEqual(refusedAnswer.result?.response?.status, 200)
        XCTAssertEqual(refusedChunk.result?.failure, .aborted)
        XCTAssertEqual(refusedChunk.taken, 0)
        XCTAssertNotNil(cancelTimer, "the endless transfer delivered")
        XCTAssertNil(cancelled.result, "a cancelled transfer's delegate hears nothing more")
        XCTAssertTrue(plain.body == body)
        XCTAssertFalse(origin.requests.contains { $0.path == "/d" }, "what cannot be made is never sent")
    }

    /// Hundreds of transfers at once over two loops, a third of them sharing one cookie jar (one curl share handle
    /// without locks: they share a loop), the others spread over both: every body exact, every jar's request
    /// sending its cookie.
    func testManyTransfersOverTwoLoops() throws {
        let count = 240
        let bodies = (0..<count).map { Self.randomBytes(64 << 10, seed: UInt64($0) + 10) }
        let origin = try HostileOrigin { request in
            let index = Int(request.path.split(separator: "/").last ?? "") ?? 0
            return .send(Self.reply(bodies[index % count]))
        }
        defer { origin.stop() }
        let loop = try EventLoop()
        let loops = try TransferLoops(home: loop, count: 2)
        defer { loops.close() }
        XCTAssertEqual(loops.loopCount, 2)
        let jar = try XCTUnwrap(CookieJar(cookies: "session=kept", host: "127.0.0.1"))
        var left = count
        var recorders: [Recorder] = []
        var placed: [Int?] = []
        for index in 0..<count {
            let recorder = Recorder()
            recorder.onEnd = {
                left -= 1
                if left == 0 { loop.stop() }
            }
            recorders.append(recorder)
            let path = index % 3 == 0 ? "/jar/\(index)" : "/plain/\(index)"
            var request = TransferRequest(url: origin.baseURL + path)
            if index % 3 == 0 { request.cookieJar = jar }
            try loops.start(TransferID(index), request, delegate: recorder)
            placed.append(loops.loopIndex(of: TransferID(index)))
        }
        let jarLoops = Set(placed.enumerated().filter { $0.offset % 3 == 0 }.map(\.element))
        XCTAssertEqual(jarLoops.count, 1, "one jar, one loop")
        let otherLoops = Set(placed.enumerated().filter { $0.offset % 3 != 0 }.map(\.element))
        XCTAssertEqual(otherLoops, [0, 1], "the others on both loops")
        run(loop, seconds: 60)
        for (index, recorder) in recorders.enumerated() {
            XCTAssertNil(recorder.result?.failure, "\(index): \(recorder.result?.message ?? "no end")")
            XCTAssertTrue(recorder.body == bodies[index], "\(index): body exact")
        }
        let jarRequests = origin.requests.filter { $0.path.hasPrefix("/jar/") }
        XCTAssertEqual(jarRequests.count, count / 3)
        XCTAssertTrue(jarRequests.allSatisfy { $0.headers["cookie"] == "session=kept" })
        XCTAssertFalse(origin.requests.contains { $0.path.hasPrefix("/plain/") && $0.headers["cookie"] != nil })
    }

    /// A sandbox file to write into, and its bytes read back.
    private func partFile(_ name: String) throws -> (PartFile, String) {
        let root = NSTemporaryDirectory() + "haul-grant-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: root) }
        let directory = try ConfinedDirectory(root: root, relative: "", create: false)
        return (try PartFile(directory: directory, name: name, exclusive: true), root + "/" + name)
    }

    /// Under a grant the loop writes the body itself at the grant's offsets, as far as its end: the delegate hears
    /// counts for those, chunks for what came before the grant and past its end, and the file holds every byte.
    func testGrantedBodyIsWrittenOnItsLoopUpToTheGrantsEnd() throws {
        let recorder = try grantedTransfer(end: 2 << 20, narrowedTo: nil)
        XCTAssertGreaterThan(recorder.wroteBytes, 0, "the loop wrote under the grant")
        XCTAssertLessThanOrEqual(recorder.writtenEnd, 2 << 20, "never past the grant's end")
        // Told in batches (a megabyte, or what a few milliseconds wrote), not a call for each chunk curl read.
        XCTAssertLessThanOrEqual(
            recorder.wroteCalls, 16, "\(recorder.wroteBytes) bytes in \(recorder.wroteCalls) calls")
    }

    /// A grant narrowed after it was given (the runner's, when the machine splits the connection's segment for
    /// another) writes nothing past its new end: the rest comes as chunks.
    func testANarrowedGrantWritesNothingPastItsNewEnd() throws {
        let recorder = try grantedTransfer(end: 3 << 20, narrowedTo: 2 << 20)
        XCTAssertGreaterThan(recorder.wroteBytes, 0, "the loop wrote under the grant")
        XCTAssertLessThanOrEqual(recorder.writtenEnd, 2 << 20, "never past the narrowed end")
    }

    /// A 3 MiB body fetched with a grant for its bytes up to `end` (narrowed to `narrowedTo` as soon as it is
    /// given), the chunks written by the delegate at their place, as the engine does: every byte must be heard
    /// once and land in its place.
    private func grantedTransfer(end: Int64, narrowedTo: Int64?) throws -> Recorder {
        let body = Self.randomBytes(3 << 20, seed: 3)
        let origin = try HostileOrigin { _ in .send(Self.reply(body)) }
        defer { origin.stop() }
        let loop = try EventLoop()
        let loops = try TransferLoops(home: loop, count: 2)
        defer { loops.close() }
        XCTAssertTrue(loops.grantsWrites)
        let (file, path) = try partFile("granted.part")
        let base: Int64 = 1000
        let grant = try file.writeGrant(base: base, end: base + end - 1)
        let recorder = Recorder()
        let id = TransferID(7)
        var granted = false
        recorder.accept = true
        recorder.onChunk = { chunk, index in
            // What the engine does with a chunk: its own write, at the same place.
            do { try file.write(chunk, at: base + index) } catch { XCTFail("\(error)") }
        }
        recorder.onEnd = { loop.stop() }
        // Granted from inside the response's callback, as the runner does. The first chunk waits a while (a speed
        // limit's pause): the loop holds the transfer once a megabyte is queued and sees the grant meanwhile, so
        // the bytes after those are written there however fast curl reads (it may read the whole body at once).
        recorder.onResponse = {
            granted = loops.grant(id, grant)
            if let narrowedTo { grant.narrow(to: base + narrowedTo - 1) }
        }
        var held: LoopTimer?
        recorder.decide = { _ in
            guard held == nil else { return .consumed }
            held = LoopTimer(loop: loop, delay: 0.3) { loops.resume(id) }
            held?.start()
            return .pause
        }
        try loops.start(id, TransferRequest(url: origin.baseURL + "/g"), delegate: recorder)
        run(loop)
        XCTAssertTrue(granted)
        XCTAssertNil(recorder.result?.failure, recorder.result?.message ?? "")
        XCTAssertEqual(recorder.result?.bodyBytes, Int64(body.count))
        XCTAssertEqual(recorder.wroteBytes + recorder.body.count, body.count)
        let written = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertEqual(written.count, Int(base) + body.count)
        XCTAssertTrue(Array(written.dropFirst(Int(base))) == body, "every byte in its place")
        XCTAssertFalse(loops.grant(id, grant), "no grant for a transfer that ended")
        return recorder
    }

    /// Once `cancel` returns, the loop writes nothing more under the transfer's grant: the file may then be
    /// truncated or removed.
    func testNothingIsWrittenAfterCancelReturns() throws {
        let origin = try HostileOrigin { _ in
            .sendForever(
                Array("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".utf8),
                chunk: [UInt8](repeating: 9, count: 65536))
        }
        defer { origin.stop() }
        let loop = try EventLoop()
        let loops = try TransferLoops(home: loop, count: 1)
        defer { loops.close() }
        let (file, path) = try partFile("endless.part")
        let grant = try file.writeGrant(base: 0, end: Int64.max - 1)
        let recorder = Recorder()
        let id = TransferID(8)
        var sizeAtCancel = -1
        var timers: [LoopTimer] = []
        let watch = LoopTimer(loop: loop, delay: 0.001, repeating: true) {
            if recorder.response != nil, timers.isEmpty {
                XCTAssertTrue(loops.grant(id, grant))
                let cancel = LoopTimer(loop: loop, delay: 0.3) {
                    loops.cancel(id)
                    sizeAtCancel = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? -2
                    let settle = LoopTimer(loop: loop, delay: 0.3) { loop.stop() }
                    timers.append(settle)
                    settle.start()
                }
                timers.append(cancel)
                cancel.start()
            }
        }
        watch.start()
        try loops.start(id, TransferRequest(url: origin.baseURL + "/endless"), delegate: recorder)
        run(loop)
        watch.cancel()
        XCTAssertGreaterThan(recorder.wroteBytes, 0)
        XCTAssertGreaterThan(sizeAtCancel, 0)
        let sizeAfter = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? -3
        XCTAssertEqual(sizeAfter, sizeAtCancel, "nothing written after the cancel")
        XCTAssertNil(recorder.result, "a cancelled transfer's delegate hears nothing more")
    }

    /// A loop queues at most `loopQueuedLimit` bytes of all its transfers while the engine takes none: 24 held
    /// transfers of 2 MiB hand over about 16 MiB, not 24, and every byte arrives once they are let go.
    func testALoopQueuesAtMostItsLimitInAll() throws {
        let body = Self.randomBytes(2 << 20, seed: 4)
        let origin = try HostileOrigin { _ in .send(Self.reply(body)) }
        defer { origin.stop() }
        let loop = try EventLoop()
        let loops = try TransferLoops(home: loop, count: 1)
        defer { loops.close() }
        let count = 24
        var recorders: [Recorder] = []
        var held = Set<Int>()
        var left = count
        var deliveredAtResume = 0
        let release = LoopTimer(loop: loop, delay: 1.0) {
            let before = recorders.reduce(0) { $0 + $1.body.count }
            held.removeAll()
            for index in 0..<count { loops.resume(TransferID(index)) }
            deliveredAtResume = recorders.reduce(0) { $0 + $1.body.count } - before
        }
        release.start()
        for index in 0..<count {
            let recorder = Recorder()
            held.insert(index)
            // Held from the first chunk until the release.
            recorder.decide = { _ in held.contains(index) ? .pause : .consumed }
            recorder.onEnd = {
                left -= 1
                if left == 0 { loop.stop() }
            }
            recorders.append(recorder)
            try loops.start(TransferID(index), TransferRequest(url: origin.baseURL + "/\(index)"), delegate: recorder)
        }
        run(loop, seconds: 60)
        XCTAssertGreaterThan(deliveredAtResume, 0)
        // The limit, and a chunk of curl's (100 KiB) that crossed it for each transfer.
        XCTAssertLessThanOrEqual(deliveredAtResume, TransferLoops.loopQueuedLimit + count * 100 * 1024)
        for (index, recorder) in recorders.enumerated() {
            XCTAssertNil(recorder.result?.failure, "\(index): \(recorder.result?.message ?? "no end")")
            XCTAssertTrue(recorder.body == body, "\(index): body exact")
        }
    }
}
