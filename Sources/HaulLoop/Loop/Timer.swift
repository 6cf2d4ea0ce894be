internal import CEvent

/// A one-shot or repeating timer on an `EventLoop`. Cancelled when released.
public final class LoopTimer {
    private var event: OpaquePointer?
    private let action: () -> Void
    private let repeating: Bool
    private var interval: timeval

    /// Fires `action` once after `delay` seconds, or every `delay` seconds when `repeating`; call `start()`.
    public init(
        loop: EventLoop, delay: Double, repeating: Bool = false,
        priority: EventLoop.Priority = .api, action: @escaping () -> Void
    ) {
        self.action = action
        self.repeating = repeating
        self.interval = timeval(seconds: delay)
        let flags: Int16 = repeating ? haul_ev_persist() : 0
        event = event_new(
            loop.base, -1, flags,
            { _, _, arg in
                Unmanaged<LoopTimer>.fromOpaque(arg!).takeUnretainedValue().action()
            }, Unmanaged.passUnretained(self).toOpaque())
        event_priority_set(event, priority.rawValue)
    }

    deinit {
        if let event { event_free(event) }
    }

    public func start() {
        event_add(event, &interval)
    }

    public func cancel() {
        event_del(event)
    }

    public var isPending: Bool {
        event_pending(event, haul_ev_timeout(), nil) != 0
    }
}

extension timeval {
    init(seconds: Double) {
        let whole = max(0, seconds.rounded(.down))
        self.init(tv_sec: Int(whole), tv_usec: Int((max(0, seconds) - whole) * 1_000_000))
    }
}
