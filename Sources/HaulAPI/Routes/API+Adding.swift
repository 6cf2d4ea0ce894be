import FoundationEssentials
import HaulCore
import HaulLoop

/// POST /downloads: one download or a batch, idempotent with a key.
extension API {
    func addDownload(_ c: RequestContext) throws(Problem) -> HTTPResponse {
        var body = try RequestBody(c.request)
        if body.has("downloads") { return try addDownloads(c, &body) }
        let request = API.newDownload(&body)
        API.checkIdempotencyKey(c.request, &body)
        try body.finish()
        let idempotency = c.request.header("Idempotency-Key").map {
            Idempotency(key: $0, requestHash: API.requestHash(c.request.body))
        }
        let (snapshot, created): (DownloadSnapshot, Bool)
        do throws(EngineError) {
            (snapshot, created) = try c.operations.add(request, idempotency: idempotency)
        } catch {
            throw error == .tooMany ? tooManyDownloads : Problem(error)
        }
        let location = "/downloads/\(snapshot.download.id)"
        return API.json(
            created ? 201 : 200, DownloadResource.json(snapshot, owner: c.caller.seesOwners),
            headers: [("Location", location)])
    }

    private var tooManyDownloads: Problem {
        Problem(
            status: 507, slug: "too-many-downloads", title: "Too many downloads",
            detail: "this server holds at most \(limits.maxDownloads) downloads; remove finished ones")
    }

    /// A batch: one answer listing each download's result (`status` 201, 200 for an existing one, or a problem's),
    /// with one commit for all. Per-item (the default) answers 200; `atomic` adds all (201) or none (the problem).
    /// A repeated Idempotency-Key answers what the first request did, each download as it is now.
    private func addDownloads(_ c: RequestContext, _ body: inout RequestBody) throws(Problem) -> HTTPResponse {
        let (items, atomic) = try API.newDownloads(from: c.request, &body)
        let idempotency = c.request.header("Idempotency-Key").map {
            Idempotency(key: $0, requestHash: API.requestHash(c.request.body))
        }
        if let idempotency, let first = try attempt(c.operations.batchAnswer(idempotency)) {
            return try replay(first, atomic: atomic, for: c)
        }
        let requests = items.compactMap { try? $0.get() }
        let outcomes = try attempt(c.operations.add(batch: requests, atomic: atomic))
        var results: [(status: Int, json: JSONValue, id: String?)] = []
        var next = outcomes.makeIterator()
        for item in items {
            switch item {
            case .failure(let problem):
                results.append((problem.status, problem.json(instance: "/downloads"), nil))
            case .success:
                switch next.next()! {
                case .added(let snapshot):
                    results.append(
                        (201, DownloadResource.json(snapshot, owner: c.caller.seesOwners), snapshot.download.id))
                case .existing(let snapshot):
                    results.append(
                        (200, DownloadResource.json(snapshot, owner: c.caller.seesOwners), snapshot.download.id))
                case .refused(let error):
                    let problem = error == .tooMany ? tooManyDownloads : Problem(error)
                    results.append((problem.status, problem.json(instance: "/downloads"), nil))
                }
            }
        }
        if atomic, let refusal = results.first(where: { $0.status >= 400 && $0.status != 424 }) {
            // Nothing was added: the answer is the refusal itself, with the others' fate in `results`.
            var problem = Problem(
                status: refusal.status, slug: "batch-refused", title: "Batch refused",
                detail: "one download of the batch was refused, so none was added: "
                    + (refusal.json["detail"]?.stringValue ?? ""))
            problem.extra = [("results", .array(results.map { API.batchResult($0.status, $0.json) }))]
            throw problem
        }
        if let idempotency {
            let answer = JSONValue.array(
                results.map { result in
                    result.id.map { .object([("status", JSONValue(result.status)), ("id", .string($0))]) }
                        ?? .object([("status", JSONValue(result.status)), ("problem", result.json)])
                })
            try attempt(c.operations.rememberBatchAnswer(idempotency, answer: answer.serialized()))
        }
        return API.batchResponse(results.map { ($0.status, $0.json) }, atomic: atomic)
    }

    /// The answer of the first request with this Idempotency-Key, each download as it is now.
    private func replay(_ stored: String, atomic: Bool, for c: RequestContext) throws(Problem) -> HTTPResponse {
        guard case .array(let entries)? = try? JSONValue.parse(Array(stored.utf8)) else {
            throw Problem.internalError("the stored answer of this Idempotency-Key cannot be read")
        }
        let results: [(Int, JSONValue)] = entries.map { entry in
            let status = Int(entry["status"]?.integerValue ?? 500)
            if let id = entry["id"]?.stringValue {
                guard let snapshot = try? c.operations.get(id) else {
                    return (
                        404,
                        Problem.notFound("the download created for this batch, '\(id)', has been removed")
                            .json(instance: "/downloads")
                    )
                }
                return (status, DownloadResource.json(snapshot, owner: c.caller.seesOwners))
            }
            return (status, entry["problem"] ?? .null)
        }
        return API.batchResponse(results, atomic: atomic)
    }

    static func batchResult(_ status: Int, _ json: JSONValue) -> JSONValue {
        .object([("status", JSONValue(status)), (status < 300 ? "download" : "problem", json)])
    }

    private static func batchResponse(_ results: [(status: Int, json: JSONValue)], atomic: Bool) -> HTTPResponse {
        let created = results.filter { $0.status == 201 }.count
        let existing = results.filter { $0.status == 200 }.count
        return API.json(
            atomic && created > 0 ? 201 : 200,
            .object([
                ("results", .array(results.map { batchResult($0.status, $0.json) })),
                ("created", JSONValue(created)),
                ("existing", JSONValue(existing)),
                ("failed", JSONValue(results.count - created - existing)),
            ]))
    }

    /// The states of a `?state=a,b` filter (nil without one), its unknown names added to `errors`.
    static func states(_ filter: String?, _ errors: inout [(field: String, message: String)]) -> Set<DownloadState>? {
        guard let filter else { return nil }
        var states: Set<DownloadState> = []
        for name in filter.split(separator: ",", omittingEmptySubsequences: false) {
            if let state = DownloadState(rawValue: String(name)) {
                states.insert(state)
            } else {
                errors.append(("state", "'\(name)' is not a state"))
            }
        }
        return states
    }
}
