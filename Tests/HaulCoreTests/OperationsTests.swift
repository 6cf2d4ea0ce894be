import Foundation
import HaulCore
import HaulLoop
import HaulTestSupport
import XCTest

/// The operations every wire format calls, called directly: no request is decoded, no answer encoded. The engine
/// runs on SQLite with a fetcher that never answers and the manual clock.
final class OperationsTests: XCTestCase {
    private var operations: Operations!

    override func setUpWithError() throws {
        let engine = try makeEngine(fetcher: SilentFetcher(), clock: ManualClock()) { $0.maxActive = 1 }
        operations = Operations(engine: engine, maxDownloads: 5)
    }

    private func request(_ name: String, paused: Bool = true, category: String? = nil) -> NewDownload {
        var request = NewDownload(url: "http://origin.test/\(name)")
        request.filename = name
        request.startPaused = paused
        request.category = category
        return request
    }

    private func add(_ names: [String], category: String? = nil) throws -> [String] {
        try names.map { try operations.add(request($0, category: category)).snapshot.download.id }
    }

    /// The engine error `call` threw, nil when it threw none.
    private func refusal(_ call: () throws -> Void) -> EngineError? {
        do {
            try call()
            return nil
        } catch {
            return error as? EngineError
        }
    }

    func testAddingStopsAtTheServersLimitAndARepeatIsTheSameDownload() throws {
        let first = try operations.add(request("a"))
        XCTAssertTrue(first.created)
        let again = try operations.add(request("a"))
        XCTAssertFalse(again.created, "the same URL and destination")
        XCTAssertEqual(again.snapshot.download.id, first.snapshot.download.id)
        _ = try add(["b", "c", "d", "e"])
        XCTAssertEqual(refusal { _ = try operations.add(request("f")) }, .tooMany)
        XCTAssertEqual(operations.totals().downloads, 5)
    }

    func testABatchIsCutAtTheLimitAndAnAtomicOneAddsNothingThen() throws {
        _ = try add(["a", "b", "c"])
        let atomic = try operations.add(batch: ["x", "y", "z"].map { request($0) }, atomic: true)
        XCTAssertEqual(operations.totals().downloads, 3, "all or nothing")
        XCTAssertTrue(atomic.contains { if case .refused(.tooMany) = $0 { true } else { false } })
        let each = try operations.add(batch: ["x", "y", "z"].map { request($0) }, atomic: false)
        let added = each.filter { if case .added = $0 { true } else { false } }.count
        XCTAssertEqual(added, 2)
        guard case .refused(.tooMany) = each[2] else { return XCTFail("\(each[2])") }
    }

    func testAnIdempotencyKeyAnswersTheFirstRequestAndRefusesAnother() throws {
        let key = Idempotency(key: "k1", requestHash: "h1")
        let first = try operations.add(request("a"), idempotency: key)
        let repeated = try operations.add(request("a"), idempotency: key)
        XCTAssertTrue(first.created)
        XCTAssertTrue(repeated.created, "the first answer, again")
        XCTAssertEqual(repeated.snapshot.download.id, first.snapshot.download.id)
        guard
            case .conflict? = refusal({
                _ = try operations.add(
                    request("b"),
                    idempotency:
                        Idempotency(key: "k1", requestHash: "h2"))
            })
        else { return XCTFail("another body under the same key") }
        XCTAssertEqual(operations.totals().downloads, 1)
        let batch = Idempotency(key: "k2", requestHash: "h")
        XCTAssertNil(try operations.batchAnswer(batch))
        try operations.rememberBatchAnswer(batch, answer: "[]")
        XCTAssertEqual(try operations.batchAnswer(batch), "[]")
    }

    func testPagesFollowTheFilterAndTheCursor() throws {
        try XCTAssertTrue(operations.putCategory(Category(name: "films", directory: "films")))
        let plain = try add(["c-one", "a-two", "b-three"])
        let films = try add(["d-film"], category: "films")
        var query = DownloadQuery()
        query.limit = 2
        let first = operations.page(query)
        XCTAssertEqual(first.downloads.map(\.download.id), Array(plain.prefix(2)))
        query.cursor = try XCTUnwrap(first.next)
        let second = operations.page(query)
        XCTAssertEqual(second.downloads.map(\.download.id), [plain[2], films[0]])
        XCTAssertNil(second.next)

        var byName = DownloadQuery()
        byName.order = .name
        byName.limit = 3
        let named = operations.page(byName)
        XCTAssertEqual(named.downloads.compactMap(\.download.requestedFilename), ["a-two", "b-three", "c-one"])
        XCTAssertEqual(named.next, .position(3))
        byName.cursor = named.next
        XCTAssertEqual(operations.page(byName).downloads.map(\.download.id), films)

        var filtered = DownloadQuery()
        filtered.filter = DownloadFilter(category: "films")
        XCTAssertEqual(operations.page(filtered).downloads.map(\.download.id), films)
        filtered.filter = DownloadFilter(search: "three")
        XCTAssertEqual(operations.page(filtered).downloads.map(\.download.id), [plain[2]])
        filtered.filter = DownloadFilter(ids: [plain[0], films[0]])
        XCTAssertEqual(operations.page(filtered).downloads.map(\.download.id), [plain[0], films[0]])
        filtered.filter = DownloadFilter(states: [.queued])
        XCTAssertEqual(operations.page(filtered).downloads.count, 0, "all were added paused")
    }

