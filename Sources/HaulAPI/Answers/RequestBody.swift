import FoundationEssentials
import HaulCore
import HaulLoop

/// Reading and validating JSON request bodies. Every field error is collected so one 422 lists them all.
struct RequestBody {
    static let maxBytes = 1 << 20

    private let members: [(String, JSONValue)]
    private(set) var errors: [(field: String, message: String)] = []

    /// Parses the body as a JSON object: 413 when too large, 415 for a non-JSON type, 400 when malformed.
    init(_ request: HTTPRequest) throws(Problem) {
        guard request.body.count <= RequestBody.maxBytes else { throw Problem.tooLarge(limit: RequestBody.maxBytes) }
        guard let type = request.header("Content-Type") else {
            throw Problem(
                status: 415, slug: "unsupported-media-type", title: "Unsupported media type",
                detail: "send the body with 'Content-Type: application/json'")
        }
        guard RequestBody.isJSON(type) else { throw Problem.unsupportedMediaType(type) }
        let value: JSONValue
        do {
            value = try JSONValue.parse(request.body)
        } catch {
            throw Problem.badRequest("the body is not valid JSON: \(error)")
        }
        guard case .object(let members) = value else {
            throw Problem.badRequest("the body must be a JSON object")
        }
        self.members = members
    }

    /// The members of an object inside a body (one download of a batch), checked the same way.
    init(members: [(String, JSONValue)]) {
        self.members = members
    }

    func has(_ field: String) -> Bool { value(field) != nil }

    /// Whether the field is given as `null`.
    func isNull(_ field: String) -> Bool {
        if case .null? = value(field) { return true }
        return false
    }

    /// Every member, for a body read by rules of its own (the settings').
    var allMembers: [(String, JSONValue)] { members }

    /// Whether a Content-Type names exactly `application/json`, in any case, with or without parameters
    /// (`; charset=utf-8`); `application/jsonx` or `text/plain` are not JSON.
    static func isJSON(_ contentType: String) -> Bool {
        let mediaType =
            contentType.utf8.split(
                separator: UInt8(ascii: ";"), maxSplits: 1,
                omittingEmptySubsequences: false
            ).first ?? []
        return ASCII.equalsIgnoringCase(
            HTTPField.trimmed(String(decoding: mediaType, as: UTF8.self)),
            "application/json")
    }

    private func value(_ field: String) -> JSONValue? { members.last(where: { $0.0 == field })?.1 }

    mutating func reject(_ field: String, _ message: String) { errors.append((field, message)) }

    /// Flags every member not in `known`: a misspelt option must not be silently ignored.
    mutating func rejectUnknown(except known: Set<String>) {
        for (name, _) in members where !known.contains(name) { reject(name, "unknown field") }
    }

    // A null where a value is expected is an error, not "absent": only fields documented as nullable take it.

    mutating func string(_ field: String, required: Bool = false) -> String? {
        guard let value = value(field) else {
            if required { reject(field, "is required") }
            return nil
        }
        guard let string = value.stringValue else {
            reject(field, "must be a string")
            return nil
        }
        return string
    }

    /// A folder under a root (relative, no `.` or `..`), sanitized as a download's `directory`; `emptyMeans` is
    /// the complaint when it is "" (a folder must be named).
    mutating func folder(_ field: String, emptyMeans: String) -> String? {
        guard let text = string(field) else { return nil }
        if text.isEmpty {
            reject(field, emptyMeans)
        } else if let problem = Validate.directory(text) {
            reject(field, problem)
        } else {
            return Validate.sanitizedDirectory(text)
        }
        return nil
    }

    /// An integer in `range`.
    mutating func integer(_ field: String, in range: ClosedRange<Int64>) -> Int64? {
        guard let value = value(field) else { return nil }
        guard let number = value.integerValue, range.contains(number) else {
            reject(field, "must be an integer from \(range.lowerBound) to \(range.upperBound)")
            return nil
        }
        return number
    }

    /// Distinguishes "absent" (nil) from "null" (.some(nil)).
    mutating func nullableInteger(_ field: String, in range: ClosedRange<Int64>) -> Int64?? {
        guard let value = value(field) else { return nil }
        if value.isNull { return .some(nil) }
        return integer(field, in: range).map { .some($0) }
    }

    /// A number (a fraction allowed) in `range`; null as none.
    mutating func nullableNumber(_ field: String, in range: ClosedRange<Double>) -> Double? {
        guard let value = value(field), !value.isNull else { return nil }
        guard case .number(let number) = value, range.contains(number) else {
            reject(field, "must be a number from \(Int(range.lowerBound)) to \(Int(range.upperBound))")
            return nil
        }
        return number
    }

    /// `"none"` or a proxy URL; `.some(nil)` for null.
    mutating func nullableProxy(_ field: String) -> ProxyChoice?? {
        guard let value = value(field) else { return nil }
        if value.isNull { return .some(nil) }
        guard let text = string(field) else { return nil }
        switch ProxyChoice.parse(text) {
        case .success(let choice): return .some(choice)
        case .failure(let problem):
            reject(field, problem.message)
            return nil
        }
    }

    mutating func bool(_ field: String) -> Bool? {
        guard let value = value(field) else { return nil }
        guard let bool = value.boolValue else {
            reject(field, "must be true or false")
            return nil
        }
        return bool
    }

    /// An array of `count` elements.
    mutating func array(_ field: String, count: ClosedRange<Int>, required: Bool = false) -> [JSONValue]? {
        guard let value = value(field) else {
            if required { reject(field, "is required") }
            return nil
        }
        guard case .array(let elements) = value else {
            reject(field, "must be an array")
            return nil
        }
        guard count.contains(elements.count) else {
            reject(field, "must hold \(count.lowerBound) to \(count.upperBound) elements, not \(elements.count)")
            return nil
        }
        return elements
    }

    mutating func object(_ field: String) -> [(String, JSONValue)]? {
        guard let value = value(field) else { return nil }
        guard case .object(let members) = value else {
            reject(field, "must be an object")
            return nil
        }
        return members
    }

    /// Problems listed in one answer: a body of a hundred thousand bad members gets a short answer, not a longer one.
    static let maxListedErrors = 50

    func finish() throws(Problem) {
        guard !errors.isEmpty else { return }
        guard errors.count > RequestBody.maxListedErrors else { throw Problem.invalid(errors) }
        throw Problem.invalid(
            Array(errors.prefix(RequestBody.maxListedErrors))
                + [("body", "\(errors.count - RequestBody.maxListedErrors) more problems not listed")])
    }
}
