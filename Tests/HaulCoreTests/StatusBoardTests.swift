import Foundation
import HaulLoop
import HaulTestSupport
import XCTest

@testable import HaulCore

/// A status answer the engine puts up for a download at rest comes down at anything that could change what the
/// download shows: a change of its machine, its removal, a write, a run settled. One that could change on its own
/// (a running download) is never put up.
final class StatusBoardTests: XCTestCase {
    private func box(_ id: String, _ state: DownloadState, board: StatusBoard) -> MachineBox {
        let download = Download(
            id: id, sequence: 1, url: "http://origin.test/\(id)", headers: [], requestedFilename: nil,
            directory: "", state: state, connections: 1, priority: 0, maxSpeed: nil,
            createdAt: Date(timeIntervalSince1970: 0))
        var settings = MachineSettings()
        settings.statusBoard = board
        return MachineBox(DownloadMachine(download: download, settings: settings))
    }

    private func answer(_ text: String) -> HTTPResponse { HTTPResponse(status: 200, body: Array(text.utf8)) }

    private func openBoard() -> StatusBoard {
        let board = StatusBoard()
        board.open()
        return board
    }

    func testNothingIsPutUpUntilTheBoardIsOpen() {
        let board = StatusBoard()
        box("a", .paused, board: board).publish(answer("a"))
        XCTAssertNil(board.answer(for: "a"))
        board.open()
        box("a", .paused, board: board).publish(answer("a"))
        XCTAssertEqual(board.answer(for: "a")?.body, Array("a".utf8))
    }

    func testAChangeOfTheMachineTakesTheAnswerDownFirst() {
        let board = openBoard()
        let paused = box("p", .paused, board: board)
        paused.publish(answer("p0"))
        XCTAssertNotNil(board.answer(for: "p"))
        // Taken down before the change is made: a read in between goes to the engine.
        paused.machine.download.priority = 3
        XCTAssertNil(board.answer(for: "p"))
        paused.publish(answer("p3"))
        XCTAssertEqual(board.answer(for: "p")?.body, Array("p3".utf8))
        // A packed box too: its changes unpack it.
        paused.pack()
        XCTAssertTrue(paused.isPacked)
        XCTAssertNotNil(board.answer(for: "p"), "packing changes nothing a client reads")
        paused.machine.download.tags = "t"
        XCTAssertNil(board.answer(for: "p"))
    }

    func testRemovalAWriteAndASettledRunTakeItDown() {
        let board = openBoard()
        let removed = box("r", .completed, board: board)
        removed.publish(answer("r"))
        removed.isRemoved = true
        XCTAssertNil(board.answer(for: "r"))
        removed.publish(answer("r"))
        XCTAssertNil(board.answer(for: "r"), "a box gone from the registry is never put up")

        let written = box("w", .paused, board: board)
        written.publish(answer("w"))
        written.lastWriteAt = 12
        XCTAssertNil(board.answer(for: "w"))
        written.publish(answer("w"))
        XCTAssertNil(board.answer(for: "w"), "a write's time is still to be folded in")

        let settled = box("s", .completed, board: board)
        settled.publish(answer("s"))
        XCTAssertTrue(settled.settleRun(clock: ManualClock()))
        XCTAssertNil(board.answer(for: "s"))
    }

    func testARunningDownloadIsNeverPutUp() {
        let board = openBoard()
        let running = box("run", .queued, board: board)
        running.machine.phase = .reserving
        running.publish(answer("run"))
        XCTAssertNil(board.answer(for: "run"))
        XCTAssertEqual(board.count, 0)
    }

    func testABoardFullIsClearedAndALargeAnswerLeftToTheEngine() {
        let board = openBoard()
        let boxes = (0...StatusBoard.capacity).map { box("d\($0)", .paused, board: board) }
        for box in boxes.dropLast() { box.publish(answer(box.id)) }
        XCTAssertEqual(board.count, StatusBoard.capacity)
        boxes.last!.publish(answer("last"))
        XCTAssertEqual(board.count, 1, "cleared, then the new one put up")
        XCTAssertNotNil(board.answer(for: boxes.last!.id))
        // A box whose answer went with the clearing is changed: nothing to take down, nothing wrong.
        boxes[0].machine.download.priority = 1
        XCTAssertEqual(board.count, 1)

        let large = box("large", .paused, board: board)
        large.publish(HTTPResponse(status: 200, body: [UInt8](repeating: 32, count: StatusBoard.largestBody + 1)))
        XCTAssertNil(board.answer(for: "large"))
    }

    // MARK: pages of the list

