internal import CSystem
import Glibc

/// An event loop on a thread of its own: the API's, whose loop reads and writes the clients' connections beside
/// the engine's loop (`--threads` 2 or more).
public final class LoopThread: @unchecked Sendable {
    public let loop: EventLoop
    private let name: String
    private var thread: pthread_t?

    public init(name: String) throws {
        // Its loop blocks on nothing: one worker for `offload`, should anything on it ask.
        loop = try EventLoop(workerThreads: 1)
        self.name = name
    }

    /// Runs the loop on a new thread.
    public func start() throws(LoopError) {
        guard thread == nil else { return }
        var created = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        let status = pthread_create(
            &created, nil,
            { context in
                let me = Unmanaged<LoopThread>.fromOpaque(context!).takeRetainedValue()
                me.loop.run()
                return nil
            }, context)
        guard status == 0 else {
            Unmanaged<LoopThread>.fromOpaque(context).release()
            throw .system("pthread_create", status)
        }
        pthread_setname_np(created, String(name.prefix(15)))
        thread = created
    }

    /// Stops the loop once the work posted to it has run, and waits for its thread to end. Call it from another
    /// thread than the loop's.
    public func stop() {
        guard let thread else { return }
        loop.stopSoon()
        pthread_join(thread, nil)
        self.thread = nil
        loop.closeInbox()
    }
}
