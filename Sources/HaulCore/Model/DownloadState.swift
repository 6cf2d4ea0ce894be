/// Where a download is in its life. Every change of state goes through `DownloadState.next(after:)`, the transition
/// table below; `DownloadMachine` applies it and treats a transition the table lacks as a programming error.
///
/// ```
///               start    probed   transf.  verified fail    pause   resume  restart interrupt finished seed
/// queued        probing  -        -        -        -       paused  -       -       -         completed -
/// probing       -        downl.   -        -        failed  paused  -       -       queued    -         -
/// downloading   -        -        verif.   -        failed  paused  -       probing queued    -         -
/// verifying     -        -        -        compl.   failed  -       -       -       queued    -         seeding
/// seeding       -        -        -        compl.   -       -       -       -       -         -         -
/// completed     -        -        -        -        -       -       -       -       -         -         -
/// paused        -        -        -        -        -       -       queued  -       -         -         -
/// failed        -        -        -        -        -       -       queued  -       -         -         -
/// ```
/// (`DownloadStateTests` walks this table and checks it against `next(after:)`.)
public enum DownloadState: String, Sendable, CaseIterable, Codable {
    case queued, probing, downloading, verifying, seeding, completed, paused, failed

    /// Running states hold one of the `max_active` slots. A seeding torrent holds none: its files are complete and
    /// named, and it only uploads.
    public var isActive: Bool { self == .probing || self == .downloading || self == .verifying }
    /// States a download never leaves on its own.
    public var isFinished: Bool { self == .completed || self == .failed }
}

/// What moves a download from one state to another.
public enum DownloadEvent: String, Sendable, Equatable, CaseIterable {
    case start, probed, transferred, verified, fail, pause, resume
    /// The remote file changed (or cannot serve the range any more) mid-transfer: probe it again.
    case restart
    /// The server stopped while the download ran; at the next start it waits for a slot again.
    case interrupt
    /// A download about to start turns out finished already: its file got its name just before a crash.
    case finished
    /// A torrent's files are complete and named; it stays in the swarm, uploading, until a seeding limit is met.
    case seed
}

extension DownloadState {
    /// The state after `event`, or nil when the event is impossible in this state.
    public func next(after event: DownloadEvent) -> DownloadState? {
        switch (self, event) {
        /// A free slot picks the oldest queued download and probes it.
        case (.queued, .start): return .probing
        /// The probe answered; the body transfer starts.
        case (.probing, .probed): return .downloading
        /// Every byte is in the part file; it is synced and its checksum checked.
        case (.downloading, .transferred): return .verifying
        /// The file passed its checks and has its final name; a seeding torrent met its ratio or time limit.
        case (.verifying, .verified), (.seeding, .verified): return .completed
        /// A torrent's files are named; it uploads to the swarm for a while before it is completed.
        case (.verifying, .seed): return .seeding
        /// The user pauses before or during the transfer; the part file stays.
        case (.queued, .pause), (.probing, .pause), (.downloading, .pause): return .paused
        /// The user resumes a paused download or retries a failed one; it waits for a slot.
        case (.paused, .resume), (.failed, .resume): return .queued
        /// An error that retries did not cure.
        case (.probing, .fail), (.downloading, .fail), (.verifying, .fail): return .failed
        /// The remote file is not the one the segments hold: probe again, from scratch.
        case (.downloading, .restart): return .probing
        /// Running when the server stopped: back to the queue at the next start, resuming from the journal.
        case (.probing, .interrupt), (.downloading, .interrupt), (.verifying, .interrupt): return .queued
        /// Found complete at start (a crash after the file got its name, before the store heard).
        case (.queued, .finished): return .completed
        default: return nil
        }
    }

    /// Every transition of the table, state by state: what the doc comment above prints.
    public static var transitions: [(from: DownloadState, event: DownloadEvent, to: DownloadState)] {
        allCases.flatMap { from in
            DownloadEvent.allCases.compactMap { event in from.next(after: event).map { (from, event, $0) } }
        }
    }
}
