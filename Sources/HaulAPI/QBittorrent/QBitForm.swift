import HaulLoop

/// A qBittorrent call's parameters, as qBittorrent reads them: the query's, then the body's, a form
/// (`application/x-www-form-urlencoded`) or `multipart/form-data` with files (`torrents/add`'s `torrents`).
struct QBitForm {
    /// A file of a multipart body.
    struct File {
        let field: String
        let filename: String
        let bytes: [UInt8]
    }

    private(set) var fields: [(name: String, value: String)] = []
    private(set) var files: [File] = []

    /// The most parts one body holds.
    static let maxParts = 1000

    init(fields: [(name: String, value: String)]) { self.fields = fields }

    /// The request's parameters, or why its body cannot be read (then answered 400 or 415).
    init(_ request: HTTPRequest) throws(QBitError) {
        fields = request.queryPairs
        guard !request.body.isEmpty else { return }
        let type = request.header("Content-Type") ?? ""
        let mediaType = type.split(separator: ";").first.map { HTTPField.trimmed(String($0)).lowercased() } ?? ""
        switch mediaType {
        case "multipart/form-data":
            // RFC 2046 caps a boundary at 70 characters; a longer one would make each search for it cost its
            // length at every byte of the body (a 32 KiB boundary over a 4 MiB body).
            guard let boundary = QBitForm.parameter("boundary", of: type), (1...70).contains(boundary.utf8.count)
            else {
                throw QBitError(400, "a multipart body needs its boundary, of 1 to 70 characters")
            }
            try readMultipart(request.body, boundary: Array(("--" + boundary).utf8))
        case "application/x-www-form-urlencoded", "":
            fields += QBitForm.urlEncoded(request.body)
        default:
            throw QBitError(415, "the body must be a form (application/x-www-form-urlencoded or multipart/form-data)")
        }
    }

    /// The last value given for `name` (qBittorrent reads the last).
    subscript(name: String) -> String? { fields.last(where: { $0.name == name })?.value }

    /// A boolean parameter: `true` or `false`, any case; nil when absent, `invalid` when it is something else.
    func bool(_ name: String) throws(QBitError) -> Bool? {
        guard let text = self[name] else { return nil }
        switch text.lowercased() {
        case "true": return true
        case "false": return false
        default: throw QBitError(400, "\(name) must be true or false")
        }
    }

    /// A number parameter; nil when absent.
    func number(_ name: String) throws(QBitError) -> Double? {
        guard let text = self[name] else { return nil }
        guard let value = Double(text), value.isFinite else { throw QBitError(400, "\(name) must be a number") }
        return value
    }

    /// An integer parameter; nil when absent.
    func integer(_ name: String) throws(QBitError) -> Int64? {
        guard let text = self[name] else { return nil }
        guard let value = Int64(text) else { throw QBitError(400, "\(name) must be an integer") }
        return value
    }

    /// `name=value` pairs joined by `&`, `+` a space, percent-decoded.
    static func urlEncoded(_ bytes: [UInt8]) -> [(name: String, value: String)] {
        String(decoding: bytes, as: UTF8.self).split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ s: Substring) -> String {
                let spaced = s.replacing("+", with: " ")
                return PercentEncoding.decode(spaced) ?? String(spaced)
            }
            return (decode(parts[0]), parts.count > 1 ? decode(parts[1]) : "")
        }
    }

    /// A `name=value` parameter of a header's value (`boundary=...`, `name="..."`), unquoted.
    static func parameter(_ name: String, of header: String) -> String? {
        for part in header.split(separator: ";").dropFirst() {
            let pair = part.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, ASCII.equalsIgnoringCase(HTTPField.trimmed(String(pair[0])), name) else { continue }
            var value = HTTPField.trimmed(String(pair[1]))
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
                value = String(value.dropFirst().dropLast()).replacing("\\\"", with: "\"")
            }
            return value
        }
        return nil
    }

    /// Parts between `--boundary` lines (RFC 7578): each one's headers, a blank line, its bytes.
    private mutating func readMultipart(_ body: [UInt8], boundary: [UInt8]) throws(QBitError) {
        let malformed = QBitError(400, "the multipart body is malformed")
        guard var at = QBitForm.find(boundary, in: body, from: 0) else { throw malformed }
        var parts = 0
        while true {
            at += boundary.count
            // `--` after a boundary ends the body.
            if at + 1 < body.count, body[at] == UInt8(ascii: "-"), body[at + 1] == UInt8(ascii: "-") { return }
            guard at + 1 < body.count, body[at] == 13, body[at + 1] == 10 else { throw malformed }
            at += 2
            guard let headersEnd = QBitForm.find([13, 10, 13, 10], in: body, from: at) else { throw malformed }
            let headers = String(decoding: body[at..<headersEnd], as: UTF8.self)
            let start = headersEnd + 4
            guard let next = QBitForm.find([13, 10] + boundary, in: body, from: start) else { throw malformed }
            parts += 1
            guard parts <= QBitForm.maxParts else { throw QBitError(400, "at most \(QBitForm.maxParts) parts") }
            var name: String?
            var filename: String?
            for line in headers.split(separator: "\r\n") {
                let pair = line.split(separator: ":", maxSplits: 1)
                guard pair.count == 2, ASCII.equalsIgnoringCase(String(pair[0]), "Content-Disposition") else {
                    continue
                }
                name = QBitForm.parameter("name", of: String(pair[1]))
                filename = QBitForm.parameter("filename", of: String(pair[1]))
            }
            guard let name else { throw malformed }
            let bytes = Array(body[start..<next])
            if let filename {
                files.append(File(field: name, filename: filename, bytes: bytes))
            } else {
                fields.append((name, String(decoding: bytes, as: UTF8.self)))
            }
            at = next + 2
        }
    }

    /// Where `needle` first occurs in `haystack` at or after `from`.
    static func find(_ needle: [UInt8], in haystack: [UInt8], from: Int) -> Int? {
        guard let first = needle.first, haystack.count >= needle.count else { return nil }
        var index = from
        let last = haystack.count - needle.count
        while index <= last {
            if haystack[index] == first {
                var matched = true
                for offset in 1..<needle.count where haystack[index + offset] != needle[offset] {
                    matched = false
                    break
                }
                if matched { return index }
            }
            index += 1
        }
        return nil
    }
}

/// An answer that is not a success, as qBittorrent gives it: a status and a line of plain text.
struct QBitError: Error {
    let status: Int
    let message: String

    init(_ status: Int, _ message: String) {
        self.status = status
        self.message = message
    }

    static let forbidden = QBitError(403, "Forbidden")
    static let notFound = QBitError(404, "Not Found")
}
