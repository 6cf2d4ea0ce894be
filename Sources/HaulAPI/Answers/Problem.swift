import HaulCore
import HaulLoop

/// An RFC 9457 problem: every error the API answers has this shape.
struct Problem: Error {
    var status: Int
    /// Stable slug, published as `urn:haul:problem:<slug>`.
    var slug: String
    var title: String
    var detail: String
    /// For 422: the offending fields.
    var fieldErrors: [(field: String, message: String)] = []
    var headers: [(name: String, value: String)] = []
    /// Members beyond RFC 9457's (a refused batch's `results`).
    var extra: [(String, JSONValue)] = []

    static func badRequest(_ detail: String) -> Problem {
        Problem(status: 400, slug: "malformed-request", title: "Malformed request", detail: detail)
    }

    static func notFound(_ detail: String) -> Problem {
        Problem(status: 404, slug: "not-found", title: "Not found", detail: detail)
    }

    static func methodNotAllowed(_ method: String, allowed: [String]) -> Problem {
        Problem(
            status: 405, slug: "method-not-allowed", title: "Method not allowed",
            detail: "\(method) is not allowed here; use \(allowed.joined(separator: ", "))",
            headers: [("Allow", allowed.joined(separator: ", "))])
    }

    static func conflict(_ detail: String) -> Problem {
        Problem(status: 409, slug: "invalid-transition", title: "Conflict with the download's state", detail: detail)
    }

    static func tooLarge(limit: Int) -> Problem {
        Problem(
            status: 413, slug: "body-too-large", title: "Request body too large",
            detail: "the body must be at most \(limit) bytes")
    }

    static func unsupportedMediaType(_ type: String) -> Problem {
        Problem(
            status: 415, slug: "unsupported-media-type", title: "Unsupported media type",
            detail: "send application/json, not \(type.utf8.count <= 100 ? type : String(type.prefix(100)) + "...")")
    }

    static func invalid(_ errors: [(field: String, message: String)]) -> Problem {
        Problem(
            status: 422, slug: "validation", title: "Invalid fields",
            detail: errors.map { "\($0.field): \($0.message)" }.joined(separator: "; "), fieldErrors: errors)
    }

    /// The store cannot be reached (PostgreSQL down, a full disk under SQLite): nothing was changed, and the same
    /// request may succeed in a moment.
    static func storeUnavailable(_ message: String) -> Problem {
        Problem(
            status: 503, slug: "store-unavailable", title: "Store unavailable",
            detail: "the store cannot be written now, so nothing was changed; try again shortly (\(message))",
            headers: [("Retry-After", "5")])
    }

    static func internalError(_ detail: String) -> Problem {
        Problem(status: 500, slug: "internal", title: "Internal server error", detail: detail)
    }

    func response(instance: String) -> HTTPResponse {
        HTTPResponse(
            status: status, headers: [("Content-Type", "application/problem+json")] + headers,
            body: json(instance: instance).serializedBytes())
    }

    /// The problem document: the body of its response, or one result of a batch.
    func json(instance: String) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("type", .string("urn:haul:problem:\(slug)")),
            ("title", .string(title)),
            ("status", JSONValue(status)),
            ("detail", .string(detail)),
            ("instance", .string(instance)),
        ]
        if !fieldErrors.isEmpty {
            members.append(
                (
                    "errors",
                    .array(
                        fieldErrors.map {
                            .object([("field", .string($0.field)), ("message", .string($0.message))])
                        })
                ))
        }
        return .object(members + extra)
    }
}

extension Problem {
    /// The one place engine errors become HTTP statuses.
    init(_ error: EngineError) {
        switch error {
        case .notFound(let id): self = .notFound("no download with id '\(id)'")
        case .conflict(let message): self = .conflict(message)
        case .storage(let message): self = .storeUnavailable(message)
        case .insufficientStorage(let refusal):
            self = Problem(
                status: 507, slug: refusal.code.rawValue.replacing("_", with: "-"),
                title: refusal.code == .fileTooLarge ? "File too large" : "Insufficient storage",
                detail: refusal.message)
        case .tooMany:
            self = Problem(
                status: 507, slug: "too-many-downloads", title: "Too many downloads",
                detail: "this server holds as many downloads as it may; remove finished ones")
        case .gone(let message):
            self = Problem(status: 410, slug: "gone", title: "Gone", detail: message)
        case .invalid(let field, let message):
            self = .invalid([(field, message)])
        case .missing(let message): self = .notFound(message)
        case .full(let kind, let limit):
            self = Problem(
                status: 409, slug: "too-many-\(kind)", title: "Too many \(kind)",
                detail: "this server keeps at most \(limit) \(kind); remove one first")
        case .notOwner(let message):
            self = Problem(status: 403, slug: "not-owner", title: "Not this token's download", detail: message)
        case .notAdded:
            self = Problem(
                status: 424, slug: "batch-refused", title: "Not added",
                detail: "this download was valid, but the batch is all-or-nothing and another was refused")
        }
    }
}
