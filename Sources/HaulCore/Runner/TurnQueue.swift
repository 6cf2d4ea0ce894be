import HaulLoop

/// Work run on the loop's next turn, in the order it was asked for: the fetcher calls runners make from inside a
/// transfer's callback, and the slices of a bulk change. The queue is the engine's, not a runner's: a runner that
/// finished meanwhile still gets its transfers cancelled, and nothing is left holding it at shutdown.
final class TurnQueue {
    private let clock: Clock
    private var work: [() -> Void] = []
    private var timer: ClockTimer?

    init(clock: Clock) { self.clock = clock }

    /// Runs `item` on the loop's next turn, after the work asked for before it.
    func later(_ item: @escaping () -> Void) {
        work.append(item)
        guard timer == nil else { return }
        timer = clock.after(0) { [unowned self] in
            self.timer = nil
            let due = self.work
            self.work.removeAll()
            for item in due { item() }
        }
    }

    /// Whether work waits for the next turn (what comes after it waits behind it, to keep the order).
    var isEmpty: Bool { work.isEmpty }

    /// Drops what waits: at shutdown, closing the fetcher ends what it would have done.
    func cancel() {
        timer?.cancel()
        timer = nil
        work.removeAll()
    }
}
