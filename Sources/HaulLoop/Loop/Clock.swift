import FoundationEssentials

/// Monotonic time, wall time and one-shot timers: the loop's in the server, a manual clock in tests.
public protocol Clock: AnyObject {
    /// Seconds since an arbitrary start, never going back.
    var now: Double { get }
    /// The date of the calendar, for what is shown or stored as a time of day (a download's times, a webhook's
    /// next attempt, the speed schedule's hour). It may jump; intervals are measured with `now`.
    var wallTime: Date { get }
    /// Runs `action` once, `seconds` from now, unless the returned timer is cancelled first.
    func after(_ seconds: Double, _ action: @escaping () -> Void) -> ClockTimer
}

/// A pending `Clock.after`.
public protocol ClockTimer: AnyObject {
    func cancel()
}

extension Clock {
    /// Runs `action` every `seconds` until the returned timer is cancelled (or released).
    public func every(_ seconds: Double, _ action: @escaping () -> Void) -> ClockTimer {
        let repeating = Repeating(clock: self, interval: seconds, action: action)
        repeating.arm()
        return repeating
    }
}

/// `Clock.every`: one `after` at a time, armed again each time it fires. It holds no weak reference: the clock
/// outlives its timers, and a timer that goes cancels what it armed.
private final class Repeating: ClockTimer {
    private unowned let clock: Clock
    private let interval: Double
    private let action: () -> Void
    private var pending: ClockTimer?
    private var cancelled = false

    init(clock: Clock, interval: Double, action: @escaping () -> Void) {
        self.clock = clock
        self.interval = interval
        self.action = action
    }

    deinit { pending?.cancel() }

    func arm() {
        pending = clock.after(interval) { [unowned self] in
            guard !self.cancelled else { return }
            self.arm()
            self.action()
        }
    }

    func cancel() {
        cancelled = true
        pending?.cancel()
        pending = nil
    }
}

/// The loop's clock: uptime, and timers on the loop's event base (at the transfer priority, like the work they
/// drive).
public final class LoopClock: Clock {
    private let loop: EventLoop

    public init(loop: EventLoop) { self.loop = loop }

    public var now: Double { ProcessInfo.processInfo.systemUptime }

    public var wallTime: Date { Date() }

    public func after(_ seconds: Double, _ action: @escaping () -> Void) -> ClockTimer {
        let timer = OneShot(action: action)
        timer.timer = LoopTimer(loop: loop, delay: seconds, priority: .transfer) { [unowned timer] in timer.fire() }
        timer.timer?.start()
        return timer
    }

    /// Owns its LoopTimer until it fires or is cancelled.
    private final class OneShot: ClockTimer {
        var timer: LoopTimer?
        private var action: (() -> Void)?

        init(action: @escaping () -> Void) { self.action = action }

        func fire() {
            let action = self.action
            self.action = nil
            timer = nil
            action?()
        }

        func cancel() {
            timer?.cancel()
            timer = nil
            action = nil
        }
    }
}
