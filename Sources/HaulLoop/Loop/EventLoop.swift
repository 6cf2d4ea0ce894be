internal import CEvent
import Glibc

/// The one libevent `event_base` of a Haul process and the thread that runs it.
///
/// Everything attached to a loop (timers, the HTTP server, the curl multi handle, all engine state) is confined to
/// the thread that calls `run()`. Other threads reach it only through `post(_:)`.
public final class EventLoop {
    let base: OpaquePointer
    private var signalEvents: [SignalWatch] = []
    let inbox = Inbox()
    private let workers: WorkerPool
    private var wakeEvent: OpaquePointer?
    private var wakeFDs: (read: Int32, write: Int32) = (-1, -1)
    private var thread: pthread_t?

    /// Priorities: 0 is served first. The API's events use `.api`, transfer I/O uses `.transfer`, so a busy
    /// download never starves a client of the REST API.
    public enum Priority: Int32, Sendable {
        case api = 0
        case transfer = 1
    }

    /// `workerThreads`: the threads `offload` runs blocking work on.
    public init(workerThreads: Int = 2) throws {
        workers = try WorkerPool(threads: workerThreads)
        guard let settings = event_config_new() else { throw LoopError.libevent("event_config_new failed") }
        defer { event_config_free(settings) }
        // Priorities alone do not keep the API answering: libevent runs every active event of a priority before it
        // looks for new ones, and two hundred transfer sockets and timers ready at once held a waiting /healthz for
        // 100 ms. After 4 ms or 16 callbacks of transfer work it looks again, and what the API has waiting runs first.
        var dispatch = timeval(tv_sec: 0, tv_usec: 4000)
        event_config_set_max_dispatch_interval(settings, &dispatch, 16, Priority.transfer.rawValue)
        // Changes to what a descriptor is watched for wait for the next epoll_wait and go in as one: evhttp turns
        // reading off and writing on for every answer and back after it, four epoll_ctl calls per request (half of
        // the system calls of a status read, `strace -c` under wrk), two with the change list. libevent's caveat is
        // a descriptor watched twice through dup(): nothing here watches one (a part file's dup is only synced and
        // closed), and a descriptor closed and reused between two turns is re-added, not skipped (changelist.c).
        guard event_config_set_flag(settings, Int32(EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST.rawValue)) == 0 else {
            throw LoopError.libevent("event_config_set_flag failed")
        }
        guard let base = event_base_new_with_config(settings) else {
            throw LoopError.libevent("event_base_new_with_config failed")
        }
        self.base = base
        guard event_base_priority_init(base, 2) == 0 else {
            event_base_free(base)
            throw LoopError.libevent("event_base_priority_init failed")
        }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else {
            event_base_free(base)
            throw LoopError.system("pipe", errno)
        }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        wakeFDs = (fds[0], fds[1])
        inbox.wake(through: fds[1])
        let me = Unmanaged.passUnretained(self).toOpaque()
        wakeEvent = event_new(
            base, fds[0], haul_ev_read() | haul_ev_persist(),
            { fd, _, arg in
                var sink = [UInt8](repeating: 0, count: 64)
                while read(fd, &sink, sink.count) > 0 {}
                Unmanaged<EventLoop>.fromOpaque(arg!).takeUnretainedValue().drainInbox()
            }, me)
        event_priority_set(wakeEvent, Priority.api.rawValue)
        event_add(wakeEvent, nil)
    }

    deinit {
        signalEvents.removeAll()
        inbox.close()
        if let wakeEvent { event_free(wakeEvent) }
        close(wakeFDs.read)
        close(wakeFDs.write)
        event_base_free(base)
    }

    /// Runs the loop on the calling thread until `stop()` or until nothing is left to wait for.
    public func run() {
        thread = pthread_self()
        event_base_dispatch(base)
    }

    /// Makes `run()` return after the callbacks that are currently active.
    public func stop() {
        event_base_loopbreak(base)
    }

    /// The priority of the work other threads post (`.api` unless set). A loop answering requests another loop
    /// posts (the engine's, beside the API's) takes them at `.transfer`: posted without pause under load, at `.api`
    /// they kept its wake-up always ready, and libevent runs a lower priority only when no higher one is (its timers
    /// and transfers waited up to ten seconds under `wrk`). At one priority, each turn runs both. Set before `run()`.
    public func prioritizeInbox(_ priority: Priority) {
        event_priority_set(wakeEvent, priority.rawValue)
    }

    /// Makes `run()` return once the work posted before this has run. Safe to call from any thread.
    public func stopSoon() {
        let me = LoopBound(self)
        post { me.value.stop() }
    }

    /// True on the loop's own thread (or before the loop has started).
    public var inLoopThread: Bool {
        guard let thread else { return true }
        return pthread_equal(thread, pthread_self()) != 0
    }

