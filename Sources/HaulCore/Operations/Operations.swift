import FoundationEssentials
import HaulLoop

/// Which downloads a query or a bulk action means: each given part must match.
public struct DownloadFilter: Sendable {
    public var states: Set<DownloadState>?
    /// Lowercased; matched against the name and the URL.
    public var search: String?
    public var category: String?
    /// Only these ids (the downloads changed since a sequence number).
    public var ids: Set<String>?
    /// Only ids that start with this (what a person types of one: `haul rm 5sbz`).
    public var idPrefix: String?
    /// Only the downloads this token added (a caller confined to its own).
    public var owner: String?
    /// Only downloads of these kinds (the qBittorrent front's torrents).
    public var kinds: Set<DownloadKind>?

    public init(
        states: Set<DownloadState>? = nil, search: String? = nil, category: String? = nil,
        ids: Set<String>? = nil, idPrefix: String? = nil
    ) {
        self.states = states
        self.search = search
        self.category = category
        self.ids = ids
        self.idPrefix = idPrefix
    }

    public func matches(_ download: Download) -> Bool {
        (states?.contains(download.state) ?? true) && (category == nil || download.category == category)
            && (ids?.contains(download.id) ?? true) && (idPrefix.map(download.id.hasPrefix) ?? true)
            && (owner == nil || download.owner == owner) && (kinds?.contains(download.kind) ?? true)
            && (search.map(download.matches(search:)) ?? true)
    }
}

/// A page of downloads: what `GET /downloads` asks, and aria2's `tellActive`, `tellWaiting` and `tellStopped`.
public struct DownloadQuery: Sendable {
    /// Where a page starts: after a sequence number (creation order, stable while downloads come and go), or at a
    /// position in another order.
    public enum Cursor: Sendable, Equatable {
        case sequence(Int64)
        case position(Int)
    }

    public static let limits = 1...1000

    public var filter = DownloadFilter()
    public var order = DownloadOrder.created
    public var descending = false
    public var cursor: Cursor?
    public var limit = 100

    public init() {}
}

/// One page, and where the next one starts (nil: this was the last).
public struct DownloadPage {
    public var downloads: [DownloadSnapshot]
    public var next: DownloadQuery.Cursor?
}

/// What a bulk action does to each download it names.
public enum BulkAction: Sendable, Equatable {
    case pause
    case resume
    case remove(deleteFile: Bool)
    /// Each to the top, up, down or to the bottom of the queue (waiting downloads only).
    case move(QueueMove)
}

/// What became of one download a bulk action named: changed (its snapshot), removed, or why not.
public struct BulkResult {
    public enum Outcome {
        case changed(DownloadSnapshot)
        /// Moved in the queue: its snapshot and its place now, 0 first.
        case moved(DownloadSnapshot, position: Int)
        case removed
        case refused(EngineError)
    }

    public var id: String
    public var outcome: Outcome
}

/// An Idempotency-Key and the hash of the request that came with it.
public struct Idempotency: Sendable {
    public var key: String
    public var requestHash: String

    public init(key: String, requestHash: String) {
        self.key = key
        self.requestHash = requestHash
    }
}

/// What Haul does for a caller, as typed commands and queries free of any wire format: REST's handlers decode a
/// request into one of these and encode what it answers, and the aria2 JSON-RPC front maps its methods to the same
/// calls, so both share one set of rules (the limit on downloads, which downloads a filter means, what a bulk
/// action does to each, which downloads a token sees and may change). `Operation` names them with their scope;
/// this does them, for one `caller` (`acting(as:)` gives the same operations for another).
public struct Operations {
    let engine: Engine
    /// The most downloads the server holds.
    public let maxDownloads: Int
    /// Whose request this is: what it adds is its own, and it sees and changes what its token may.
    public let caller: Caller

    public init(engine: Engine, maxDownloads: Int, caller: Caller = .server) {
        self.engine = engine
        self.maxDownloads = maxDownloads
        self.caller = caller
    }

    /// The same operations done for `caller`.
    public func acting(as caller: Caller) -> Operations {
        Operations(engine: engine, maxDownloads: maxDownloads, caller: caller)
    }

    // MARK: adding

    /// Adds one download (`created` false: the unfinished one with the same URL and destination). With
    /// `idempotency`, a repeated request gets the first one's answer.
    public func add(
        _ request: NewDownload, idempotency: Idempotency? = nil
    )
        throws(EngineError) -> (snapshot: DownloadSnapshot, created: Bool)
    {
        guard engine.count < maxDownloads else { throw .tooMany }
        var request = request
        request.owner = caller.token
        if let idempotency {
            // A repeated key answers the first request as it was answered: nothing of it is applied again.
            return try add(request, once: Idempotency(key: key(idempotency), requestHash: idempotency.requestHash))
        }
        let added = try engine.add(request)
        return added.created ? added : (try reconcile(request, with: added.snapshot), false)
    }

