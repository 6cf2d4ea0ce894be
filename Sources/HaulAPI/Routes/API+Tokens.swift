import FoundationEssentials
import Glibc
import HaulCore
import HaulLoop

/// `/tokens`: tokens with a scope (read, add, manage, admin) for clients that should not hold the server's own.
/// Only the server's token (admin) and admin-scoped tokens reach these routes; a server without `--token` lets
/// everyone do everything, so it makes none.
extension API {
    var tokenRoutes: [Route] {
        [
            Route(
                pattern: "/tokens",
                handlers: [
                    "GET": .read(.listTokens) { [unowned self] _ throws(Problem) in
                        let tokens = try self.attempt(self.serverOperations.tokens())
                        return .response(
                            API.json(200, .object([("tokens", .array(tokens.map { self.tokenJSON($0) }))])))
                    },
                    "POST": .write(.addToken) { [unowned self] c throws(Problem) in .response(try self.addToken(c)) },
                ]),
            // Who the caller is: the dashboard shows only what its scope may use.
            Route(
                pattern: "/token",
                handlers: [
                    "GET": .read(.whoAmI) { [unowned self] c in
                        guard let token = c.caller.token else {
                            return .response(
                                API.json(
                                    200,
                                    .object([
                                        ("id", .null), ("name", .null),
                                        ("scope", .string(c.caller.scope.name)),
                                    ])))
                        }
                        return .response(API.json(200, self.tokenJSON(token)))
                    }
                ]),
            Route(
                pattern: "/tokens/{id}",
                handlers: [
                    "DELETE": .write(.removeToken) { [unowned self] c throws(Problem) in
                        let id = c.parameters["id"]!
                        try self.attempt(self.serverOperations.removeToken(id))
                        self.cutOff(token: id)
                        return .response(HTTPResponse(status: 204))
                    }
                ]),
        ]
    }

    private func addToken(_ c: RequestContext) throws(Problem) -> HTTPResponse {
        guard gate.hasToken else {
            throw Problem.conflict(
                "this server has no --token, so every caller may do everything: start it with "
                    + "--token (HAUL_TOKEN) before handing out tokens with less")
        }
        var body = try RequestBody(c.request)
        body.rejectUnknown(except: ["name", "scope", "expires_at", "root", "quota_bytes", "max_active"])
        let name = body.string("name", required: true)
        if let name, !AccessToken.isValidName(name) {
            body.reject("name", "must be 1 to 64 printable characters")
        }
        let scopeName = body.string("scope", required: true)
        let scope = scopeName.flatMap(Scope.init(name:))
        if scopeName != nil, scope == nil { body.reject("scope", "must be read, add, manage or admin") }
        var expiresAt: Date?
        if let text = body.string("expires_at") {
            expiresAt = API.rfc3339(text)
            if expiresAt == nil {
                body.reject("expires_at", "must be an RFC 3339 time, like 2027-01-31T18:00:00Z")
            } else if expiresAt! <= Date() {
                body.reject("expires_at", "must be in the future")
            }
        }
        let root = body.folder("root", emptyMeans: "must name a folder under the download root")
        let quota = body.integer("quota_bytes", in: 1...Int64.max)
        let maxActive = body.integer("max_active", in: 1...1000)
        try body.finish()
        let asked = AccessToken(
            id: "", name: name!, scope: scope!, expiresAt: expiresAt, createdAt: Date(),
            root: root, quotaBytes: quota, maxActive: maxActive.map { Int($0) })
        let (token, secret) = try attempt(serverOperations.addToken(asked))
        guard case .object(var members) = tokenJSON(token) else { return API.json(500, .null) }
        members.append(("secret", .string(secret)))
        return API.json(201, .object(members), headers: [("Location", "/tokens/\(token.id)")])
    }

    /// A token as `GET /tokens` shows it (never its secret), with what its downloads hold now.
    func tokenJSON(_ token: AccessToken) -> JSONValue {
        .object([
            ("id", .string(token.id)), ("name", .string(token.name)), ("scope", .string(token.scope.name)),
            ("root", JSONValue(token.root)), ("quota_bytes", JSONValue(token.quotaBytes)),
            ("used_bytes", JSONValue(serverOperations.usage(ofToken: token.id))),
            ("max_active", JSONValue(token.maxActive.map { Int64($0) })),
            ("expires_at", token.expiresAt.map { .string(Timestamp.rfc3339($0)) } ?? .null),
            ("created_at", .string(Timestamp.rfc3339(token.createdAt))),
        ])
    }

    /// `2027-01-31T18:00:00Z`, with fractions of a second and an offset (`+02:00`) allowed; nil for anything else.
    static func rfc3339(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= bytes.count, bytes[range].allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
            return bytes[range].reduce(0) { $0 * 10 + Int($1 - 48) }
        }
        guard bytes.count >= 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            bytes[10] == UInt8(ascii: "T") || bytes[10] == UInt8(ascii: "t"), bytes[13] == UInt8(ascii: ":"),
            bytes[16] == UInt8(ascii: ":"), let year = number(0..<4), let month = number(5..<7),
            let day = number(8..<10), let hour = number(11..<13), let minute = number(14..<16),
            let second = number(17..<19), (1...12).contains(month), (1...31).contains(day), hour < 24,
            minute < 60, second < 61
        else { return nil }
        var index = 19
        var fraction = 0.0
        if bytes[index] == UInt8(ascii: ".") {
            var scale = 0.1
            index += 1
            while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
                fraction += Double(bytes[index] - 48) * scale
                scale /= 10
                index += 1
            }
        }
        var offset = 0
        guard index < bytes.count else { return nil }
        if bytes[index] == UInt8(ascii: "Z") || bytes[index] == UInt8(ascii: "z") {
            guard index + 1 == bytes.count else { return nil }
        } else {
            guard index + 6 == bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-"),
                bytes[index + 3] == UInt8(ascii: ":"), let hours = number((index + 1)..<(index + 3)),
                let minutes = number((index + 4)..<(index + 6))
            else { return nil }
            offset = (hours * 3600 + minutes * 60) * (bytes[index] == UInt8(ascii: "+") ? 1 : -1)
        }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        let seconds = timegm(&parts)
        return Date(timeIntervalSince1970: Double(seconds - offset) + fraction)
    }
}
