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
    public func add(batch requests: [NewDownload], atomic: Bool, capacity: Int = .max)
        throws(EngineError) -> [AddOutcome] {
        enum Plan {
            case new(Int)
            case same(String)
            case sameAsNew(Int)
            case refused(EngineError)
        }
        var plans: [Plan] = []
        var fresh: [Download] = []
        var claimed: [String: Int] = [:]
        var reservedBytes: Int64 = 0
        var ownerReserved: [String: Int64] = [:]
        let now = clock.wallTime
        for request in requests {
            var category: Category?
            if let name = request.category {
                guard let found = self.category(name) else {
                    // As qBittorrent's API: a category is made before it is used (409), never by a typo.
                    plans.append(.refused(.conflict("no category '\(name)'; make it first with PUT "
                                                    + "/categories/\(name)")))
                    continue
                }
                category = found
            }
            // A category's folder holds its downloads (a download's own directory is then under it); a token's
            // root holds all of the token's, and a category whose folder is elsewhere is not the token's to use.
            var folder = category?.directory ?? ""
            if let root = request.owner?.root {
                if folder.isEmpty {
                    folder = root
                } else if folder != root && !folder.hasPrefix(root + "/") {
                    plans.append(.refused(.invalid(field: "category", message: "the category's folder '\(folder)' is "
                        + "outside the token's root '\(root)'")))
                    continue
                }
                if let completed = category?.completedDirectory, config.completedRoot != nil
                    || (completed != root && !completed.hasPrefix(root + "/")) {
                    plans.append(.refused(.invalid(field: "category", message: "the category's completed folder "
                        + "'\(completed)' is outside the token's root '\(root)'")))
                    continue
                }
            }
            let directory = [folder, request.directory].filter { !$0.isEmpty }.joined(separator: "/")
            let depth = directory.split(separator: "/").count
            if depth > FileName.maxDepth || directory.utf8.count > FileName.maxDirectoryBytes {
                plans.append(.refused(.invalid(field: "directory", message: "with the category's folder it would be "
                    + "\(depth) folders and \(directory.utf8.count) bytes; at most \(FileName.maxDepth) and "
                    + "\(FileName.maxDirectoryBytes)")))
                continue
            }
            let destination = DownloadRegistry.destination(request.url, directory, request.filename)
            // The same file asked for again: the download there is the answer, unless it is one the asking token
            // may not see (another token's under a shared root), which gets its own.
            if let existing = registry.download(fetching: request.url, into: directory, as: request.filename),
               let download = machines[existing]?.machine.download,
               request.owner?.root == nil || download.owner == request.owner?.id {
                plans.append(request.refusal(asking: download).map { .refused($0) } ?? .same(existing))
                continue
            }
            if let index = claimed[destination] {
                plans.append(.sameAsNew(index))
                continue
            }
            if fresh.count >= capacity {
                plans.append(.refused(.tooMany))
                continue
            }
            // Sizes of one batch add up: each must fit beside the ones before it.
            if let size = request.expectedBytes, let refusal = spaceRefusal(for: reservedBytes + size) {
                plans.append(.refused(.insufficientStorage(refusal)))
                continue
            }
            if let id = request.id, machines[id] != nil || fresh.contains(where: { $0.id == id }) {
                plans.append(.refused(.conflict("the id \(id) is taken")))
                continue
            }
            if let owner = request.owner, let quota = owner.quotaBytes {
                // What the token's downloads hold, those of this batch before this one included, must leave room.
                let held = tenancy.usage(of: owner.id) + (ownerReserved[owner.id] ?? 0)
                let size = request.expectedBytes ?? 0
                if held >= quota || held + size > quota {
                    plans.append(.refused(.insufficientStorage(DownloadError(.quotaExceeded, "the token '\(owner.name)' "
                        + "holds \(SpacePolicy.bytes(held)) of its \(SpacePolicy.bytes(quota)) quota"
                        + (size > 0 ? "; this file needs \(SpacePolicy.bytes(size))" : "")))))
                    continue
                }
                ownerReserved[owner.id, default: 0] += size
                tenancy.adding(as: owner)
            }
            reservedBytes += request.expectedBytes ?? 0
            // The category's connections and priority are the defaults.
            var download = Download(
                id: request.id ?? HaulID.random(), sequence: registry.nextSequence + Int64(fresh.count), url: request.url,
                headers: request.headers, requestedFilename: request.filename, directory: directory,
                state: request.startPaused ? .paused : .queued,
                connections: request.connections ?? category?.connections ?? config.defaultConnections,
                priority: request.priority ?? category?.priority ?? 0, maxSpeed: request.maxSpeed, createdAt: now)
            download.mirrors = request.mirrors.map(Mirror.init)
            download.owner = request.owner?.id
            download.ownerName = request.owner?.name
            // The category's completed folder, with the download's own folder under it as under the category's.
            download.completedDirectory = category?.completedDirectory.map { completed in
                [completed, request.directory].filter { !$0.isEmpty }.joined(separator: "/")
            }
            for carry in DownloadOptions.carrying { carry(request, &download) }
            claimed[destination] = fresh.count
            plans.append(.new(fresh.count))
            fresh.append(download)
        }
        let refused = plans.contains { if case .refused = $0 { true } else { false } }
        if atomic && refused {
            return plans.map { plan in
                if case .refused(let error) = plan { return .refused(error) }
                return .refused(.notAdded)
            }
        }
        if !fresh.isEmpty {
            do {
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
                webhooks.askFanOut()
            } catch {
                throw .storage("\(error)")
            }
        }
        for download in fresh {
            registry.insert(MachineBox(DownloadMachine(download: download, settings: settings.machine)), holding: download)
            log.info("download added", ["download.id": download.id, "download.url": Redact.url(download.url)])
            listener?.engineChanged(.created(download.id))
        }
        if !fresh.isEmpty { schedule() }
        return plans.map { plan in
            switch plan {
            case .new(let index): return .added(snapshot(fresh[index].id)!)
            case .same(let id): return .existing(snapshot(id)!)
            case .sameAsNew(let index): return .existing(snapshot(fresh[index].id)!)
            case .refused(let error): return .refused(error)
            }
        }
    }

    /// Adds a download once per `key`: a repeated request with the same key and body gets the first answer's
    /// status and the download as it is now; the same key with another body is a conflict.
    public func add(_ request: NewDownload, idempotencyKey key: String, requestHash: String)
        throws(EngineError) -> (snapshot: DownloadSnapshot, created: Bool) {
        let first: (downloadID: String, requestHash: String, status: Int)?
        do {
            first = try store.idempotencyAnswer(key: key)
        } catch {
            throw .storage("\(error)")
        }
        if let first {
            guard first.requestHash == requestHash else {
                throw .conflict("Idempotency-Key '\(key)' was used before with a different request")
            }
            guard let snapshot = snapshot(first.downloadID) else {
                throw .conflict("the download created for Idempotency-Key '\(key)' has been removed")
            }
            return (snapshot, first.status == 201)
        }
        let answer = try add(request)
        do {
            try store.rememberIdempotencyAnswer(key: key, downloadID: answer.snapshot.download.id,
                                                requestHash: requestHash, status: answer.created ? 201 : 200)
        } catch {
            log.error("cannot record an Idempotency-Key", ["error": "\(error)"])
        }
        return answer
    }

    /// What the first batch with this `key` was answered (stored by `rememberBatchAnswer`), or nil for a new key;
    /// the same key with another body, or one a single download used, is a conflict.
    public func batchAnswer(key: String, requestHash: String) throws(EngineError) -> String? {
        let first: (requestHash: String, answer: String?)?
        do {
            first = try store.batchAnswer(key: key)
        } catch {
            throw .storage("\(error)")
        }
        guard let first else { return nil }
        guard first.requestHash == requestHash, let answer = first.answer else {
            throw .conflict("Idempotency-Key '\(key)' was used before with a different request")
        }
        return answer
    }

    public func rememberBatchAnswer(key: String, requestHash: String, answer: String) throws(EngineError) {
        do {
            try store.rememberBatchAnswer(key: key, requestHash: requestHash, answer: answer)
        } catch {
            throw .storage("\(error)")
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
    public func update(batch ids: [String], _ changes: DownloadChanges)
        -> [(id: String, result: Result<DownloadSnapshot, EngineError>)] {
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
            guard download.state.next(after: event) != nil else {
                throw .conflict("a \(download.state.rawValue) download cannot become \(target.rawValue)")
            }
            stateEvent = event == .pause ? .pause : .resume
        }
        if changes.priority != nil || changes.maxSpeed != nil || changes.connections != nil {
            deliver(id, .change(changes))
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
        for id in ids {
            refresh(id)
            guard machines[id] != nil else { continue }
            if let runner = pool.remove(id) { runner.deliver(.stop(keepFile: false)) }
            found.append(id)
        }
        guard !found.isEmpty else { return [] }
        // As the stop left each: what the indexes and totals hold.
        let last = found.map { machines[$0]!.machine.download }
        do {
            try store.transaction {
                for download in last {
                    try store.delete(id: download.id)
                    // What waited for the group commit is told too: a receiver hears every change, then the removal.
                    try store.insertChanges((webhooks.waiting[download.id] ?? [])
                        + webhooks.changes(download, before: download.state, removed: true))
                }
            }
        } catch {
            throw .storage("\(error)")
        }
        for download in last {
            let id = download.id
            _ = webhooks.takeWaiting(id)
            if let name = download.filename {
                let directory = try? fileDirectory(of: download)
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

    /// The ids of the downloads that pass `filter`, in creation order, without building a snapshot of any.
    public func ids(where filter: (Download) -> Bool) -> [String] {
        registry.order.compactMap { entry in
            machines[entry.id].flatMap { filter($0.machine.download) ? entry.id : nil }
        }
    }

    /// Runs `work` on the loop's next turn (after what is waiting now): how the API works through a bulk change
    /// a slice at a time.
    public func onNextTurn(_ work: @escaping () -> Void) {
        turns.later(work)
    }

    /// The finished file of `id`, opened for reading (never through a link, and only while it is still the file
    /// Haul wrote), with its download.
    public func finishedFile(_ id: String) throws(EngineError) -> (file: OpenFile, download: Download) {
        guard let download = machines[id]?.machine.download else { throw .notFound(id) }
        guard download.state == .completed, let name = download.filename else {
            throw .conflict("the download is \(download.state.rawValue), not completed: it has no file yet")
        }
        let file: OpenFile
        do {
            file = try fileDirectory(of: download).openForReading(name)
        } catch {
            if error.isMissing { throw .gone("the file \(download.relativePath ?? name) is not there any more") }
            throw .conflict("the file cannot be served: \(error)")
        }
        // The name holds another file now (replaced, or truncated or grown in place): not this download's.
        if let stamp = download.fileStamp, !stamp.matches(file, sameNode: download.node == nil || download.node == node) {
            throw .conflict("the file \(download.relativePath ?? name) is no longer the one this download wrote (it "
                + "was replaced or changed since it completed)")
        }
        return (file, download)
    }

    /// The disk under the download root as downloads see it: nil when the root cannot be read.
    public func diskSpace() -> DiskSpace? {
        guard let root = try? directory("", create: false), let free = try? root.freeBytes(),
              let total = try? root.totalBytes() else { return nil }
        return DiskSpace(free: free, total: total, reserved: config.space.minFreeSpace)
    }

    /// Why a file of `size` bytes cannot be stored under the root now, or nil when it can.
    public func spaceRefusal(for size: Int64) -> DownloadError? {
        let free: Int64
        do {
            free = try directory("", create: false).freeBytes()
        } catch {
            return nil
        }
        return config.space.refusal(total: size, needed: size, free: free)
    }
}
