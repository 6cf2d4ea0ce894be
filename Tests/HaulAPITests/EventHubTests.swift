import Foundation
import HaulCore
import HaulLoop
import XCTest
@testable import HaulAPI

/// The event hub with fake sinks and a manual clock: coalescing, replay after a reconnect, snapshots and slow
/// clients, without a socket or a sleep.
final class EventHubTests: XCTestCase {
    private var config: EventStreamConfig {
        var config = EventStreamConfig()
        config.progressInterval = 0.25
        config.heartbeat = 15
        config.slowClientQueue = 4096
        config.slowClientTimeout = 30
        config.replayCapacity = 8
        return config
    }

    private func ids(_ sink: FakeSink) -> [Int64] { sink.events.compactMap { $0.id.flatMap { Int64($0) } } }

    func testChangesInOneIntervalMakeOneProgressEvent() throws {
        let fixture = try APIFixture(events: config)
        let sink = FakeSink()
        fixture.api.events.subscribe(sink, downloadID: nil, lastEventID: nil)
        let id = fixture.addPaused()
        for priority in 1...20 {
            XCTAssertEqual(fixture.call("PATCH", "/downloads/\(id)", json: "{\"priority\":\(priority)}").status, 200)
        }
        XCTAssertEqual(sink.events.map(\.name), ["created"], "changes wait for the next progress tick")
        fixture.clock.advance(0.25)
        XCTAssertEqual(sink.events.map(\.name), ["created", "progress"])
        let last = try XCTUnwrap(sink.events.last)
        XCTAssertTrue(last.data.contains("\"priority\":20"), last.data)
        fixture.clock.advance(1)
        XCTAssertEqual(sink.events.count, 2, "nothing more without a change")
        // A state change is its own event, at once.
        XCTAssertEqual(fixture.call("PATCH", "/downloads/\(id)", json: "{\"state\":\"queued\"}").status, 200)
        XCTAssertEqual(sink.events.last?.name, "state")
        XCTAssertEqual(ids(sink), ids(sink).sorted(), "ids grow")
    }

    func testAReconnectingClientGetsExactlyWhatItMissed() throws {
        let fixture = try APIFixture(events: config)
        let witness = FakeSink()
        fixture.api.events.subscribe(witness, downloadID: nil, lastEventID: nil)
        for n in 0..<3 { _ = fixture.addPaused("http://127.0.0.1:9/\(n).bin") }
        let seen = try XCTUnwrap(ids(witness).first)
        let again = FakeSink()
        fixture.api.events.subscribe(again, downloadID: nil, lastEventID: seen)
        XCTAssertEqual(ids(again), Array(ids(witness).dropFirst()))
        XCTAssertEqual(again.events.map(\.name), ["created", "created"])
    }

    func testAClientFurtherBehindThanTheBufferGetsOneSnapshotInPieces() throws {
        var config = self.config
        config.replayCapacity = 2
        let fixture = try APIFixture(events: config)
        let added = (0..<250).map { fixture.addPaused("http://127.0.0.1:9/many/\($0).bin") }
        let sink = FakeSink()
        sink.stalled = true
        fixture.api.events.subscribe(sink, downloadID: nil, lastEventID: 1)
        // The first pieces fill the queue past its limit; the rest waits until the client reads.
        let partial = sink.written
        XCTAssertFalse(partial.contains("]}\n\n"), "the snapshot is not written whole at once")
        XCTAssertGreaterThan(sink.queuedBytes, config.slowClientQueue)
        XCTAssertLessThan(sink.queuedBytes, 4 * 65536)
        // A change meanwhile waits behind the snapshot.
        XCTAssertEqual(fixture.call("PATCH", "/downloads/\(added[0])", json: "{\"state\":\"queued\"}").status, 200)
        for _ in 0..<10 { sink.drain() }
        let events = sink.events
        XCTAssertEqual(events.first?.name, "snapshot")
        let snapshot = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data(events[0].data.utf8))
                as? [String: Any])
        let listed = (snapshot["downloads"] as? [[String: Any]])?.compactMap { $0["id"] as? String }
        XCTAssertEqual(listed?.count, 250)
        XCTAssertEqual(listed?.first, added[0])
        XCTAssertEqual(events.dropFirst().map(\.name), ["state"], "the change follows the snapshot")
    }

    func testASlowClientGetsTheLatestEventPerDownloadAndIsCutOffWhenItNeverReads() throws {
        let fixture = try APIFixture(events: config)
        let id = fixture.addPaused()
        let slow = FakeSink()
        fixture.api.events.subscribe(slow, downloadID: nil, lastEventID: nil)
        slow.stalled = true
        // Enough state changes to pass the queue limit, then more.
        for n in 0..<40 {
            XCTAssertEqual(
                fixture.call("PATCH", "/downloads/\(id)", json: "{\"state\":\"\(n % 2 == 0 ? "queued" : "paused")\"}")
                    .status, 200)
        }
        let queued = slow.queuedBytes
        XCTAssertGreaterThan(queued, config.slowClientQueue)
        XCTAssertLessThan(queued, 2 * config.slowClientQueue, "held back once the limit was passed")
        XCTAssertEqual(fixture.api.events.slowStreamCount, 1)
        slow.drain()
        let last = try XCTUnwrap(slow.events.last)
        XCTAssertTrue(last.data.contains("\"state\":\"paused\""), "the latest state arrived: \(last.data)")
        XCTAssertEqual(fixture.api.events.slowStreamCount, 0)
        // Stalled again and never reading: cut off after the slow-client timeout.
        slow.stalled = true
        for _ in 0..<40 {
            _ = fixture.call("PATCH", "/downloads/\(id)", json: "{\"state\":\"queued\"}")
            _ = fixture.call("PATCH", "/downloads/\(id)", json: "{\"state\":\"paused\"}")
        }
        fixture.clock.advance(31)
        XCTAssertTrue(slow.closed)
        XCTAssertEqual(fixture.api.events.streamCount, 0)
    }

    func testIdleStreamsGetHeartbeats() throws {
        let fixture = try APIFixture(events: config)
        let sink = FakeSink()
        fixture.api.events.subscribe(sink, downloadID: nil, lastEventID: nil)
        fixture.clock.advance(15)
        XCTAssertTrue(sink.written.hasSuffix(": heartbeat\n\n"))
    }
}
