import Foundation
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
        if let type = request.header("Content-Type"), !ASCII.hasPrefixIgnoringCase(type, "application/json"),
           !type.lowercased().contains("+json") {
            throw Problem.unsupportedMediaType(type.lowercased())
        }
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

    mutating func bool(_ field: String) -> Bool? {
        guard let value = value(field) else { return nil }
        guard let bool = value.boolValue else {
            reject(field, "must be true or false")
            return nil
        }
        return bool
    }

    mutating func object(_ field: String) -> [(String, JSONValue)]? {
        guard let value = value(field) else { return nil }
        guard case .object(let members) = value else {
            reject(field, "must be an object")
            return nil
        }
        return members
    }

    func finish() throws(Problem) {
        if !errors.isEmpty { throw Problem.invalid(errors) }
    }
}

/// Field rules shared by the handlers.
enum Validate {
    /// An absolute http or https URL with a host.
    static func url(_ text: String) -> String? {
        guard text.count <= 8192, !text.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else {
            return "must be an absolute http or https URL without spaces or control characters"
        }
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased() else {
            return "must be an absolute http or https URL"
        }
        guard scheme == "http" || scheme == "https" else { return "scheme must be http or https, not \(scheme)" }
        guard let host = components.host, !host.isEmpty else { return "must name a host" }
        return nil
    }

    /// A plain file name: no path separators, no `.` or `..`, no NUL or control characters (which would be
    /// silently dropped, leaving a name the client did not ask for).
    static func filename(_ text: String) -> String? {
        if text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            return "must not contain NUL or control characters"
        }
        if text.contains("/") || text.contains("\\") || text == "." || text == ".." || FileName.sanitize(text) == nil {
            return "must be a plain file name without path separators"
        }
        return nil
    }

    /// A relative directory inside the download root: `/`-separated components, each a name `filename` would
    /// accept, none `.` or `..`, none empty (so no leading, trailing or doubled `/`).
    static func directory(_ text: String) -> String? {
        guard !text.isEmpty else { return nil }
        if text.hasPrefix("/") { return "must be relative to the download root" }
        if text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            return "must not contain NUL or control characters"
        }
        for component in text.split(separator: "/", omittingEmptySubsequences: false) {
            if component.isEmpty { return "must not have empty components (a trailing or doubled '/')" }
            if component == ".." || component == "." { return "must not contain '.' or '..'" }
            if component.contains("\\") || FileName.sanitize(String(component)) == nil {
                return "'\(component)' is not a usable directory name"
            }
        }
        return nil
    }

    /// Names of headers Haul sets itself and a client may not override.
    static let reservedHeaders: Set<String> = ["range", "if-range", "host", "content-length", "transfer-encoding",
                                               "connection", "accept-encoding"]

    static func header(name: String, value: String) -> String? {
        let token = CharacterSet(charactersIn: "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        if name.isEmpty || name.unicodeScalars.contains(where: { !token.contains($0) }) {
            return "'\(name)' is not a valid header name"
        }
        if reservedHeaders.contains(name.lowercased()) { return "'\(name)' is set by Haul and cannot be given" }
        if value.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) {
            return "the value of '\(name)' must not contain line breaks"
        }
        return nil
    }
}
