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
            created ? 201 : 200, bytes: DownloadResource.bytes(snapshot, owner: c.caller.seesOwners),
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
        // Each result's body as bytes: a resource is written straight, not built as a tree first.
        var results: [BatchResult] = []
        results.reserveCapacity(items.count)
        var next = outcomes.makeIterator()
        for item in items {
            switch item {
            case .failure(let problem):
                results.append(BatchResult(problem))
            case .success:
                switch next.next()! {
                case .added(let snapshot):
                    results.append(
                        BatchResult(
                            status: 201, body: DownloadResource.bytes(snapshot, owner: c.caller.seesOwners),
                            id: snapshot.download.id))
                case .existing(let snapshot):
                    results.append(
                        BatchResult(
                            status: 200, body: DownloadResource.bytes(snapshot, owner: c.caller.seesOwners),
                            id: snapshot.download.id))
                case .refused(let error):
                    results.append(BatchResult(error == .tooMany ? tooManyDownloads : Problem(error)))
                }
            }
        }
        if atomic, let refusal = results.first(where: { $0.status >= 400 && $0.status != 424 }) {
            // Nothing was added: the answer is the refusal itself, with the others' fate in `results`.
            var problem = Problem(
                status: refusal.status, slug: "batch-refused", title: "Batch refused",
                detail: "one download of the batch was refused, so none was added: " + (refusal.detail ?? ""))
            problem.extra = [("results", (try? JSONValue.parse(API.batchResults(results))) ?? .array([]))]
            throw problem
        }
        if let idempotency {
            var answer = JSONWriter()
            answer.array { w in
                for result in results {
                    w.object { w in
                        w.member("status", result.status)
                        if let id = result.id {
                            w.member("id", id)
                        } else {
                            w.key("problem")
                            w.raw(result.body)
                        }
                    }
                }
            }
            try attempt(
                c.operations.rememberBatchAnswer(idempotency, answer: String(decoding: answer.bytes, as: UTF8.self)))
        }
        return API.batchResponse(results, atomic: atomic)
    }

    /// One download's result in a batch's answer: its status and its resource's bytes, or a problem's.
    struct BatchResult {
        var status: Int
        var body: [UInt8]
        var id: String? = nil
        /// A problem's detail (what an atomic batch's refusal quotes).
        var detail: String? = nil

        init(status: Int, body: [UInt8], id: String? = nil) {
            self.status = status
            self.body = body
            self.id = id
        }

        init(_ problem: Problem, instance: String = "/downloads") {
            status = problem.status
            body = problem.json(instance: instance).serializedBytes()
            detail = problem.detail
        }
    }

    /// The answer of the first request with this Idempotency-Key, each download as it is now.
    private func replay(_ stored: String, atomic: Bool, for c: RequestContext) throws(Problem) -> HTTPResponse {
        guard case .array(let entries)? = try? JSONValue.parse(Array(stored.utf8)) else {
            throw Problem.internalError("the stored answer of this Idempotency-Key cannot be read")
        }
        let results: [BatchResult] = entries.map { entry in
            let status = Int(entry["status"]?.integerValue ?? 500)
            if let id = entry["id"]?.stringValue {
                guard let snapshot = try? c.operations.get(id) else {
                    return BatchResult(
                        Problem.notFound("the download created for this batch, '\(id)', has been removed"))
                }
                return BatchResult(
                    status: status, body: DownloadResource.bytes(snapshot, owner: c.caller.seesOwners), id: id)
            }
            return BatchResult(status: status, body: (entry["problem"] ?? .null).serializedBytes())
        }
        return API.batchResponse(results, atomic: atomic)
    }

    /// The `results` array of a batch's answer: each result's status with its download or its problem.
    private static func batchResults(_ results: [BatchResult]) -> [UInt8] {
        var w = JSONWriter(capacity: results.reduce(64) { $0 + $1.body.count + 32 })
        writeBatchResults(results, into: &w)
        return w.bytes
    }

    private static func writeBatchResults(_ results: [BatchResult], into w: inout JSONWriter) {
        w.array { w in
            for result in results {
                w.object { w in
                    w.member("status", result.status)
                    if result.status < 300 { w.key("download") } else { w.key("problem") }
                    w.raw(result.body)
                }
            }
        }
    }

    private static func batchResponse(_ results: [BatchResult], atomic: Bool) -> HTTPResponse {
        let created = results.filter { $0.status == 201 }.count
        let existing = results.filter { $0.status == 200 }.count
        var w = JSONWriter(capacity: results.reduce(128) { $0 + $1.body.count + 32 })
        w.object { w in
            w.key("results")
            writeBatchResults(results, into: &w)
            w.member("created", created)
            w.member("existing", existing)
            w.member("failed", results.count - created - existing)
        }
        return API.json(atomic && created > 0 ? 201 : 200, bytes: w.bytes)
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