    /// Adds a batch with one commit, each answered in order; past `maxDownloads` the rest are refused `tooMany`.
    public func add(batch requests: [NewDownload], atomic: Bool) throws(EngineError) -> [Engine.AddOutcome] {
        let owned = requests.map { request in
            var request = request
            request.owner = caller.token
            return request
        }
        let outcomes = try engine.add(batch: owned, atomic: atomic, capacity: max(0, maxDownloads - engine.count))
        return zip(owned, outcomes).map { request, outcome in
            guard case .existing(let existing) = outcome else { return outcome }
            do throws(EngineError) {
                return .existing(try reconcile(request, with: existing))
            } catch {
                return .refused(error)
            }
        }
    }

    /// An Idempotency-Key is the caller's own: another token's same key neither answers nor conflicts with it.
    func key(_ idempotency: Idempotency) -> String {
        caller.token.map { "\($0.id):\(idempotency.key)" } ?? idempotency.key
    }

    // MARK: reading

    public func get(_ id: String) throws(EngineError) -> DownloadSnapshot {
        guard let snapshot = engine.snapshot(id), caller.sees(snapshot.download) else { throw .notFound(id) }
        return snapshot
    }

    /// Status answers of downloads at rest, for the API's own loop (`StatusBoard`).
    public var statusBoard: StatusBoard { engine.statusBoard }

    /// Puts up `response`, the status answer to the server's own token just worked out for `id` in this turn, for
    /// the API's own loop to answer the next reads with while the download rests; another caller's is never put up.
    public func publishStatus(_ response: HTTPResponse, for id: String) {
        guard caller.token == nil, caller.scope == .admin else { return }
        engine.publishStatus(response, for: id)
    }

    /// Puts up `value`, another front's answer to the server's own token about `id` (aria2's `tellStatus`), under
    /// `key`, for the API's own loop to answer the next such calls with while the download rests.
    public func publishFront(_ value: any Sendable, key: String, for id: String) {
        guard caller.token == nil, caller.scope == .admin else { return }
        engine.publishFront(value, key: key, for: id)
    }

    /// Puts up `response`, the page of the list the server's own token asked by `target` (path and query), just
    /// worked out in this turn and showing `ids`, while every download in it rests (and no other change comes).
    public func publishPage(_ response: HTTPResponse, for target: String, showing ids: [String]) {
        guard caller.token == nil, caller.scope == .admin else { return }
        engine.publishPage(response, for: target, showing: ids)
    }

    /// The filter as the caller may apply it: a confined caller's matches its own downloads only.
    private func confined(_ filter: DownloadFilter) -> DownloadFilter {
        guard let owner = caller.confinedTo else { return filter }
        var filter = filter
        filter.owner = owner
        // Its own downloads are indexed: a page visits those, not every download.
        let own = engine.tenancy.ids(ownedBy: owner)
        filter.ids = filter.ids.map { $0.intersection(own) } ?? own
        return filter
    }

    /// A page of the downloads the query's filter matches, in its order. Creation order pages by sequence number;
    /// another order by position (a sequence cursor is then read as a position).
    public func page(_ query: DownloadQuery) -> DownloadPage {
        let filter = confined(query.filter)
        let byPosition = query.order != .created || query.descending
        var position: Int?
        switch query.cursor {
        case .position(let offset): position = offset
        case .sequence(let number): if byPosition { position = Int(clamping: number) }
        case nil: if byPosition { position = 0 }
        }
        if let position {
            let (items, more) = engine.snapshots(
                engine.registry.page(
                    by: query.order, descending: query.descending,
                    offset: position, limit: query.limit,
                    where: filter))
            return DownloadPage(downloads: items, next: more ? .position(position + items.count) : nil)
        }
        var after: Int64 = 0
        if case .sequence(let number) = query.cursor { after = number }
        let result: (items: [DownloadSnapshot], more: Bool)
        if let ids = filter.ids ?? filter.idPrefix.flatMap(engine.registry.ids(prefixed:)) {
            // Only the changed ones, or those of an id prefix: found by id, not by walking every download.
            var rest = filter
            rest.ids = nil
            result = engine.snapshots(
                engine.registry.page(
                    of: ids, after: after, limit: query.limit,
                    where: rest))
        } else {
            result = engine.snapshots(engine.registry.page(after: after, limit: query.limit, where: filter))
        }
        let next = result.more ? result.items.last.map { DownloadQuery.Cursor.sequence($0.download.sequence) } : nil
        return DownloadPage(downloads: result.items, next: next)
    }

