import FoundationEssentials
import HaulCore

/// The methods on many downloads: pages, the queue, global options and statistics, results, and multicall.
extension Aria2RPC {
    func query(
        states: Set<DownloadState>, order: DownloadOrder, at position: Int, limit: Int
    )
        -> DownloadQuery
    {
        var query = DownloadQuery()
        query.filter = DownloadFilter(states: states)
        query.order = order
        query.cursor = .position(position)
        query.limit = max(1, min(limit, DownloadQuery.limits.upperBound))
        return query
    }

    /// `tellWaiting` (queued and paused, in the order they start) and `tellStopped` (finished, oldest first, then
    /// those removed here): `offset` from the start, or from the end when negative (then in reverse), at most `count`.
    func list(waiting: Bool, offset: Int, count: Int, keys: [String]?) throws(RPCError) -> JSONValue {
        let totals = operations.totals()
        let states: Set<DownloadState> = waiting ? [.queued, .paused] : [.completed, .failed]
        let stored = states.reduce(0) { $0 + totals.count($1) }
        let extra = waiting ? [] : session.removed(seenBy: operations.caller)
        let total = stored + extra.count
        guard count > 0 else { return .array([]) }
        var positions: [Int] = []
        if offset >= 0 {
            if offset < total { positions = Array(offset..<min(total, offset + min(count, total))) }
        } else if total + offset >= 0 {
            let start = total + offset
            positions = Array(stride(from: start, through: max(0, start - count + 1), by: -1))
        }
        let inStore = positions.filter { $0 < stored }
        var byPosition: [Int: JSONValue] = [:]
        if let low = inStore.min(), let high = inStore.max() {
            var at = low
            while at <= high {
                let page = operations.page(
                    query(
                        states: states, order: waiting ? .queue : .created, at: at,
                        limit: high - at + 1))
                if page.downloads.isEmpty { break }
                for (index, snapshot) in page.downloads.enumerated() {
                    byPosition[at + index] = status(snapshot, keys: keys)
                }
                at += page.downloads.count
            }
        }
        return .array(
            positions.compactMap { position in
                position < stored
                    ? byPosition[position] : Aria2Status.select(extra[position - stored].status, keys: keys)
            })
    }

    func changePosition(_ gid: String, _ position: Int, _ how: String) throws(RPCError) -> JSONValue {
        let snapshot = try snapshot(gid)
        guard snapshot.download.isWaiting else { throw RPCError("GID#\(gid) not found in the waiting queue.") }
        let totals = operations.totals()
        let waiting = totals.count(.queued) + totals.count(.paused)
        let target: Int
        switch how {
        case "POS_SET": target = position
        case "POS_END": target = waiting - 1 + position
        case "POS_CUR":
            guard let current = waitingPosition(of: snapshot.download.id) else {
                throw RPCError("GID#\(gid) not found in the waiting queue.")
            }
            target = current + position
        default: throw RPCError("Illegal argument.")
        }
        do {
            return .number(
                Double(try operations.move(snapshot.download.id, .position(max(0, min(target, waiting - 1))))))
        } catch {
            throw RPCError(Problem(error).detail)
        }
    }

    /// Where `id` is in the waiting queue, 0 first.
    func waitingPosition(of id: String) -> Int? {
        var at = 0
        while true {
            let page = operations.page(
                query(
                    states: [.queued, .paused], order: .queue, at: at,
                    limit: DownloadQuery.limits.upperBound))
            if let index = page.downloads.firstIndex(where: { $0.download.id == id }) { return at + index }
            guard page.next != nil, !page.downloads.isEmpty else { return nil }
            at += page.downloads.count
        }
    }

    func changeOption(_ gid: String, _ options: [(String, JSONValue)]) throws(RPCError) -> JSONValue {
        let snapshot = try snapshot(gid)
        let changes: DownloadChanges
        do {
            changes = try Aria2Options.changes(options)
        } catch {
            throw RPCError(error.message)
        }
        guard changes.maxSpeed != nil || changes.connections != nil else { return .string("OK") }
        _ = try change(snapshot.download.id, gid, changes)
        return .string("OK")
    }

    func changeGlobalOption(_ options: [(String, JSONValue)]) throws(RPCError) -> JSONValue {
        let members: [(String, JSONValue)]
        do {
            members = try Aria2GlobalOptions.settingsMembers(options)
        } catch {
            throw RPCError(error.message)
        }
        guard !members.isEmpty else { return .string("OK") }
        let (change, errors) = SettingsChange.parse(members)
        if let first = errors.first { throw RPCError("\(first.field): \(first.message)") }
        do {
            _ = try operations.changeSettings(change)
        } catch {
            throw RPCError(Problem(error).detail)
        }
        return .string("OK")
    }

    func globalStat() -> JSONValue {
        let totals = operations.totals()
        let stopped =
            totals.count(.completed) + totals.count(.failed) + session.removed(seenBy: operations.caller).count
        return .object([
            ("downloadSpeed", .string(String(Int64(totals.speed.rounded())))),
            ("uploadSpeed", .string("0")),
            ("numActive", .string(String(totals.active))),
            ("numWaiting", .string(String(totals.count(.queued) + totals.count(.paused)))),
            // Capped as aria2 caps it (--max-download-result, 1000 as getGlobalOption says); the total is not.
            ("numStopped", .string(String(min(stopped, Aria2Session.maxRemoved)))),
            ("numStoppedTotal", .string(String(stopped))),
        ])
    }

    /// aria2 forgets its finished results, not their files: Haul removes the finished downloads' records (files
    /// stay) and the removed ones it kept.
    func purge() -> JSONValue {
        session.purgeRemoved(by: operations.caller)
        act(.remove(deleteFile: false), states: [.completed, .failed])
        return .string("OK")
    }

    func removeResult(_ gid: String) throws(RPCError) -> JSONValue {
        if session.forgetRemoved(gid, by: operations.caller) { return .string("OK") }
        let snapshot = try snapshot(gid)
        guard snapshot.download.state.isFinished else {
            throw RPCError("Could not remove download result of GID#\(gid)")
        }
        do {
            try operations.remove(snapshot.download.id, deleteFile: false)
        } catch {
            throw RPCError(Problem(error).detail)
        }
        return .string("OK")
    }

    func multicall(_ p: Aria2Call) throws(RPCError) -> JSONValue {
        guard case .array(let calls)? = p.value(0) else { throw RPCError("Bad multicall signature") }
        guard calls.count <= Aria2Envelope.maxBatch else {
            throw RPCError("a multicall holds at most \(Aria2Envelope.maxBatch) calls")
        }
        return .array(
            calls.map { entry -> JSONValue in
                guard let method = entry["methodName"]?.stringValue else {
                    return RPCError("Missing methodName.").json
                }
                var params: [JSONValue] = []
                switch entry["params"] {
                case .array(let items)?: params = items
                case nil, .null?: break
                default: return RPCError("Missing params.").json
                }
                do throws(RPCError) {
                    return .array([try p.request.spend(try call(method, params, caller: p.request, nested: true))])
                } catch {
                    return error.json
                }
            })
    }
}
