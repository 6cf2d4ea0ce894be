internal import CSystem

/// A few threads for work that blocks (fdatasync, hashing), so the loop thread never waits on the disk.
/// Plain pthreads: Foundation's Thread and NSCondition are in the half of Foundation the server does not link.
final class WorkerPool: @unchecked Sendable {
    // Heap cells: a pthread mutex or condition must not move, which a stored property of a class may not promise.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var queue: [@Sendable () -> Void] = []

    /// Throws when not one thread could start.
    init(threads: Int) throws(LoopError) {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
        var started = 0
        var failure: Int32 = 0
        for index in 0..<threads {
            var thread = pthread_t()
            // Each thread holds the pool for as long as the process runs, as Foundation's Thread closure did.
            let context = Unmanaged.passRetained(self).toOpaque()
            let created = pthread_create(
                &thread, nil,
                { context in
                    let pool = Unmanaged<WorkerPool>.fromOpaque(context!).takeRetainedValue()
                    pool.run()
                    return nil
                }, context)
            if created == 0 {
                pthread_setname_np(thread, "haul-worker-\(index)")
                pthread_detach(thread)
                started += 1
            } else {
                Unmanaged<WorkerPool>.fromOpaque(context).release()
                failure = created
            }
        }
        if started == 0 { throw .system("pthread_create", failure) }
    }

    func submit(_ work: @escaping @Sendable () -> Void) {
        pthread_mutex_lock(mutex)
        queue.append(work)
        pthread_cond_signal(condition)
        pthread_mutex_unlock(mutex)
    }

    private func run() -> Never {
        while true {
            pthread_mutex_lock(mutex)
            while queue.isEmpty { pthread_cond_wait(condition, mutex) }
            let work = queue.removeFirst()
            pthread_mutex_unlock(mutex)
            work()
        }
    }
}