    /// The ids of the downloads `filter` matches, in creation order.
    public func ids(matching filter: DownloadFilter) -> [String] {
        engine.registry.ids(where: confined(filter))
    }

    /// The totals of what the caller sees.
    public func totals() -> EngineTotals {
        caller.confinedTo.map { engine.tenancy.totals(ownedBy: $0) } ?? engine.totals()
    }

    /// The finished file of `id`, opened: only the file recorded at completion (device, inode, size), else `gone`.
    public func file(_ id: String) throws(EngineError) -> (file: OpenFile, download: Download) {
        _ = try get(id)
        return try engine.finishedFile(id)
    }

    // MARK: changing

    /// Refuses a change of `id` the caller may not make: one it cannot see is not found, another token's (that it
    /// sees) is not its own.
    public func mayChange(_ id: String) throws(EngineError) {
        guard let token = caller.token else { return }
        // The download as the machine holds it: a bulk action asks this of every id, no snapshot needed.
        guard let download = engine.download(id), caller.sees(download) else { throw .notFound(id) }
        guard caller.mayChange(download) else {
            throw .notOwner(
                "the download \(id) was not added by the token '\(token.name)', whose \(caller.scope.name) "
                    + "scope changes only its own")
        }
    }

    public func change(_ id: String, _ changes: DownloadChanges) throws(EngineError) -> DownloadSnapshot {
        try mayChange(id)
        return try engine.update(id, changes)
    }

    public func remove(_ id: String, deleteFile: Bool) throws(EngineError) {
        try mayChange(id)
        try engine.remove(id, deleteFile: deleteFile)
    }

    /// Moves a waiting download in the queue; its position afterwards, 0 first (aria2's `changePosition` too).
    public func move(_ id: String, _ move: QueueMove) throws(EngineError) -> Int {
        try mayChange(id)
        return try engine.move([id], move)[0].result.get()
    }

    /// Does `action` to each of `ids` (a slice of a bulk action: callers cut long lists so the loop answers others
    /// between slices), each answered on its own. A store that fails refuses every one of the slice.
    public func act(_ action: BulkAction, on named: ArraySlice<String>) -> [BulkResult] {
        var refused: [String: EngineError] = [:]
        for id in named {
            do throws(EngineError) {
                try mayChange(id)
            } catch {
                refused[id] = error
            }
        }
        guard !refused.isEmpty else { return perform(action, on: named) }
        let done = perform(action, on: ArraySlice(named.filter { refused[$0] == nil }))
        var results = Dictionary(done.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        for (id, error) in refused { results[id] = BulkResult(id: id, outcome: .refused(error)) }
        return named.compactMap { results[$0] }
    }

    private func perform(_ action: BulkAction, on ids: ArraySlice<String>) -> [BulkResult] {
        switch action {
        case .remove(let deleteFile):
            do throws(EngineError) {
                let removed = Set(try engine.remove(batch: Array(ids), deleteFile: deleteFile))
                return ids.map { id in
                    BulkResult(id: id, outcome: removed.contains(id) ? .removed : .refused(.notFound(id)))
                }
            } catch {
                return ids.map { BulkResult(id: $0, outcome: .refused(error)) }
            }
        case .move(let move):
            return engine.move(Array(ids), move).map { id, result in
                switch result {
                case .success(let position):
                    guard let snapshot = engine.snapshot(id) else {
                        return BulkResult(id: id, outcome: .refused(.notFound(id)))
                    }
                    return BulkResult(id: id, outcome: .moved(snapshot, position: position))
                case .failure(let error): return BulkResult(id: id, outcome: .refused(error))
                }
            }
        case .pause, .resume:
            let changes = DownloadChanges(state: action == .pause ? .paused : .queued)
            return engine.update(batch: Array(ids), changes).map { id, result in
                switch result {
                case .success(let snapshot): BulkResult(id: id, outcome: .changed(snapshot))
                case .failure(let error): BulkResult(id: id, outcome: .refused(error))
                }
            }
        }
    }

    /// Removes those of `ids` still here (another node or request may have removed some meanwhile), returning the
    /// ones removed; a store that fails throws.
    public func remove(batch ids: ArraySlice<String>, deleteFile: Bool) throws(EngineError) -> [String] {
        let allowed = ids.filter { (try? mayChange($0)) != nil }
        return try engine.remove(batch: Array(allowed), deleteFile: deleteFile)
    }
}