    func testBulkActionsAnswerEachDownloadOnItsOwn() throws {
        let ids = try add(["a", "b", "c"])
        let resumed = operations.act(.resume, on: ids[...] + ["nope"])
        XCTAssertEqual(resumed.map(\.id), ids + ["nope"])
        for result in resumed.prefix(3) {
            guard case .changed(let snapshot) = result.outcome else { return XCTFail("\(result.outcome)") }
            XCTAssertNotEqual(snapshot.download.state, .paused)
        }
        guard case .refused(.notFound("nope")) = resumed[3].outcome else { return XCTFail("\(resumed[3].outcome)") }
        XCTAssertEqual(operations.ids(matching: DownloadFilter(states: [.paused])), [])
        let paused = operations.act(.pause, on: ids[1...])
        XCTAssertEqual(paused.count, 2)
        XCTAssertEqual(operations.ids(matching: DownloadFilter(states: [.paused])), Array(ids[1...]))
        let removed = operations.act(.remove(deleteFile: false), on: [ids[0], ids[0]])
        guard case .removed = removed[0].outcome else { return XCTFail("\(removed[0].outcome)") }
        XCTAssertEqual(
            try operations.remove(batch: ids[...], deleteFile: false), Array(ids[1...]),
            "one removed before is passed over")
        XCTAssertEqual(operations.totals().downloads, 0)
        XCTAssertEqual(refusal { _ = try operations.get(ids[0]) }, .notFound(ids[0]))
    }

    func testOneDownloadIsReadChangedAndRemoved() throws {
        let id = try add(["a"])[0]
        XCTAssertEqual(try operations.get(id).download.state, .paused)
        guard case .conflict? = refusal({ _ = try operations.file(id) }) else {
            return XCTFail("an unfinished download has no file")
        }
        let changed = try operations.change(id, DownloadChanges(priority: 7))
        XCTAssertEqual(changed.download.priority, 7)
        try operations.remove(id, deleteFile: false)
        XCTAssertEqual(refusal { try operations.remove(id, deleteFile: false) }, .notFound(id))
    }

    func testCategoriesAndWebhooksKeepTheirRules() throws {
        XCTAssertEqual(refusal { _ = try operations.category("films") }, .missing("no category 'films'"))
        guard
            case .conflict? = refusal({
                _ = try operations.addWebhook(url: "http://hooks.test/", events: [.completed], category: "films")
            })
        else { return XCTFail("a webhook's category is made first") }
        try XCTAssertTrue(operations.putCategory(Category(name: "films", directory: "films")))
        try XCTAssertFalse(operations.putCategory(Category(name: "films", directory: "movies")), "replaced")
        XCTAssertEqual(try operations.category("films").directory, "movies")
        let hook = try operations.addWebhook(url: "http://hooks.test/", events: [.completed], category: "films")
        XCTAssertEqual(try operations.webhook(hook.id).url, "http://hooks.test/")
        XCTAssertEqual(try operations.deliveries(of: hook.id, limit: 10).count, 0)
        try operations.removeWebhook(hook.id)
        XCTAssertEqual(refusal { try operations.removeWebhook(hook.id) }, .missing("no webhook with id '\(hook.id)'"))
        try operations.removeCategory("films")
        XCTAssertEqual(operations.categories.count, 0)
        for index in 0..<Operations.maxCategories {
            _ = try operations.putCategory(Category(name: "c\(index)", directory: "c\(index)"))
        }
        XCTAssertEqual(
            refusal { _ = try operations.putCategory(Category(name: "one-more", directory: "x")) },
            .full(kind: "categories", limit: Operations.maxCategories))
        XCTAssertFalse(try operations.putCategory(Category(name: "c0", directory: "y")), "a replacement still fits")
    }

    func testSettingsChangeAndShowWhatIsInForce() throws {
        var change = SettingsChange()
        change.maxActive = .some(7)
        XCTAssertEqual(try operations.changeSettings(change).maxActive, 7)
        XCTAssertEqual(operations.settings.maxActive, 7)
    }
}
