import FoundationEssentials
import HaulCore
import HaulLoop

/// One download read, changed, acted on in bulk, or removed.
extension API {
    func getDownload(_ c: RequestContext) throws(Problem) -> HTTPResponse {
        let snapshot = try attempt(c.operations.get(c.parameters["id"]!))
        let response = API.tagged(API.json(200, bytes: DownloadResource.bytes(snapshot, owner: c.caller.seesOwners)))
        // While it rests, the API's own loop answers the next reads with it (`readsBeside`).
        c.operations.publishStatus(response, for: snapshot.download.id)
        return API.conditional(c.request, tagged: response)
    }

    /// What PATCH /downloads/{id} may change: the state, the options the table lets it, and its place in the queue.
    static let patchMembers: Set<String> = DownloadOptions.patchable.union(["state", "queue_position"])

    func patchDownload(_ c: RequestContext) throws(Problem) -> HTTPResponse {
        let id = c.parameters["id"]!
        _ = try attempt(c.operations.get(id))
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
        if body.has("tags") {
            // A string of comma-separated tags replaces them; "" or null clears them.
            if body.isNull("tags") {
                changes.tags = .some(nil)
            } else if let text = body.string("tags") {
                if let tags = DownloadTags.parse(text) {
                    changes.tags = .some(DownloadTags.joined(tags))
                } else {
                    body.reject("tags", DownloadTags.problem)
                }
            }
        }
        let position = body.integer("queue_position", in: 0...Int64(Int32.max)).map { Int($0) }
        try body.finish()
        var snapshot = try attempt(c.operations.change(id, changes))
        // After the priority: a place is among the downloads of the priority it has then.
        if let position {
            _ = try attempt(c.operations.move(id, .position(position)))
            snapshot = try attempt(c.operations.get(id))
        }
        return API.json(200, bytes: DownloadResource.bytes(snapshot, owner: c.caller.seesOwners))
    }

    /// The most downloads one action names.
    static let maxActionIDs = 10_000

    /// Where `move` sends downloads.
    static let moves: [String: QueueMove] = ["top": .top, "up": .up, "down": .down, "bottom": .bottom]

    /// `POST /downloads/actions`: pause, resume, remove or move in the queue the downloads named by `ids` or the
    /// ones in `state` (of `category`, if given: `{"action": "remove", "state": ["completed"]}` clears the finished
    /// ones); each answered on its own.
    func act(_ c: RequestContext) throws(Problem) -> APIResult {
        var body = try RequestBody(c.request)
        body.rejectUnknown(except: ["action", "ids", "state", "category", "delete_file", "to"])
        let action = body.string("action", required: true)
        if let action, !["pause", "resume", "remove", "move"].contains(action) {
            body.reject("action", "must be pause, resume, remove or move")
        }
        let deleteFile = body.bool("delete_file") ?? false
        if deleteFile, action != "remove" { body.reject("delete_file", "goes with remove only") }
        var move: QueueMove?
        if let to = body.string("to", required: action == "move") {
            move = API.moves[to]
            if action != "move" {
                body.reject("to", "goes with move only")
            } else if move == nil {
                body.reject("to", "must be top, up, down or bottom")
            }
        }
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
        let category = body.string("category")
        if let category, let problem = Validate.categoryName(category) { body.reject("category", problem) }
        if body.has("ids") == body.has("state") { body.reject("ids", "give ids or state, one of them") }
        if body.has("ids"), category != nil { body.reject("category", "goes with state, not with ids") }
        try body.finish()
        if let states { ids = c.operations.ids(matching: DownloadFilter(states: states, category: category)) }
        let bulk: BulkAction =
            switch action {
            case "pause": .pause
            case "resume": .resume
            case "move": .move(move!)
            default: .remove(deleteFile: deleteFile)
            }
        // Each result's bytes, its download written straight (no tree per resource).
        let results = Box<[[UInt8]]>([])
        let failed = Box(0)
        let total = ids.count
        let operations = c.operations
        return inSlices(
            ids,
            { slice throws(Problem) in
                for result in operations.act(bulk, on: slice) {
                    var w = JSONWriter(capacity: 2048)
                    w.object { w in
                        w.member("id", result.id)
                        switch result.outcome {
                        case .changed(let snapshot):
                            w.member("status", 200)
                            w.key("download")
                            DownloadResource.write(snapshot, owner: c.caller.seesOwners, into: &w)
                        case .moved(let snapshot, let position):
                            w.member("status", 200)
                            w.member("queue_position", position)
                            w.key("download")
                            DownloadResource.write(snapshot, owner: c.caller.seesOwners, into: &w)
                        case .removed:
                            w.member("status", 204)
                        case .refused(let error):
                            failed.value += 1
                            let problem = Problem(error)
                            w.member("status", problem.status)
                            w.key("problem")
                            w.value(problem.json(instance: "/downloads/" + result.id))
                        }
                    }
                    results.value.append(w.bytes)
                }
            },
            finish: {
                var w = JSONWriter(capacity: results.value.reduce(64) { $0 + $1.count + 1 })
                w.object { w in
                    w.key("results")
                    w.array { w in
                        for result in results.value { w.raw(result) }
                    }
                    w.member("succeeded", total - failed.value)
                    w.member("failed", failed.value)
                }
                return API.json(200, bytes: w.bytes)
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
        try attempt(c.operations.remove(id, deleteFile: deleteFile))
        return HTTPResponse(status: 204)
    }
}
