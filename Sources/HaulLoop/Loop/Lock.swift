import Glibc

/// Mutual exclusion over a pthread mutex, for the little state threads share (the loop's inbox, the log buffer).
/// Not Synchronization's Mutex: its contended path waits on a futex inside the uninstrumented runtime, where
/// ThreadSanitizer cannot see the hand-over, and it reported the data the Mutex guarded as raced.
public final class Lock: @unchecked Sendable {
    // A heap cell: a pthread mutex must not move.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    public func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
