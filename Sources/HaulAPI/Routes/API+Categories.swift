import FoundationEssentials
import HaulCore
import HaulLoop

/// `/categories`: namespaces of downloads with a folder, defaults and a speed limit of their own; and the clean-up
/// of a category (or a state) in one call, `DELETE /downloads?category=X&state=completed`.
extension API {
    var categoryRoutes: [Route] {
        [
            Route(
                pattern: "/categories",
                handlers: [
                    "GET": .read(.listCategories) { c in
                        .response(
                            API.json(
                                200, .object([("categories", .array(c.operations.categories.map(API.categoryJSON)))])))
                    }
                ]),
            Route(
                pattern: "/categories/{name}",
                handlers: [
                    "GET": .read(.getCategory) { [unowned self] c throws(Problem) in
                        .response(API.json(200, API.categoryJSON(try self.category(c))))
                    },
                    "PUT": .write(.putCategory) { [unowned self] c throws(Problem) in .response(try self.putCategory(c))
                    },
                    "DELETE": .write(.removeCategory) { [unowned self] c throws(Problem) in
                        try self.attempt(c.operations.removeCategory(c.parameters["name"]!))
                        return .response(HTTPResponse(status: 204))
                    },
                ]),
        ]
    }

    private func category(_ c: RequestContext) throws(Problem) -> HaulCore.Category {
        try attempt(c.operations.category(c.parameters["name"]!))
    }

    private func putCategory(_ c: RequestContext) throws(Problem) -> HTTPResponse {
        let name = c.parameters["name"]!
        if let problem = Validate.categoryName(name) { throw Problem.invalid([("name", problem)]) }
        var body = try RequestBody(c.request)
        body.rejectUnknown(except: [
            "directory", "connections", "max_speed", "priority", "proxy", "completed_directory", "seed_ratio",
            "seed_time",
        ])
        var category = HaulCore.Category(name: name, directory: name)
        if let directory = body.string("directory") {
            if let problem = Validate.directory(directory) {
                body.reject("directory", problem)
            } else {
                category.directory = Validate.sanitizedDirectory(directory)
            }
        }
        category.completedDirectory = body.folder(
            "completed_directory",
            emptyMeans: "must name a folder (leave it out to keep files where they are)")
        category.connections = body.nullableInteger("connections", in: 1...32).flatMap { $0 }.map(Int.init)
        category.maxSpeed = body.nullableInteger("max_speed", in: 0...Int64(1) << 50).flatMap { $0 }
            .flatMap { $0 == 0 ? nil : $0 }
        category.priority = body.nullableInteger("priority", in: -1000...1000).flatMap { $0 }.map(Int.init)
        category.proxy = body.nullableProxy("proxy") ?? nil
        category.seedRatio = body.nullableNumber("seed_ratio", in: 0...10_000)
        category.seedTime = body.nullableInteger("seed_time", in: 0...315_360_000).flatMap { $0 }
        try body.finish()
        let created = try attempt(c.operations.putCategory(category))
        return API.json(
            created ? 201 : 200, API.categoryJSON(category),
            headers: created ? [("Location", "/categories/\(name)")] : [])
    }

    static func categoryJSON(_ c: HaulCore.Category) -> JSONValue {
        .object([
            ("name", .string(c.name)),
            ("directory", .string(c.directory)),
            ("connections", JSONValue(c.connections.map(Int64.init))),
            ("max_speed", JSONValue(c.maxSpeed)),
            ("priority", JSONValue(c.priority.map(Int64.init))),
            ("proxy", JSONValue(c.proxy?.shown)),
            ("completed_directory", JSONValue(c.completedDirectory)),
            ("seed_ratio", c.seedRatio.map { .number($0) } ?? .null),
            ("seed_time", JSONValue(c.seedTime)),
        ])
    }

    /// Removes every download in the given states (required: never "everything" by accident), of one category or
    /// of all, as DELETE /downloads/{id} would each; answers the ids removed.
    func deleteDownloads(_ c: RequestContext) throws(Problem) -> APIResult {
        var errors: [(field: String, message: String)] = []
        let category = c.query["category"]
        if let category, let problem = Validate.categoryName(category) { errors.append(("category", problem)) }
        let states = API.states(c.query["state"], &errors)
        var deleteFile = false
        if let flag = c.query["delete_file"] {
            if flag == "true" || flag == "false" {
                deleteFile = flag == "true"
            } else {
                errors.append(("delete_file", "must be true or false"))
            }
        }
        if states == nil {
            errors.append(("state", "is required: the states of the downloads to remove (e.g. completed,failed)"))
        }
        if !errors.isEmpty { throw Problem.invalid(errors) }
        let doomed = c.operations.ids(matching: DownloadFilter(states: states, category: category))
        let removed = Box<[String]>([])
        // Those removed meanwhile (through another node, or by another request between two slices) are passed over.
        let operations = c.operations
        return inSlices(
            doomed,
            { ids throws(Problem) in
                removed.value += try self.attempt(operations.remove(batch: ids, deleteFile: deleteFile))
            }, finish: { API.json(200, .object([("removed", .array(removed.value.map { .string($0) }))])) })
    }
}
