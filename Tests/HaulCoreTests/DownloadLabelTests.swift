import Foundation
import HaulLoop
import HaulTestSupport
import XCTest
@testable import HaulCore

/// What a client files a download under after adding it (the qBittorrent front's setCategory, addTags and
/// setShareLimits; REST's PATCH of tags): changed in the engine, stored, and refused for a category not there.
final class DownloadLabelTests: XCTestCase {
    func testACategoryTagsAndSeedingLimitsChangeAfterAddingAndAreStored() throws {
        let engine = try makeEngine(fetcher: SilentFetcher(), clock: ManualClock())
        _ = try engine.categories.put(Category(name: "films", directory: "films"))
        var request = NewDownload(url: "http://origin.test/x.mkv")
        request.startPaused = true
        let id = try engine.add(request).snapshot.download.id

        var changes = DownloadChanges()
        changes.category = .some("films")
        changes.tags = .some("hd,new")
        changes.seedRatio = .some(1.5)
        changes.seedTime = .some(600)
        let changed = try engine.update(id, changes).download
        XCTAssertEqual(changed.category, "films")
        XCTAssertEqual(changed.tags, "hd,new")
        XCTAssertEqual(changed.seedRatio, 1.5)
        XCTAssertEqual(changed.seedTime, 600)
        // Its folder stays where it was added: only the label moves.
        XCTAssertEqual(changed.directory, "")
        XCTAssertEqual(changed.state, .paused)
        let stored = try XCTUnwrap(try engine.store.loadAll().first { $0.id == id })
        XCTAssertEqual(stored.category, "films")
        XCTAssertEqual(stored.tags, "hd,new")
        XCTAssertEqual(stored.seedRatio, 1.5)
        XCTAssertEqual(stored.seedTime, 600)

        // Cleared, each back to none.
        var clear = DownloadChanges()
        clear.category = .some(nil)
        clear.tags = .some(nil)
        clear.seedRatio = .some(nil)
        clear.seedTime = .some(nil)
        let cleared = try engine.update(id, clear).download
        XCTAssertNil(cleared.category)
        XCTAssertNil(cleared.tags)
        XCTAssertNil(cleared.seedRatio)
        XCTAssertNil(try engine.store.loadAll().first { $0.id == id }?.tags)

        // A category that is not there is refused, nothing changed.
        var unknown = DownloadChanges()
        unknown.category = .some("nosuch")
        unknown.tags = .some("kept")
        XCTAssertThrowsError(try engine.update(id, unknown)) { error in
            guard case .invalid(let field, _)? = error as? EngineError else { return XCTFail("\(error)") }
            XCTAssertEqual(field, "category")
        }
        XCTAssertNil(engine.snapshot(id)?.download.tags)
    }

    func testTagsAreTrimmedSortedAndBounded() {
        XCTAssertEqual(DownloadTags.parse(" tv , hd,tv,, "), ["hd", "tv"])
        XCTAssertEqual(DownloadTags.joined(DownloadTags.parse("b,a") ?? []), "a,b")
        XCTAssertNil(DownloadTags.joined([]))
        XCTAssertNil(DownloadTags.parse("bad\u{1}tag"))
        XCTAssertNil(DownloadTags.parse(String(repeating: "x", count: DownloadTags.maxTagBytes + 1)))
        XCTAssertNil(DownloadTags.parse((0...DownloadTags.maxCount).map { "t\($0)" }.joined(separator: ",")))
        XCTAssertEqual(
            DownloadTags.parse((1...DownloadTags.maxCount).map { "t\($0)" }.joined(separator: ","))?.count, 64)
    }
}
