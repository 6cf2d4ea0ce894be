import FoundationEssentials
import HaulLoop

/// What the persister asks of the engine it writes for.
protocol PersisterHost: AnyObject {
    /// The download as it is now, nil once it is gone.
    func current(_ id: String) -> Download?
    /// What a write of `id` holds over its row (a cluster's fence).
    func writeClaim(_ id: String) -> WriteClaim
    /// Writes the webhook changes waiting on `id`, inside the transaction that stores it.
    func storeWaitingChanges(_ id: String) throws
    /// The transaction that stored the downloads `ids` (and their waiting changes) committed.
    func storedWaitingChanges<S: Sequence<String>>(_ ids: S)
    /// The store refused a write of `id`: another node holds it now.
    func refusedWrite(_ id: String)
}

/// Writes downloads to the store. Changes that may wait (a probe answer, a state change) wait `groupCommitDelay`
/// and go in one transaction with the others of that moment; what may not wait (a journal that shrank, a client's
/// change before it is answered) goes at once. A download and the webhook changes it caused go in one transaction:
/// a crash keeps both or neither. A failed write keeps the downloads for a retry a second later.
final class Persister {
    /// How long changes the engine made itself wait to be stored together. Sixteen small downloads at once
    /// changed state in as many loop turns, one commit each (4.9 commits per download); within 10 ms they share one.
    /// A client's change is stored before it is answered (`flush`), a journal that shrank at once (`save`), and a
    /// checkpoint as soon as its sync is done: what waits is only what a crash may lose without harm (a state
    /// change the restart works out again from the journal and the files).
    static let groupCommitDelay = 0.01
    /// How long after a failed write the downloads it held are written again.
    static let retryDelay = 1.0

    private let store: DownloadStore
    private let clock: Clock
    private let log: Logger
    unowned var host: PersisterHost!
    /// Downloads changed since their last write.
    private(set) var unsaved: Set<String> = []
    private var groupTimer: ClockTimer?
    private var retryTimer: ClockTimer?
    /// Transactions committed (for tests and metrics: how well changes are grouped).
    private(set) var commits = 0
    /// When the store was last asked whether it answers, and why not (nil: it did).
    private var readiness: (at: Double, problem: String?)?

    init(store: DownloadStore, clock: Clock, log: Logger) {
        self.store = store
        self.clock = clock
        self.log = log
    }

    /// `id` changed in a way a crash may lose: written with the others of the next `groupCommitDelay`.
    func saveSoon(_ id: String) {
        unsaved.insert(id)
        guard groupTimer == nil else { return }
        groupTimer = clock.after(Persister.groupCommitDelay) { [unowned self] in
            self.groupTimer = nil
            self.flush()
        }
    }

    /// Throws unless the store answers now (a round trip): what a client's change asks before anything moves.
    func requireStore() throws(EngineError) {
        do {
            try store.ping()
        } catch {
            readiness = (clock.now, "\(error)")
            throw .storage("\(error)")
        }
    }

    /// Why the store cannot be used now, or nil when it answers: what `/readyz` tells a load balancer. Asked at most
    /// once a second, however often it is polled.
    func storeProblem() -> String? {
        let now = clock.now
        if let last = readiness, now - last.at < 1 { return last.problem }
        var problem: String?
        do {
            try store.ping()
        } catch {
            problem = "\(error)"
        }
        readiness = (now, problem)
        return problem
    }

    /// Whether `id` has a change waiting for the group commit.
    func isWaiting(_ id: String) -> Bool { unsaved.contains(id) }

    /// Nothing of `id` is to be written any more (removed, or another node's now).
    func forget(_ id: String) { unsaved.remove(id) }

    /// Writes every waiting download now, in one transaction.
    func flush() {
        guard !unsaved.isEmpty else { return }
        let ids = unsaved
        unsaved.removeAll()
        var refused: [String] = []
        var saved: [String] = []
        do {
            try store.transaction {
                for id in ids {
                    guard let download = host.current(id) else { continue }
                    if try store.save(download, claim: host.writeClaim(id)) {
                        try host.storeWaitingChanges(id)
                        saved.append(id)
                    } else {
                        refused.append(id)
                    }
                }
            }
            commits += 1
            host.storedWaitingChanges(saved)
        } catch {
            // Kept, not dropped: a download that changes no more (one just completed) must still reach the store
            // once it answers again.
            unsaved.formUnion(ids)
            log.error("cannot save downloads; trying again in a second", ["error": "\(error)"])
            if retryTimer == nil {
                retryTimer = clock.after(Persister.retryDelay) { [unowned self] in
                    self.retryTimer = nil
                    self.flush()
                }
            }
            return
        }
        for id in refused { host.refusedWrite(id) }
    }

    /// Writes `download` now, in a transaction of its own, with the changes waiting on it.
    func save(_ download: Download) {
        unsaved.remove(download.id)
        do {
            var landed = false
            try store.transaction {
                landed = try store.save(download, claim: host.writeClaim(download.id))
                if landed { try host.storeWaitingChanges(download.id) }
            }
            commits += 1
            if landed {
                host.storedWaitingChanges([download.id])
            } else {
                host.refusedWrite(download.id)
            }
        } catch {
            log.error("cannot save download", ["download.id": download.id, "error": "\(error)"])
        }
    }

    /// Writes the journal of `id` (what a sync vouched for): the cheap write made while a transfer runs.
    func saveJournal(_ id: String, _ journal: [Segment]) {
        // A journal vouches for bytes of the file the probe described, under the name chosen for it: while that
        // answer still waits for the group commit, the whole download is stored with the journal. Otherwise a crash
        // just after a small download finished kept its bytes without its size, validators and name, and the
        // restart fetched it again under a second name.
        if unsaved.contains(id), var download = host.current(id) {
            download.journal = journal
            return save(download)
        }
        do {
            if try !store.saveJournal(id: id, journal, updatedAt: clock.wallTime, claim: host.writeClaim(id)) {
                host.refusedWrite(id)
            }
        } catch {
            log.error("cannot save a checkpoint", ["download.id": id, "error": "\(error)"])
        }
    }

    /// At shutdown: what waits is written, and no retry comes after.
    func stop() {
        groupTimer?.cancel()
        groupTimer = nil
        flush()
        retryTimer?.cancel()
        retryTimer = nil
    }

    /// Whether a journal only grew from `old` to `new` (segments kept their starts and gained bytes, new ones are
    /// empty): such a change may wait; one that cut bytes back is written before other data lands there.
    static func onlyGrew(from old: [Segment], to new: [Segment]) -> Bool {
        old.count <= new.count && zip(old, new).allSatisfy { $0.start == $1.start && $0.received <= $1.received }
            && new.dropFirst(old.count).allSatisfy { $0.received == 0 }
    }
}
