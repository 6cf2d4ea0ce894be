import FoundationEssentials
import HaulLoop

/// What clients ask for: adding (one, a batch, idempotently), changing, removing, and files and free space.
extension Engine {
    /// Adds a download, or returns the unfinished one with the same URL and destination (`created` false).
    public func add(_ request: NewDownload) throws(EngineError) -> (snapshot: DownloadSnapshot, created: Bool) {
        switch try add(batch: [request], atomic: true)[0] {
        case .added(let snapshot): return (snapshot, true)
        case .existing(let snapshot): return (snapshot, false)
        case .refused(let error): throw error
        }
    }

    /// What became of one download of a batch.
    public enum AddOutcome {
        case added(DownloadSnapshot)
        /// The unfinished download with the same URL and destination (also an earlier one of the same batch).
        case existing(DownloadSnapshot)
        case refused(EngineError)
    }

    /// Adds several downloads, stored with one commit, each answered on its own: added, the existing one, or why
    /// not. With `atomic`, a refusal of any adds none (the answers then tell which were refused), and a store that
    /// fails adds none either way (thrown). At most `capacity` new downloads are added; the rest are refused.
    public func add(
        batch requests: [NewDownload], atomic: Bool, capacity: Int = .max
    )
        throws(EngineError) -> [AddOutcome]
    {
        var context = AdmissionContext()
        context.categories = categories.byName
        context.completedRoot = config.completedRoot
        context.existing = { [registry] url, directory, name in
            let id = registry.download(fetching: url, into: directory, as: name)
            return id.flatMap { registry.machines[$0]?.machine.download }
        }
        context.idTaken = { [registry] in registry.machines[$0] != nil }
        context.spaceRefusal = { [roots] in roots.spaceRefusal(for: $0) }
        context.usage = { [tenancy] in tenancy.usage(of: $0) }
        context.capacity = capacity
        context.defaultConnections = config.defaultConnections
        context.nextSequence = registry.nextSequence
        context.now = clock.wallTime
        context.bittorrent = config.bittorrent.enabled
        let plan = AdmissionPlan(requests, context)
        if atomic && plan.refusesAny {
            return plan.outcomes.map { outcome in
                if case .refused(let error) = outcome { .refused(error) } else { .refused(.notAdded) }
            }
        }
        var fresh = plan.fresh
        // A .torrent file waits for its download beside where its files will be, written before the download is.
        for (index, outcome) in plan.outcomes.enumerated() {
            guard case .new(let at) = outcome, let torrent = requests[index].torrent else { continue }
            try keepTorrentFile(torrent, for: fresh[at])
            // Its files are known before it starts: shown (and selected) from the first answer.
            if let meta = try? TorrentSession.parse(torrent) {
                fresh[at].torrent = TorrentInfo(meta: meta, selection: fresh[at].files.flatMap(TorrentSelection.init))
            }
        }
        if !fresh.isEmpty {
            try EngineError.storing {
                // Several nodes number their downloads from one sequence in the store.
                if let numbers = try store.allocateSequences(fresh.count), numbers.count == fresh.count {
                    for index in fresh.indices { fresh[index].sequence = numbers[index] }
                }
                try store.transaction {
                    for download in fresh {
                        try store.save(download)
                        try store.insertChanges(webhooks.changes(download, before: nil))
                    }
                }
            }
            webhooks.askFanOut()
        }
        for owner in plan.owners { tenancy.adding(as: owner) }
        for download in fresh {
            let box = MachineBox(DownloadMachine(download: download, settings: settings.machine))
            registry.insert(box, holding: download)
            log.info("download added", ["download.id": download.id, "download.url": Redact.url(download.url)])
            listener?.engineChanged(.created(download.id))
        }
        if !fresh.isEmpty { schedule() }
        return plan.outcomes.map { outcome in
            switch outcome {
            case .new(let index): .added(snapshot(fresh[index].id)!)
            case .sameAsNew(let index): .existing(snapshot(fresh[index].id)!)
            case .same(let id): .existing(snapshot(id)!)
            case .refused(let error): .refused(error)
            }
        }
    }

    /// Writes a new torrent download's .torrent file into its staging folder.
    private func keepTorrentFile(_ bytes: [UInt8], for download: Download) throws(EngineError) {
        do {
            let directory = try self.directory(download.directory, create: true)
            try directory.makeDirectory(TorrentStaging.name(download.id))
            try directory.subdirectory(TorrentStaging.name(download.id)).writeFile(TorrentStaging.metadata, bytes)
        } catch {
            throw .storage("cannot keep the torrent file: \(error)")
        }
    }

    public func update(_ id: String, _ changes: DownloadChanges) throws(EngineError) -> DownloadSnapshot {
        // Another node's download is changed as it is in the store now, not as the last notification left it.
        refresh(id)
        guard machines[id] != nil else { throw .notFound(id) }
        // A change is made in memory first and stored after: with the store away it would be answered as done
        // and kept only until a restart. Refused instead, before anything moves.
        try requireStore()
        try apply(changes, to: id)
        // What a client was told is stored before it hears it.
        persister.flush()
        schedule()
        return snapshot(id)!
    }