    func testAnyDownloadsChangeTakesEveryPageDownFirst() {
        let board = openBoard()
        let shown = box("shown", .paused, board: board)
        let other = box("other", .paused, board: board)
        let running = box("running", .queued, board: board)
        running.machine.phase = .reserving
        XCTAssertTrue(board.putPage(answer("page 1"), for: "/downloads?limit=1"))
        XCTAssertTrue(board.putPage(answer("all"), for: "/downloads"))
        XCTAssertEqual(board.page(for: "/downloads?limit=1")?.body, Array("page 1".utf8))
        XCTAssertNil(board.page(for: "/downloads?limit=2"), "only the very target the engine answered")
        // A download not shown changes: it may now belong on the page, or move the cursor.
        other.machine.download.priority = 2
        XCTAssertEqual(board.pageCount, 0)

        XCTAssertTrue(board.putPage(answer("all"), for: "/downloads"))
        running.lastWriteAt = 3
        XCTAssertEqual(board.pageCount, 0, "a running download's write (its updated_at) takes pages down")

        XCTAssertTrue(board.putPage(answer("all"), for: "/downloads"))
        shown.isRemoved = true
        XCTAssertEqual(board.pageCount, 0, "a removal")

        XCTAssertTrue(board.putPage(answer("all"), for: "/downloads"))
        box("new", .paused, board: board).changing()
        XCTAssertEqual(board.pageCount, 0, "a download joining the list (what the registry calls on insert)")

        XCTAssertTrue(board.putPage(answer("all"), for: "/downloads"))
        board.clearPages()
        XCTAssertEqual(board.pageCount, 0, "an event (what the event hub calls at each)")
        XCTAssertNil(board.answer(for: "shown"), "no status answer was put up by a page")
    }

    func testPagesAreBoundedByBytesAndALargePageLeftToTheEngine() {
        let board = StatusBoard()
        XCTAssertFalse(board.putPage(answer("closed"), for: "/downloads"), "closed: nothing put up")
        board.open()
        let body = [UInt8](repeating: 32, count: StatusBoard.largestPage)
        let fit = StatusBoard.pageCapacity / StatusBoard.largestPage
        for index in 0..<fit { XCTAssertTrue(board.putPage(HTTPResponse(status: 200, body: body), for: "/p\(index)")) }
        XCTAssertEqual(board.pageCount, fit)
        // The same target again replaces its page, counted once.
        XCTAssertTrue(board.putPage(HTTPResponse(status: 200, body: body), for: "/p0"))
        XCTAssertEqual(board.pageCount, fit)
        XCTAssertTrue(board.putPage(answer("one more"), for: "/more"))
        XCTAssertEqual(board.pageCount, 1, "past the bytes, cleared and the new one put up")
        XCTAssertFalse(board.putPage(HTTPResponse(status: 200, body: body + [32]), for: "/large"))
        XCTAssertNil(board.page(for: "/large"))

        // Small pages of ever new targets (cursors walked past the end) are bounded by their number too.
        board.clearPages()
        for index in 0...StatusBoard.capacity { XCTAssertTrue(board.putPage(answer("[]"), for: "/c\(index)")) }
        XCTAssertEqual(board.pageCount, 1, "past the number, cleared and the new one put up")
    }

    /// Another front's answers about a download (aria2's status by GID) come down with its status answer, a key
    /// already showing another download is not taken over, and a running download's are never put up.
    func testAnotherFrontsAnswersComeDownWithTheDownloads() {
        let board = openBoard()
        let paused = box("p", .paused, board: board)
        paused.publishFront("status of p", key: "gid-p")
        paused.publishFront("status of p, keyed twice", key: "gid-p2")
        XCTAssertEqual(board.frontAnswer(for: "gid-p") as? String, "status of p")
        let other = box("q", .paused, board: board)
        other.publishFront("status of q", key: "gid-p")
        XCTAssertEqual(board.frontAnswer(for: "gid-p") as? String, "status of p", "the key shows p")
        other.publishFront("status of q", key: "gid-q")
        paused.machine.download.priority = 2
        XCTAssertNil(board.frontAnswer(for: "gid-p"))
        XCTAssertNil(board.frontAnswer(for: "gid-p2"))
        XCTAssertEqual(board.frontAnswer(for: "gid-q") as? String, "status of q", "another download's stays")
        other.isRemoved = true
        XCTAssertNil(board.frontAnswer(for: "gid-q"))
        // A box gone from the registry is never put up, even under a key free again.
        other.publishFront("status of q", key: "gid-p")
        XCTAssertNil(board.frontAnswer(for: "gid-p"))
        let running = box("r", .queued, board: board)
        running.machine.phase = .transferring
        running.publishFront("running", key: "gid-r")
        XCTAssertNil(board.frontAnswer(for: "gid-r"))
    }

    /// A change of the settings or the categories takes everything down: answers, other fronts' and pages.
    func testClearingAllTakesEverythingDown() {
        let board = openBoard()
        let paused = box("p", .paused, board: board)
        paused.publish(answer("p"))
        paused.publishFront("status of p", key: "gid-p")
        XCTAssertTrue(board.putPage(answer("page"), for: "/api/v2/torrents/info"))
        board.clearAll()
        XCTAssertNil(board.answer(for: "p"))
        XCTAssertNil(board.frontAnswer(for: "gid-p"))
        XCTAssertNil(board.page(for: "/api/v2/torrents/info"))
        paused.publishFront("status of p again", key: "gid-p")
        XCTAssertEqual(board.frontAnswer(for: "gid-p") as? String, "status of p again")
    }
}
