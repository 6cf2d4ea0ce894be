/// A speed limit: `rate` bytes a second, allowing bursts of a quarter second (at least one 16 KiB chunk).
public struct TokenBucket: Sendable {
    public var rate: Double {
        didSet { tokens = min(tokens, capacity) }
    }
    private var tokens: Double
    private var last: Double?

    public init(rate: Double) {
        self.rate = rate
        tokens = max(rate / 4, 16 * 1024)
    }

    private var capacity: Double { max(rate / 4, 16 * 1024) }

    /// Seconds to wait at time `now` before `count` bytes may pass (0: now).
    public mutating func delay(for count: Int, now: Double) -> Double {
        if let last { tokens = min(capacity, tokens + max(0, now - last) * rate) }
        last = now
        let need = min(Double(count), capacity)
        // Within a byte counts as enough: rounding must never leave a wait too small to move the clock.
        return tokens + 1 >= need ? 0 : (need - tokens) / rate
    }

    /// Spends `count` bytes (after `delay` said 0).
    public mutating func consume(_ count: Int) {
        tokens -= Double(count)
    }
}