    /// Debug-build check that a loop-confined object is touched only from its loop's thread.
    @inline(__always)
    public func assertInLoop(file: StaticString = #file, line: UInt = #line) {
        assert(inLoopThread, "called off the event loop thread", file: file, line: line)
    }

    /// Runs `work` on the loop thread soon. Safe to call from any thread.
    public func post(_ work: @escaping @Sendable () -> Void) {
        inbox.append(work)
    }

    /// Lets go of the work posted and not yet run, and of any posted from now on: for a loop that has stopped for
    /// good, whose queued work (a request the API's loop forwarded as the engine's stopped) may hold objects that
    /// hold the loop itself.
    public func closeInbox() {
        inbox.close()
    }

    /// Runs `work` on the loop's thread once `run()` has begun. Call it from that thread, before `run()`.
    public func whenRunning(_ work: @escaping () -> Void) {
        let work = LoopBound(work)
        post { work.value() }
    }

    private func drainInbox() {
        for work in inbox.takeAll() { work() }
    }

    /// Calls `handler` on the loop thread each time the process receives `signal`.
    public func onSignal(_ signal: Int32, _ handler: @escaping () -> Void) {
        let watch = SignalWatch(handler: handler)
        let event = event_new(
            base, signal, haul_ev_signal() | haul_ev_persist(),
            { _, _, arg in
                Unmanaged<SignalWatch>.fromOpaque(arg!).takeUnretainedValue().handler()
            }, Unmanaged.passUnretained(watch).toOpaque())
        watch.event = event
        event_priority_set(event, Priority.api.rawValue)
        event_add(event, nil)
        signalEvents.append(watch)
    }
}

public enum LoopError: Error, CustomStringConvertible {
    case libevent(String)
    case system(String, Int32)
    /// A curl multi call failed: the call and curl's words.
    case curl(String, String)

    public var description: String {
        switch self {
        case .libevent(let what): return what
        case .system(let call, let code): return "\(call): \(String(cString: strerror(code)))"
        case .curl(let call, let message): return "\(call): \(message)"
        }
    }
}

private final class SignalWatch {
    let handler: () -> Void
    var event: OpaquePointer?
    init(handler: @escaping () -> Void) { self.handler = handler }
    deinit { if let event { event_free(event) } }
}

/// The cross-thread work queue: the only state of a loop that another thread may touch.
final class Inbox: @unchecked Sendable {
    private let lock = Lock()
    private var items: [@Sendable () -> Void] = []
    /// The pipe end whose readiness wakes the loop; set once before the loop runs, -1 once the loop is gone.
    private var wakeFD: Int32 = -1
    private var closed = false

    init() {}

    /// Sets the pipe end that wakes the loop (before it runs).
    func wake(through fd: Int32) { lock.withLock { wakeFD = fd } }

    /// The loop is gone: nothing more wakes it. A worker finishing after it (a test's loop torn down while its
    /// fsync ran) then writes to no pipe: not to one whose reading end is closed (SIGPIPE, which killed a test
    /// process), nor to a descriptor the process has since opened again for something else.
    /// What is queued then, or posted after, never runs: it is let go (work holding objects that hold this inbox,
    /// as a forwarded exchange does, would otherwise keep them and the inbox alive for good).
    func close() {
        let dropped = lock.withLock {
            wakeFD = -1
            closed = true
            var dropped: [@Sendable () -> Void] = []
            swap(&dropped, &items)
            return dropped
        }
        withExtendedLifetime(dropped) {}
    }

    func append(_ work: @escaping @Sendable () -> Void) {
        // The write under the lock: `close` cannot come between the check and the write. The pipe does not block
        // (a full pipe is awake already).
        lock.withLock {
            guard !closed else { return }
            items.append(work)
            // A queue that held work has its wake-up byte written already, and the loop takes the whole queue
            // after reading the pipe: one byte (one system call) for a burst of posts from another loop.
            guard items.count == 1, wakeFD >= 0 else { return }
            var byte: UInt8 = 1
            _ = write(wakeFD, &byte, 1)
        }
    }

    func takeAll() -> [@Sendable () -> Void] {
        lock.withLock {
            var taken: [@Sendable () -> Void] = []
            swap(&taken, &items)
            return taken
        }
    }
}

extension EventLoop {
    /// Runs `work` on a worker thread (it may block: fsync, hashing) and then `completion` with its result on the
    /// loop thread.
    public func offload<T: Sendable>(_ work: @escaping @Sendable () -> T, then completion: @escaping (T) -> Void) {
        let box = LoopBound(completion)
        let inbox = self.inbox
        workers.submit {
            let result = work()
            inbox.append { box.value(result) }
        }
    }
}

/// Carries a loop-confined value through a `@Sendable` closure that hands it back to the same loop thread.
/// Unchecked because the compiler cannot see that only the loop thread ever touches `value`.
public struct LoopBound<Value>: @unchecked Sendable {
    public let value: Value
    public init(_ value: Value) { self.value = value }
}
