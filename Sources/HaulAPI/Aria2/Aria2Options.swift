import FoundationEssentials
import HaulCore
import HaulLoop

/// aria2's options as Haul's: a download's through the option table's aria2 names (values are strings there:
/// `"split": "8"`, `"max-download-limit": "1M"`, `"header": ["Cookie: a=1"]`), the server's through its settings.
/// Options that name a path or a program (aria2 #2030: an RPC caller set `on-download-complete` and `dir` and ran
/// what it liked) are refused; others Haul does not have are ignored, as aria2 ignores what it cannot change.
enum Aria2Options {
    /// The most connections a download takes: aria2's split may ask for more.
    static let maxConnections = 32

    /// Refused by name or prefix: each names a file the server would write or read, or a program it would run.
    static func isRefused(_ name: String) -> Bool {
        let exact: Set<String> = ["log", "save-session", "save-cookies", "load-cookies", "input-file", "conf-path",
                                  "server-stat-of", "server-stat-if", "dht-file-path", "dht-file-path6",
                                  "netrc-path", "private-key", "certificate", "ca-certificate", "torrent-file",
                                  "metalink-file", "index-out", "stop-with-process", "daemon"]
        return exact.contains(name) || name.hasPrefix("on-download-") || name.hasPrefix("on-bt-")
            || name.hasPrefix("rpc-")
    }

    /// What went wrong with an option: aria2 answers these as code 1 with the message.
    struct Refusal: Error {
        let message: String
    }

    /// A new download's JSON members from aria2's options (sources are added by the caller). `root` is the download
    /// root: an absolute `dir` under it is taken relative to it, one outside refused.
    static func downloadMembers(_ options: [(String, JSONValue)], root: String, sources: Int)
        throws(Refusal) -> [(String, JSONValue)] {
        var members: [(String, JSONValue)] = []
        var split: Int?
        var perServer: Int?
        for (name, value) in options {
            if isRefused(name) { throw Refusal(message: "option \(name) is not allowed through the RPC") }
            if name == "split" || name == "max-connection-per-server" {
                guard let text = text(value), let number = Int(text), number >= 1 else {
                    throw Refusal(message: "option \(name) must be a positive number, not \(value.serialized())")
                }
                if name == "split" { split = number } else { perServer = number }
                continue
            }
            guard let option = DownloadOptions.all.first(where: { $0.aria2.contains(name) }) else { continue }
            members.append((option.name, try convert(name, value, option: option, root: root)))
        }
        // aria2 opens min(split, max-connection-per-server x sources) connections.
        if split != nil || perServer != nil {
            let connections = min(split ?? Int.max, (perServer ?? Int.max / 64) * max(1, sources))
            members.append(("connections", .number(Double(min(connections, maxConnections)))))
        }
        return members
    }

    /// One option's value in the JSON type of its row.
    private static func convert(_ name: String, _ value: JSONValue, option: DownloadOption, root: String)
        throws(Refusal) -> JSONValue {
        if option.kind == .headers {
            // `header` is an array of "Name: value" lines (one string is one line).
            var lines: [String] = []
            switch value {
            case .string(let line): lines = [line]
            case .array(let items): lines = items.compactMap(\.stringValue)
            default: throw Refusal(message: "option header must be a string or an array of strings")
            }
            var fields: [(String, JSONValue)] = []
            for line in lines {
                guard let colon = line.firstIndex(of: ":") else {
                    throw Refusal(message: "header '\(line)' is not 'Name: value'")
                }
                fields.append((HTTPField.trimmed(String(line[..<colon])),
                               .string(HTTPField.trimmed(String(line[line.index(after: colon)...])))))
            }
            return .object(fields)
        }
        guard let text = text(value) else {
            throw Refusal(message: "option \(name) must be a string, not \(value.serialized())")
        }
        switch option.kind {
        case .integer:
            guard let number = Int64(text) else { throw Refusal(message: "option \(name) must be a number: \(text)") }
            return .number(Double(number))
        case .bytes:
            guard let number = bytes(text) else {
                throw Refusal(message: "option \(name) must be a number of bytes (1M, 500K): \(text)")
            }
            return .number(Double(number))
        case .boolean:
            guard text == "true" || text == "false" else {
                throw Refusal(message: "option \(name) must be true or false: \(text)")
            }
            return .bool(text == "true")
        case .text, .headers:
            switch name {
            case "dir": return .string(try directory(text, root: root))
            case "checksum": return .string(checksum(text))
            default: return .string(text)
            }
        }
    }

    /// A value aria2 clients send as a string (some send numbers and booleans as JSON).
    private static func text(_ value: JSONValue) -> String? {
        switch value {
        case .string(let text): return text
        case .number(let number): return number.rounded() == number ? String(Int64(number)) : nil
        case .bool(let flag): return flag ? "true" : "false"
        default: return nil
        }
    }

    /// aria2's sizes: a number with K or M (1024 and 1024 x 1024); 0 is no limit.
    static func bytes(_ text: String) -> Int64? {
        var digits = Substring(text)
        var unit: Int64 = 1
        switch digits.last {
        case "K", "k": unit = 1 << 10
        case "M", "m": unit = 1 << 20
        case "G", "g": unit = 1 << 30
        default: break
        }
        if unit != 1 { digits = digits.dropLast() }
        guard let number = Int64(digits), number >= 0, number <= Int64.max / unit else { return nil }
        return number * unit
    }

