import Glibc

/// Two halves of one job on two cores: `produce` runs on a thread of its own and yields items, which `consume`
/// takes on the caller's thread, in order, a batch at a time. At most `depth` batches wait between them, so the
/// memory in flight stays that of a few batches however long the job. Start-up uses it to step and decode the
/// store's rows while the engine indexes the ones before.
public enum Overlap {
    /// Returns once both halves are done. `produce` must touch nothing the caller's thread uses meanwhile (it may
    /// use an object the caller leaves alone until this returns: the thread is joined first). The first error
    /// either half throws is thrown here, after the other half stopped: the consumer's stops the producer at its
    /// next batch; the producer's reaches the consumer after the items yielded before it.
    public static func run<Item>(
        batch: Int = 1024, depth: Int = 4,
        produce: @escaping (_ yield: (Item) throws -> Void) throws -> Void,
        consume: (Item) throws -> Void
    ) throws {
        let channel = Channel<Item>(depth: max(1, depth))
        let size = max(1, batch)
        let start = ThreadStart {
            var pending: [Item] = []
            pending.reserveCapacity(size)
            do {
                try produce { item in
                    pending.append(item)
                    guard pending.count == size else { return }
                    try channel.put(pending)
                    pending = []
                    pending.reserveCapacity(size)
                }
                if !pending.isEmpty { try channel.put(pending) }
                channel.finish(nil)
            } catch {
                // What was yielded before the error is handed over first, as it would be in turn on one thread.
                if !(error is Stopped), !pending.isEmpty { try? channel.put(pending) }
                channel.finish(error)
            }
        }
        var thread = pthread_t()
        let context = Unmanaged.passRetained(start).toOpaque()
        let created = pthread_create(
            &thread, nil,
            { context in
                Unmanaged<ThreadStart>.fromOpaque(context!).takeRetainedValue().body()
                return nil
            }, context)
        guard created == 0 else {
            // No second thread: the same job in turn on this one.
            Unmanaged<ThreadStart>.fromOpaque(context).release()
            return try produce(consume)
        }
        var consumerError: (any Error)?
        while let items = channel.take() {
            do {
                for item in items { try consume(item) }
            } catch {
                consumerError = error
                channel.stop()
                break
            }
        }
        pthread_join(thread, nil)
        if let consumerError { throw consumerError }
        if let failure = channel.failure, !(failure is Stopped) { throw failure }
    }

    /// What `yield` throws once the consumer stopped: it unwinds the producer.
    struct Stopped: Error {}

    private final class ThreadStart {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    /// The batches between the two threads, under one mutex and one condition (each side waits for the other).
    private final class Channel<Element>: @unchecked Sendable {
        // Heap cells: a pthread mutex or condition must not move.
        private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        private let depth: Int
        private var batches: [[Element]] = []
        private var finished = false
        private var stopped = false
        /// Read once the producer's thread is joined.
        private(set) var failure: (any Error)?

        init(depth: Int) {
            self.depth = depth
            pthread_mutex_init(mutex, nil)
            pthread_cond_init(condition, nil)
        }

        deinit {
            pthread_cond_destroy(condition)
            pthread_mutex_destroy(mutex)
            mutex.deallocate()
            condition.deallocate()
        }

        private func locked<T>(_ body: () throws -> T) rethrows -> T {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return try body()
        }

        func put(_ batch: [Element]) throws {
            try locked {
                while batches.count >= depth, !stopped { pthread_cond_wait(condition, mutex) }
                if stopped { throw Stopped() }
                batches.append(batch)
                pthread_cond_broadcast(condition)
            }
        }

        func finish(_ error: (any Error)?) {
            locked {
                finished = true
                failure = error
                pthread_cond_broadcast(condition)
            }
        }

        func take() -> [Element]? {
            locked {
                while batches.isEmpty, !finished { pthread_cond_wait(condition, mutex) }
                guard !batches.isEmpty else { return nil }
                pthread_cond_broadcast(condition)
                return batches.removeFirst()
            }
        }

        func stop() {
            locked {
                stopped = true
                batches.removeAll()
                pthread_cond_broadcast(condition)
            }
        }
    }
}