    /// The same change of many downloads, each answered on its own, stored with one commit.
    public func update(
        batch ids: [String], _ changes: DownloadChanges
    )
        -> [(id: String, result: Result<DownloadSnapshot, EngineError>)]
    {
        do {
            try requireStore()
        } catch {
            return ids.map { ($0, .failure(error)) }
        }
        var failures: [String: EngineError] = [:]
        for id in ids {
            refresh(id)
            do throws(EngineError) {
                try apply(changes, to: id)
            } catch {
                failures[id] = error
            }
        }
        persister.flush()
        schedule()
        return ids.map { id in
            if let failure = failures[id] { return (id, .failure(failure)) }
            guard let snapshot = snapshot(id) else { return (id, .failure(.notFound(id))) }
            return (id, .success(snapshot))
        }
    }

    /// Gives the machine of `id` a client's change (a state asked for, priority, speed, connections); the caller
    /// stores it.
    private func apply(_ changes: DownloadChanges, to id: String) throws(EngineError) {
        guard let download = machines[id]?.machine.download else { throw .notFound(id) }
        var stateEvent: MachineEvent?
        if let target = changes.state, target != download.state {
            let event: DownloadEvent
            switch target {
            case .paused: event = .pause
            case .queued: event = .resume
            default: throw .conflict("a download cannot be put in state '\(target.rawValue)' by a client")
            }
            // Pausing a seeding torrent ends its seeding: it is completed.
            guard download.state.next(after: event) != nil || download.state == .seeding && event == .pause else {
                throw .conflict("a \(download.state.rawValue) download cannot become \(target.rawValue)")
            }
            stateEvent = event == .pause ? .pause : .resume
        }
        if let category = changes.category, let name = category, categories[name] == nil {
            throw .invalid(field: "category", message: "no category '\(name)': make it first (PUT /categories/\(name))")
        }
        if changes.changesOptions {
            deliver(id, .change(changes))
            // A running download's chunks pass its new category's speed limit from now on.
            if let category = changes.category { pool[id]?.category = category }
            // A running download takes a new speed limit at once.
            if changes.maxSpeed != nil {
                pool[id]?.limitsChanged(maxSpeed: machines[id]?.machine.download.maxSpeed)
            }
        }
        if let stateEvent { deliver(id, stateEvent) }
    }

    /// Cancels and forgets a download, deleting its part file (and its finished file with `deleteFile`).
    public func remove(_ id: String, deleteFile: Bool) throws(EngineError) {
        guard try remove(batch: [id], deleteFile: deleteFile) == [id] else { throw .notFound(id) }
    }

    /// Cancels and forgets the downloads of `ids` there are (the others were removed already), with one commit;
    /// returns those removed. Nothing is removed, and no file deleted, if the store refuses.
    public func remove(batch ids: [String], deleteFile: Bool) throws(EngineError) -> [String] {
        var found: [String] = []
        // Running torrents' folders are removed by their runners once libtorrent has let go of them.
        var runningTorrents: Set<String> = []
        for id in ids {
            refresh(id)
            guard machines[id] != nil else { continue }
            if let runner = pool.remove(id) {
                if machines[id]?.machine.download.kind == .torrent { runningTorrents.insert(id) }
                runner.deliver(.stop(keepFile: false))
            }
            found.append(id)
        }
        guard !found.isEmpty else { return [] }
        // As the stop left each: what the indexes and totals hold.
        let last = found.map { machines[$0]!.machine.download }
        try EngineError.storing {
            try store.transaction {
                for download in last {
                    try store.delete(id: download.id)
                    // What waited for the group commit is told too: a receiver hears every change, then the removal.
                    try store.insertChanges(
                        (webhooks.waiting[download.id] ?? [])
                            + webhooks.changes(download, before: download.state, removed: true))
                }
            }
        }
        for download in last {
            let id = download.id
            _ = webhooks.takeWaiting(id)
            if download.kind == .torrent, download.state != .completed, download.state != .seeding {
                // The torrent's staging folder: its files so far, its .torrent and resume data.
                if !runningTorrents.contains(id) {
                    try? roots.directory(download.directory, create: false).removeTree(TorrentStaging.name(id))
                }
            } else if download.kind == .torrent, deleteFile, let name = download.filename {
                try? roots.fileDirectory(of: download).removeTree(name)
            } else if let name = download.filename {
                let directory = try? roots.fileDirectory(of: download)
                if download.state != .completed {
                    try? directory?.remove(name + ".part")
                } else if deleteFile {
                    try? directory?.remove(name)
                }
            }
            registry.remove(id)
            persister.forget(id)
            log.info("download removed", ["download.id": id])
            listener?.engineChanged(.removed(id, last: download.state))
        }
        webhooks.askFanOut()
        schedule()
        return found
    }

    /// Runs `work` on the loop's next turn (after what is waiting now): how the API works through a bulk change
    /// a slice at a time.
    public func onNextTurn(_ work: @escaping () -> Void) { turns.later(work) }

    /// The finished file of `id`, opened for reading (never through a link, and only while it is still the file
    /// Haul wrote), with its download.
    public func finishedFile(_ id: String) throws(EngineError) -> (file: OpenFile, download: Download) {
        guard let download = machines[id]?.machine.download else { throw .notFound(id) }
        return (try roots.openFinished(download, sameNode: download.node == nil || download.node == node), download)
    }
}
