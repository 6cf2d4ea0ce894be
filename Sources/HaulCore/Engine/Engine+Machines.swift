import FoundationEssentials
import HaulLoop

/// Stepping the machines and fanning out their changes.
extension Engine {
    /// The machines, for reading (a change goes through `registry`).
    var machines: [String: MachineBox] { registry.machines }

    /// Gives `event` to the machine of `id`: through its runner when it runs (which carries out the actions), else
    /// directly (a download that is not running asks for no action but its state).
    func deliver(_ id: String, _ event: MachineEvent) {
        if let runner = pool[id] {
            runner.deliver(event)
        } else {
            _ = step(id, event)
        }
    }

    func writeWindow(_ id: String, _ transfer: TransferID) -> (start: Int64, end: Int64)? {
        guard cluster == nil else { return nil }
        return machines[id]?.machine.writeWindow(for: transfer)
    }

    /// One step of the machine of `id`: the event in, the actions out; and what changed is stored, indexed, logged
    /// and told. Body bytes (`received`, `wrote`) are the hot path: they change progress only.
    func step(_ id: String, _ event: MachineEvent) -> [MachineAction] {
        guard let box = machines[id] else { return [] }
        switch event {
        case .received:
            // The bytes of a chunk, not yet written: the write that follows moves the totals. A file of unknown
            // size grows into its token's quota: what the token's other downloads hold now decides how far.
            if box.machine.quotaAllowance != nil, box.machine.download.totalBytes == nil {
                box.machine.quotaAllowance = tenancy.quotaAllowance(for: id)
            }
            return box.machine.handle(event, at: clock.now)
        case .wrote, .synced:
            // Progress and the journal (which `saveJournal` stores) only: nothing but the bytes received moves.
            let receivedBefore = box.machine.download.receivedBytes
            let now = clock.now
            if case .wrote = event { box.lastWriteAt = now }
            let actions = box.machine.handle(event, at: now)
            if box.readers > 0 { listener?.engineWrote(id) }
            let download = box.machine.download
            let delta = download.receivedBytes - receivedBefore
            guard let owner = download.owner else {
                registry.received(delta)
                return actions
            }
            let floor = download.totalBytes ?? download.expectedBytes ?? 0
            let heldDelta =
                download.state == .failed
                ? delta
                : max(floor, download.receivedBytes) - max(floor, receivedBefore)
            registry.received(delta, heldDelta: heldDelta, owner: owner)
            return actions
        default:
            let before = box.machine.download
            let actions = box.machine.handle(event, at: clock.now)
            registry.changed(id, from: before)
            changed(id, from: before)
            return actions
        }
    }

    /// Follows up a change of the machine of `id` from `before`: the indexes, the log, the store and the hub.
    func changed(_ id: String, from before: Download) {
        guard var download = machines[id]?.machine.download, download != before else { return }
        let stateChanged = download.state != before.state
        let now = clock.wallTime
        download.updatedAt = now
        if stateChanged {
            if download.state == .probing, download.startedAt == nil { download.startedAt = now }
            if download.state == .completed { download.completedAt = download.completedAt ?? now }
        }
        machines[id]!.machine.stamp(
            updatedAt: download.updatedAt, startedAt: download.startedAt,
            completedAt: download.completedAt)
        if stateChanged { log.stateChanged(download, from: before.state) }
        for observer in observers { observer.downloadWillBeStored(download, changedFrom: before) }
        // What an observer noted goes in the same write (a hook due for the new state).
        download = machines[id]!.machine.download
        if download.journal != before.journal, !Persister.onlyGrew(from: before.journal, to: download.journal) {
            // Cutting the file back is on disk before a byte of other data can land where the journal used to vouch
            // for.
            persister.save(download)
        } else {
            persister.saveSoon(id)
        }
        listener?.engineChanged(.updated(id, stateChanged: stateChanged))
        for observer in observers { observer.downloadChanged(download, from: before) }
    }

    // MARK: what runners use

    /// The download root and the completed root.
    var roots: DownloadRoots { DownloadRoots(config) }

    /// The directory `relative` to the download root, opened without following links.
    func directory(_ relative: String, create: Bool) throws(FileError) -> ConfinedDirectory {
        try roots.directory(relative, create: create)
    }

    func download(_ id: String) -> Download? { machines[id]?.machine.download }

    /// Stores the journal of `id` (what a sync vouched for).
    func saveJournal(_ id: String, _ journal: [Segment]) { persister.saveJournal(id, journal) }

    /// Whether a download other than `except` still needs the part file `name.part` in `directory`.
    func isClaimed(directory: String, name: String, except: String) -> Bool {
        // Read from the packed bytes where packed: a walk of a million unpacked none.
        machines.values.contains { box in
            box.state != .completed && box.names(name, in: directory) && box.id != except
        }
    }

    func slotFreed() { schedule() }

    /// A runner's download no longer needs its slot.
    func runnerFinished(_ id: String) {
        pool.remove(id)
        // Still queued (its start never reached the machine): back in line, or it would wait for no entry.
        if let download = machines[id]?.machine.download, download.state == .queued {
            registry.runQueue.push(RunQueue.Entry(download))
        }
        registry.runEnded(id, clock: clock)
        schedule()
    }
}
