/// The operator's hooks: argv lists from the config file only (an API caller never names a program to run).
public struct HookConfig: Sendable {
    public var onComplete: [String]?
    public var onFailed: [String]?
    /// Seconds before a hook is killed.
    public var timeout = 60.0
    /// Hooks running at once; more wait their turn.
    public var concurrency = 4

    public init() {}

    public var isEmpty: Bool { onComplete == nil && onFailed == nil }

    /// The program for a download now in `state`.
    public func command(for state: DownloadState) -> [String]? {
        switch state {
        case .completed: return onComplete
        case .failed: return onFailed
        default: return nil
        }
    }
}
