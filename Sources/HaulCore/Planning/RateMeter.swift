/// A smoothed transfer speed, sampled at regular ticks (exponential moving average).
public struct RateMeter: Sendable {
    public private(set) var bytesPerSecond: Double = 0
    private var lastBytes: Int64?
    private var lastTime: Double = 0
    /// Weight of the newest sample: higher follows changes faster, lower is steadier.
    private let smoothing: Double

    public init(smoothing: Double = 0.5) { self.smoothing = smoothing }

    /// Records that `bytes` had been received in total at `time` (seconds, monotonic).
    public mutating func sample(bytes: Int64, at time: Double) {
        defer {
            lastBytes = bytes
            lastTime = time
        }
        guard let lastBytes, time > lastTime else { return }
        let instant = Double(max(0, bytes - lastBytes)) / (time - lastTime)
        bytesPerSecond = bytesPerSecond == 0 ? instant : smoothing * instant + (1 - smoothing) * bytesPerSecond
    }

    public mutating func reset() {
        bytesPerSecond = 0
        lastBytes = nil
    }
}
