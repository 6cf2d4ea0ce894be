import FoundationEssentials
import HaulCore
import HaulLoop

/// One download read, changed, acted on in bulk, or removed.
extension API {
    func getDownload(_ c: RequestContext) throws(Problem) -> HTTPResponse {
        let id = c.parameters["id"]!
        guard let snapshot = engine.snapshot(id) else { throw Problem(EngineError.notFound(id)) }
        return try conditional(c.request, API.json(200, DownloadResource.json(snapshot)))
    }

    /// What PATCH /downloads/{id} may change: the state, and the options the table lets it.
    static let patchMembers: Set<String> = DownloadOptions.patchable.union(["state"])

    func patchDownload(_ c: RequestContext) throws(Problem) -> HTTPResponse {
        let id = c.parameters["id"]!
        guard engine.snapshot(id) != nil else { throw Problem(EngineError.notFound(id)) }
        var body = try RequestBody(c.request)
        body.rejectUnknown(except: API.patchMembers)
        var changes = DownloadChanges()
        if let state = body.string("state") {
            if state == DownloadState.paused.rawValue || state == DownloadState.queued.rawValue {
                changes.state = DownloadState(rawValue: state)
            } else {
                body.reject("state", "must be 'paused' or 'queued'")
            }
        }
        changes.priority = body.integer("priority", in: DownloadOptions.range("priority")).map(Int.init)
        changes.connections = body.integer("connections", in: DownloadOptions.range("connections")).map(Int.init)
        if let speed = body.nullableInteger("max_speed", in: DownloadOptions.range("max_speed")) {
            changes.maxSpeed = .some(speed.flatMap { $0 == 0 ? nil : $0 })
        }
        try body.finish()
        return API.json(200, DownloadResource.json(try attempt(engine.update(id, changes))))
    }

    /// The most downloads one action names.
    static let maxActionIDs = 10_000

    /// `POST /downloads/actions`: pause, resume or remove the downloads named by `ids` or the ones in `state`
    /// (`{"action": "remove", "state": ["completed"]}` clears the finished ones); each answered on its own.
    func act(_ c: RequestContext) throws(Problem) -> APIResult {
        var body = try RequestBody(c.request)
        body.rejectUnknown(except: ["action", "ids", "state", "delete_file"])
        let action = body.string("action", required: true)
        if let action, !["pause", "resume", "remove"].contains(action) {
            body.reject("action", "must be pause, resume or remove")
        }
        let deleteFile = body.bool("delete_file") ?? false
        if deleteFile, action != "remove" { body.reject("delete_file", "goes with remove only") }
        var ids: [String] = []
        if let list = body.array("ids", count: 1...API.maxActionIDs) {
            ids = list.compactMap(\.stringValue)
            if ids.count != list.count { body.reject("ids", "must be download ids (strings)") }
        }
        var states: Set<DownloadState>?
        if let list = body.array("state", count: 1...DownloadState.allCases.count) {
            let parsed = list.compactMap { $0.stringValue.flatMap(DownloadState.init(rawValue:)) }
            if parsed.count == list.count { states = Set(parsed) } else { body.reject("state", "must be states") }
        }
        if body.has("ids") == body.has("state") { body.reject("ids", "give ids or state, one of them") }
        try body.finish()
        if let states {
            ids = engine.ids { states.contains($0.state) }
        }
        let results = Box<[JSONValue]>([])
        let failed = Box(0)
        func failure(_ id: String, _ error: EngineError) -> JSONValue {
            failed.value += 1
            let problem = Problem(error)
            return .object([("id", .string(id)), ("status", JSONValue(problem.status)),
                            ("problem", problem.json(instance: "/downloads/" + id))])
        }
        let total = ids.count
        return inSlices(ids, { [engine] slice throws(Problem) in
            switch action {
            case "remove":
                do throws(EngineError) {
                    let removed = Set(try engine.remove(batch: Array(slice), deleteFile: deleteFile))
                    for id in slice {
                        results.value.append(removed.contains(id)
                            ? .object([("id", .string(id)), ("status", JSONValue(204))])
                            : failure(id, .notFound(id)))
                    }
                } catch {
                    for id in slice { results.value.append(failure(id, error)) }
                }
            default:
                let target: DownloadState = action == "pause" ? .paused : .queued
                for (id, result) in engine.update(batch: Array(slice), DownloadChanges(state: target)) {
                    switch result {
                    case .success(let snapshot):
                        results.value.append(.object([("id", .string(id)), ("status", JSONValue(200)),
                                                      ("download", DownloadResource.json(snapshot))]))
                    case .failure(let error):
                        results.value.append(failure(id, error))
                    }
                }
            }
        }, finish: {
            API.json(200, .object([("results", .array(results.value)), ("succeeded", JSONValue(total - failed.value)),
                                   ("failed", JSONValue(failed.value))]))
        })
    }

    func deleteDownload(_ c: RequestContext) throws(Problem) -> HTTPResponse {
        let id = c.parameters["id"]!
        var deleteFile = false
        if let flag = c.query["delete_file"] {
            guard flag == "true" || flag == "false" else {
                throw Problem.invalid([("delete_file", "must be true or false")])
            }
            deleteFile = flag == "true"
        }
        try attempt(engine.remove(id, deleteFile: deleteFile))
        return HTTPResponse(status: 204)
    }
}
