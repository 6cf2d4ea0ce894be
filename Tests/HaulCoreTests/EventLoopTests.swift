import Foundation
import Glibc
import XCTest

@testable import HaulLoop

/// A loop freed while one of its workers still runs a job (a test's loop torn down while its fsync runs): the
/// worker's completion must wake nothing, or its byte goes to the loop's pipe with its reading end closed (SIGPIPE,
/// which killed a test run) or to whatever the process has opened since under the pipe's number. The loop closes
/// its inbox before its pipe; a closed inbox lets go of what is posted to it (it would never run), and writes to
/// no descriptor.
final class EventLoopTests: XCTestCase {
    /// An inbox waking through a pipe whose reading end (`body`'s descriptor) does not block.
    private func withInbox(_ body: (Inbox, Int32) throws -> Void) throws {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&fds), 0)
        defer {
            close(fds[0])
            close(fds[1])
        }
        _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
        let inbox = Inbox()
        inbox.wake(through: fds[1])
        try body(inbox, fds[0])
    }

    func testAnInboxWakesItsLoopUntilClosedAndNothingAfter() throws {
        try withInbox { inbox, wake in
            var byte: UInt8 = 0
            inbox.append {}
            XCTAssertEqual(read(wake, &byte, 1), 1, "an open inbox wakes its loop")
            XCTAssertEqual(inbox.takeAll().count, 1)
            inbox.append {}
            XCTAssertEqual(read(wake, &byte, 1), 1)
            inbox.close()
            XCTAssertEqual(inbox.takeAll().count, 0, "what was queued when it closed is let go")
            inbox.append {}
            XCTAssertEqual(read(wake, &byte, 1), -1, "a closed inbox wrote to its old pipe")
            XCTAssertEqual(inbox.takeAll().count, 0, "what is posted after is let go")
        }
    }

    /// Posts from another loop come in bursts: the first of a burst wakes the loop, the rest join its queue.
    func testABurstOfPostsWakesTheLoopOnceAndThePostAfterItsTakingWakesItAgain() throws {
        try withInbox { inbox, wake in
            for _ in 0..<5 { inbox.append {} }
            var bytes = [UInt8](repeating: 0, count: 16)
            XCTAssertEqual(read(wake, &bytes, bytes.count), 1, "one byte for the burst")
            XCTAssertEqual(inbox.takeAll().count, 5)
            inbox.append {}
            XCTAssertEqual(read(wake, &bytes, bytes.count), 1, "a post after the queue was taken wakes the loop again")
            XCTAssertEqual(inbox.takeAll().count, 1)
        }
    }

    func testALoopFreedWhileItsWorkerRunsLeavesTheProcessStanding() throws {
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        var loop: EventLoop? = try EventLoop()
        loop?.offload(
            {
                started.signal()
                release.wait()
            }, then: { _ in })
        started.wait()
        loop = nil
        release.signal()
        // The worker queues its completion as soon as its job returns; the process is still here after it.
        usleep(100_000)
        XCTAssertNil(loop)
    }
}
