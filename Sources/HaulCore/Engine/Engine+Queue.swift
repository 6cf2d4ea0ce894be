/// The queue as clients reorder it.
extension Engine {
    /// Moves the waiting downloads of `ids` (queued or paused: the others have no place in the queue), stored with
    /// one commit; each answered with its position afterwards (0 starts first) or why not. Several moved to the
    /// top, to the bottom or to one position end up there in the order given; moved up or down, each goes one
    /// place and they keep their order.
    public func move(_ ids: [String], _ move: QueueMove) -> [(id: String, result: Result<Int, EngineError>)] {
        do {
            try requireStore()
        } catch {
            return ids.map { ($0, .failure(error)) }
        }
        for id in ids { refresh(id) }
        var queue = QueueOrder(
            machines.values.lazy.filter { $0.state == .queued || $0.state == .paused }.map(\.download)
                .map(QueueOrder.Entry.init))
        var failures: [String: EngineError] = [:]
        let known = ids.filter { id in
            guard let download = machines[id]?.machine.download else {
                failures[id] = .notFound(id)
                return false
            }
            guard download.isWaiting else {
                failures[id] = .conflict(
                    "a \(download.state.rawValue) download has no place in the queue: only "
                        + "queued and paused ones wait")
                return false
            }
            return true
        }
        let work: [String] =
            switch move {
            case .top, .position: known.reversed()
            case .bottom: known
            case .up: known.sorted { queue.position(of: $0)! < queue.position(of: $1)! }
            case .down: known.sorted { queue.position(of: $0)! > queue.position(of: $1)! }
            }
        for id in work {
            guard let (_, changed) = queue.move(id, move) else { continue }
            for entry in changed {
                var changes = DownloadChanges(priority: entry.priority)
                changes.queueRank = entry.order
                deliver(entry.id, .change(changes))
            }
        }
        persister.flush()
        schedule()
        return ids.map { id in
            if let failure = failures[id] { return (id, .failure(failure)) }
            guard let position = queue.position(of: id) else { return (id, .failure(.notFound(id))) }
            return (id, .success(position))
        }
    }
}
