/// Where a download is in its life. See `DownloadState.next(after:)` for the transitions.
public enum DownloadState: String, Sendable, CaseIterable, Codable {
    case queued, probing, downloading, verifying, completed, paused, failed

    /// Running states hold one of the `max_active` slots.
    public var isActive: Bool { self == .probing || self == .downloading || self == .verifying }
    /// States a download never leaves on its own.
    public var isFinished: Bool { self == .completed || self == .failed }
}

/// What can happen to a download.
public enum DownloadEvent: Sendable, Equatable {
    case start, probed, transferred, verified, pause, resume, fail
}

extension DownloadState {
    /// The state after `event`, or nil when the event is impossible in this state.
    public func next(after event: DownloadEvent) -> DownloadState? {
        switch (self, event) {
        /// A free slot picks the oldest queued download and probes it.
        case (.queued, .start): return .probing
        /// The probe answered; the body transfer starts.
        case (.probing, .probed): return .downloading
        /// Every byte is on disk; size (and later checksum) are checked.
        case (.downloading, .transferred): return .verifying
        /// The file passed its checks and has its final name.
        case (.verifying, .verified): return .completed
        /// The user pauses before or during the transfer; the part file stays.
        case (.queued, .pause), (.probing, .pause), (.downloading, .pause): return .paused
        /// The user resumes a paused download or retries a failed one; it waits for a slot.
        case (.paused, .resume), (.failed, .resume): return .queued
        /// An error that retries did not cure.
        case (.probing, .fail), (.downloading, .fail), (.verifying, .fail): return .failed
        default: return nil
        }
    }
}