    /// aria2's `dir` is absolute, as its clients keep it (often the server's own, from `getGlobalOption`): under
    /// the root it becomes a folder of the root; a relative one is a folder of the root already.
    static func directory(_ text: String, root: String) throws(Refusal) -> String {
        guard text.hasPrefix("/") else { return text }
        let base = root.hasSuffix("/") ? String(root.dropLast()) : root
        if text == base || text == base + "/" { return "" }
        guard text.hasPrefix(base + "/") else {
            throw Refusal(message: "dir \(text) is outside the download directory \(base)")
        }
        return String(text.dropFirst(base.utf8.count + 1))
    }

    /// aria2's `TYPE=DIGEST` (`sha-256=...`) as Haul's `algorithm:hex`.
    static func checksum(_ text: String) -> String {
        guard let equals = text.firstIndex(of: "=") else { return text }
        let algorithm = text[..<equals].lowercased().replacing("-", with: "")
        return algorithm + ":" + text[text.index(after: equals)...].lowercased()
    }

    /// The settings members for aria2's global options Haul has; others are ignored.
    static func settingsMembers(_ options: [(String, JSONValue)]) throws(Refusal) -> [(String, JSONValue)] {
        var members: [(String, JSONValue)] = []
        for (name, value) in options {
            if isRefused(name) || name == "dir" {
                throw Refusal(message: "option \(name) is not allowed through the RPC")
            }
            guard let text = text(value) else { throw Refusal(message: "option \(name) must be a string") }
            switch name {
            case "max-concurrent-downloads":
                guard let number = Int(text) else { throw Refusal(message: "\(name) must be a number: \(text)") }
                members.append(("max_active", .number(Double(number))))
            case "max-overall-download-limit":
                guard let number = bytes(text) else { throw Refusal(message: "\(name) must be bytes: \(text)") }
                members.append(("max_speed", number == 0 ? .null : .number(Double(number))))
            case "split":
                guard let number = Int(text) else { throw Refusal(message: "\(name) must be a number: \(text)") }
                members.append(("default_connections", .number(Double(number))))
            case "max-connection-per-server":
                guard let number = Int(text) else { throw Refusal(message: "\(name) must be a number: \(text)") }
                members.append(("max_connections_per_host", .number(Double(number))))
            case "all-proxy":
                members.append(("proxy", text.isEmpty ? .null : .string(text)))
            default: continue
            }
        }
        return members
    }

    /// The server's options in aria2's names and string values (`getGlobalOption`).
    static func global(_ settings: ServerSettings, root: String) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("dir", .string(root)),
            ("max-concurrent-downloads", .string(String(settings.maxActive))),
            ("max-overall-download-limit", .string(String(settings.maxSpeed ?? 0))),
            ("max-overall-upload-limit", .string("0")),
            ("split", .string(String(settings.defaultConnections))),
            ("max-connection-per-server", .string(String(settings.maxConnectionsPerHost))),
            ("min-split-size", .string("1048576")),
            ("continue", .string("true")),
            ("allow-overwrite", .string("false")),
            ("auto-file-renaming", .string("true")),
            ("file-allocation", .string("none")),
            ("max-download-result", .string("1000")),
        ]
        if let proxy = settings.proxy { members.append(("all-proxy", .string(proxy.shown))) }
        return .object(members)
    }

    /// A download's options in aria2's names (`getOption`).
    static func download(_ d: Download, root: String) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("dir", .string(Aria2Status.directory(d, root: root))),
            ("split", .string(String(d.connections))),
            ("max-connection-per-server", .string(String(d.connections))),
            ("max-download-limit", .string(String(d.maxSpeed ?? 0))),
        ]
        if let name = d.requestedFilename { members.append(("out", .string(name))) }
        if let checksum = d.checksum, let colon = checksum.firstIndex(of: ":") {
            let algorithm = String(checksum[..<colon])
            let named = ["sha1": "sha-1", "sha224": "sha-224", "sha256": "sha-256", "sha384": "sha-384",
                         "sha512": "sha-512"][algorithm] ?? algorithm
            members.append(("checksum", .string(named + "=" + checksum[checksum.index(after: colon)...])))
        }
        if let referer = d.referer { members.append(("referer", .string(referer))) }
        if let agent = d.userAgent { members.append(("user-agent", .string(agent))) }
        if !d.headers.isEmpty {
            // Names only: values may be cookies or tokens.
            members.append(("header", .array(d.headers.map { .string($0.name + ": ***") })))
        }
        return .object(members)
    }

    /// A download's changes from `changeOption`: speed limit and connections (what PATCH may change).
    static func changes(_ options: [(String, JSONValue)]) throws(Refusal) -> DownloadChanges {
        var changes = DownloadChanges()
        for (name, value) in options {
            if isRefused(name) || name == "dir" || name == "out" {
                throw Refusal(message: "option \(name) cannot be changed")
            }
            guard let text = text(value) else { throw Refusal(message: "option \(name) must be a string") }
            switch name {
            case "max-download-limit":
                guard let number = bytes(text) else { throw Refusal(message: "\(name) must be bytes: \(text)") }
                changes.maxSpeed = .some(number == 0 ? nil : number)
            case "split", "max-connection-per-server":
                guard let number = Int(text), number >= 1 else {
                    throw Refusal(message: "\(name) must be a positive number: \(text)")
                }
                changes.connections = min(number, maxConnections)
            default: continue
            }
        }
        return changes
    }
}
