import Foundation
import HaulLoop
import HaulTestSupport
import XCTest
@testable import HaulCore

/// The persister on a real SQLite file and the manual clock: changes of one moment share a commit, a write that may
/// not wait goes at once, a failed write is kept and written again a second later, and a refused one is reported.
final class PersisterTests: XCTestCase {
    /// The engine's side, as the persister sees it: downloads held in memory, the refusals and commits it was told.
    private final class Host: PersisterHost {
        var downloads: [String: Download] = [:]
        var claims: [String: WriteClaim] = [:]
        var committed: [[String]] = []
        var refused: [String] = []
        var changesWritten: [String] = []

        func current(_ id: String) -> Download? { downloads[id] }
        func writeClaim(_ id: String) -> WriteClaim { claims[id] ?? .sole }
        func storeWaitingChanges(_ id: String) throws { changesWritten.append(id) }
        func storedWaitingChanges<S: Sequence<String>>(_ ids: S) { committed.append(Array(ids).sorted()) }
        func refusedWrite(_ id: String) { refused.append(id) }
    }

    private var directory: String!
    private var store: DownloadStore!
    private let clock = ManualClock()
    private let host = Host()
    private var persister: Persister!

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "haul-persister-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        store = try DownloadStore(path: directory + "/haul.sqlite")
        persister = Persister(store: store, clock: clock, log: Logger(minimum: .error, buffer: LogBuffer()))
        persister.host = host
    }

    override func tearDownWithError() throws {
        persister = nil
        store = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func download(_ id: String, sequence: Int64, state: DownloadState = .queued) -> Download {
        Download(
            id: id, sequence: sequence, url: "http://127.0.0.1/\(id)", headers: [], requestedFilename: nil,
            directory: "", state: state, connections: 1, priority: 0, maxSpeed: nil, createdAt: Date())
    }

    private func stored() throws -> [String: DownloadState] {
        Dictionary(uniqueKeysWithValues: try store.loadAll().map { ($0.id, $0.state) })
    }

    func testChangesOfOneMomentShareOneCommitAfterTheDelay() throws {
        for (index, id) in ["a", "b", "c"].enumerated() {
            host.downloads[id] = download(id, sequence: Int64(index + 1))
            persister.saveSoon(id)
        }
        persister.saveSoon("a")
        XCTAssertTrue(persister.isWaiting("b"))
        clock.advance(Persister.groupCommitDelay / 2)
        XCTAssertEqual(try stored(), [:], "nothing is written before the delay")
        clock.advance(Persister.groupCommitDelay)
        XCTAssertEqual(try stored(), ["a": .queued, "b": .queued, "c": .queued])
        XCTAssertEqual(persister.commits, 1)
        XCTAssertEqual(host.committed, [["a", "b", "c"]])
        XCTAssertEqual(host.changesWritten.sorted(), ["a", "b", "c"], "each download's webhook changes with it")
        XCTAssertFalse(persister.isWaiting("b"))
        // A later change waits for a commit of its own.
        host.downloads["b"]!.state = .paused
        persister.saveSoon("b")
        clock.advance(Persister.groupCommitDelay)
        XCTAssertEqual(try stored()["b"], .paused)
        XCTAssertEqual(persister.commits, 2)
    }

    func testAWriteThatMayNotWaitGoesAtOnceAndTakesTheWaitingChangeWithIt() throws {
        host.downloads["a"] = download("a", sequence: 1)
        persister.saveSoon("a")
        host.downloads["a"]!.state = .paused
        persister.save(host.downloads["a"]!)
        XCTAssertEqual(try stored(), ["a": .paused], "written without the clock moving")
        XCTAssertFalse(persister.isWaiting("a"))
        clock.advance(1)
        XCTAssertEqual(persister.commits, 1, "the group commit had nothing left to write")
    }

    func testAJournalWrittenWhileTheProbesAnswerWaitsTakesTheWholeDownload() throws {
        var probed = download("a", sequence: 1, state: .downloading)
        try XCTAssertTrue(store.save(probed))
        probed.totalBytes = 1000
        probed.filename = "a.bin"
        host.downloads["a"] = probed
        persister.saveSoon("a")
        persister.saveJournal("a", [Segment(start: 0, end: 999, received: 400)])
        let row = try XCTUnwrap(try store.load(id: "a"))
        XCTAssertEqual(row.totalBytes, 1000, "the size the journal vouches for is stored with it")
        XCTAssertEqual(row.filename, "a.bin")
        XCTAssertEqual(row.journal, [Segment(start: 0, end: 999, received: 400)])
        // Without a waiting change only the journal is written.
        host.downloads["a"]!.filename = "other.bin"
        persister.saveJournal("a", [Segment(start: 0, end: 999, received: 900)])
        let again = try XCTUnwrap(try store.load(id: "a"))
        XCTAssertEqual(again.journal.first?.received, 900)
        XCTAssertEqual(again.filename, "a.bin")
    }

    func testAFailedWriteIsKeptAndWrittenAgainASecondLater() throws {
        // The store's own connection (it holds the file exclusively) makes every insert fail, as a full disk would.
        let raw = store.db
        try raw.execute("CREATE TRIGGER full BEFORE INSERT ON downloads BEGIN SELECT RAISE(ABORT, 'disk full'); END")
        host.downloads["a"] = download("a", sequence: 1, state: .completed)
        persister.saveSoon("a")
        clock.advance(Persister.groupCommitDelay)
        XCTAssertTrue(persister.isWaiting("a"), "a completed download changes no more: it must not be dropped")
        XCTAssertEqual(host.committed, [])
        try raw.execute("DROP TRIGGER full")
        clock.advance(Persister.retryDelay - 0.001)
        XCTAssertEqual(try stored(), [:])
        clock.advance(0.002)
        XCTAssertEqual(try stored(), ["a": .completed])
        XCTAssertEqual(host.committed, [["a"]])
        XCTAssertFalse(persister.isWaiting("a"))
    }

    func testAWriteTheStoreRefusesIsReportedAndTheOthersLand() throws {
        // The row's fence moved on (it is 0, the claim says 3): another node took the download over.
        let taken = download("t", sequence: 1, state: .downloading)
        try XCTAssertTrue(store.save(taken))
        host.downloads["t"] = taken
        host.claims["t"] = .fenced(3)
        host.downloads["a"] = download("a", sequence: 2)
        persister.saveSoon("t")
        persister.saveSoon("a")
        clock.advance(Persister.groupCommitDelay)
        XCTAssertEqual(host.refused, ["t"])
        XCTAssertEqual(host.committed, [["a"]])
        XCTAssertEqual(try stored(), ["t": .downloading, "a": .queued])
    }

    func testStopWritesWhatWaitsAndNoRetryFollows() throws {
        host.downloads["a"] = download("a", sequence: 1)
        persister.saveSoon("a")
        persister.stop()
        XCTAssertEqual(try stored(), ["a": .queued])
        host.downloads["a"]!.state = .paused
        clock.advance(5)
        XCTAssertEqual(try stored(), ["a": .queued], "nothing is written after stop")
        XCTAssertEqual(persister.commits, 1)
    }

    func testOnlyAJournalThatGrewMayWait() {
        let old = [Segment(start: 0, end: 99, received: 10), Segment(start: 100, end: 199, received: 5)]
        XCTAssertTrue(
            Persister.onlyGrew(
                from: old,
                to: [
                    Segment(start: 0, end: 99, received: 20),
                    Segment(start: 100, end: 199, received: 5),
                ]))
        XCTAssertTrue(Persister.onlyGrew(from: old, to: old + [Segment(start: 200, end: 299)]))
        XCTAssertFalse(
            Persister.onlyGrew(
                from: old,
                to: [
                    Segment(start: 0, end: 99, received: 0),
                    Segment(start: 100, end: 199, received: 5),
                ]),
            "bytes cut back")
        XCTAssertFalse(
            Persister.onlyGrew(from: old, to: [Segment(start: 0, end: 199, received: 10)]),
            "segments merged")
        XCTAssertFalse(Persister.onlyGrew(from: old, to: old + [Segment(start: 200, end: 299, received: 1)]))
    }
}
