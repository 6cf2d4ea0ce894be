import FoundationEssentials
import HaulLoop

/// The per-download options, a `DownloadOption` each, and what every wire format does with them: a request's
/// members applied to a new download, a download's shown back.
public enum DownloadOptions {
    /// The largest size or speed accepted: 1 PiB.
    public static let maxBytes = Int64(1) << 50

    /// Every option's row: the common ones, then the kinds' (DownloadOptions+Kinds).
    public static let all: [DownloadOption] = common + kinds

    static let common: [DownloadOption] = [
        DownloadOption(
            name: "filename", kind: .text, otherwise: "from the server's answer",
            column: "requested_filename",
            apply: { option, value, request, problems in
                guard let text = checkedString(value, option, &problems) else { return }
                if let problem = Validate.filename(text) { return problems.append((option.name, problem)) }
                request.filename = FileName.sanitize(text)
            },
            // The name a client gave is shown from the first answer on; the server's is known once
            // probed (a taken name gets " (1)" then).
            show: { JSONValue($0.filename ?? $0.requestedFilename) },
            storage: DownloadColumn(name: "requested_filename", write: { text($0.requestedFilename) }) {
                d, v in d.requestedFilename = v.string
            },
            flag: .init(
                name: "filename", placeholder: "NAME", help: "the file's name (one URL only)",
                oneURL: true),
            aria2: ["out"]),
        DownloadOption(
            name: "directory", kind: .text, otherwise: "the category's folder, else the download root",
            column: "directory",
            apply: { option, value, request, problems in
                guard let text = checkedString(value, option, &problems) else { return }
                if let problem = Validate.directory(text) { problems.append((option.name, problem)) }
                request.directory = Validate.sanitizedDirectory(text)
            },
            storage: DownloadColumn(name: "directory", write: { .text($0.directory) }) { d, v in
                d.directory = v.string ?? ""
            },
            flag: .init(
                name: "directory", placeholder: "DIR",
                help: "a folder under the download root (or the category's)"),
            aria2: ["dir"]),
        DownloadOption(
            name: "category", kind: .text, otherwise: "none", column: "category",
            apply: { option, value, request, problems in
                guard let text = checkedString(value, option, &problems) else { return }
                if let problem = Validate.categoryName(text) { problems.append((option.name, problem)) }
                request.category = text
            },
            carry: { request, download in download.category = request.category },
            show: { JSONValue($0.category) },
            storage: DownloadColumn(name: "category", write: { text($0.category) }) { d, v in
                d.category = v.string
            },
            flag: .init(
                name: "category", placeholder: "NAME",
                help: "a category made with 'haul category put': its folder and defaults apply")),
        DownloadOption(
            name: "connections", kind: .integer(1...32), otherwise: "the category's, else --connections",
            patchable: true, column: "connections",
            apply: { option, value, request, problems in
                request.connections = checkedInteger(value, option, &problems).map(Int.init)
            },
            show: { JSONValue($0.connections) },
            storage: DownloadColumn(name: "connections", write: { .integer(Int64($0.connections)) }) {
                d, v in d.connections = Int(v.int ?? 1)
            },
            flag: .init(name: "connections", placeholder: "N", help: "connections per download, 1-32"),
            aria2: ["split", "max-connection-per-server"]),
        DownloadOption(
            name: "priority", kind: .integer(-1000...1000), otherwise: "the category's, else 0",
            patchable: true, column: "priority",
            apply: { option, value, request, problems in
                request.priority = checkedInteger(value, option, &problems).map(Int.init)
            },
            show: { JSONValue($0.priority) },
            storage: DownloadColumn(name: "priority", write: { .integer(Int64($0.priority)) }) { d, v in
                d.priority = Int(v.int ?? 0)
            },
            flag: .init(
                name: "priority", placeholder: "N",
                help: "higher starts first, -1000 to 1000 (default the category's, else 0)")),
        DownloadOption(
            name: "max_speed", kind: .bytes(0...maxBytes), otherwise: "none (0 is none)",
            patchable: true, column: "max_speed",
            apply: { option, value, request, problems in
                request.maxSpeed = checkedInteger(value, option, &problems)
                    .flatMap { $0 == 0 ? nil : $0 }
            },
            show: { JSONValue($0.maxSpeed) },
            storage: DownloadColumn(name: "max_speed", write: { integer($0.maxSpeed) }) { d, v in
                d.maxSpeed = v.int
            },
            flag: .init(name: "max-speed", placeholder: "SIZE", help: "bytes per second, like 500k or 1.5M"),
            aria2: ["max-download-limit"]),
        DownloadOption(
            name: "checksum", kind: .text, otherwise: "none", column: "checksum",
            apply: { option, value, request, problems in
                guard let text = checkedString(value, option, &problems) else { return }
                guard let checksum = Checksum(text) else {
                    return problems.append(
                        (
                            option.name,
                            "must be sha256:, sha1: or md5: followed by the "
                                + "digest in hex"
                        ))
                }
                request.checksum = checksum.description
            },
            carry: { request, download in download.checksum = request.checksum },
            show: { JSONValue($0.checksum) },
            storage: DownloadColumn(name: "checksum", write: { text($0.checksum) }) { d, v in
                d.checksum = v.string
            },
            flag: .init(
                name: "checksum", placeholder: "ALGO:HEX",
                help: "sha256:, sha1: or md5: digest to verify (one URL only)", oneURL: true),
            aria2: ["checksum"]),
        DownloadOption(
            name: "headers", kind: .headers, otherwise: "none", column: "headers",
            apply: { option, value, request, problems in
                guard case .object(let members) = value else {
                    return problems.append((option.name, "must be an object"))
                }
                let checked = Validate.headers(members)
                problems += checked.errors
                request.headers = checked.headers
            },
            storage: DownloadColumn(name: "headers", write: { .text(DownloadStore.encode($0.headers)) }) {
                d, v in d.headers = DownloadStore.decodeHeaders(v.string ?? "[]")
            },
            flag: .init(
                name: "header", placeholder: "'Name: value'",
                help: "a header sent to the origin (repeatable)", repeatable: true),
            aria2: ["header"]),
        DownloadOption(
            name: "start_paused", kind: .boolean, otherwise: "false", column: "state",
            apply: { option, value, request, problems in
                request.startPaused = checkedBool(value, option, &problems) ?? false
            },
            flag: .init(name: "paused", placeholder: nil, help: "add them paused"),
            aria2: ["pause"]),
        DownloadOption(
            name: "insecure", kind: .boolean, otherwise: "false", column: "insecure",
            apply: { option, value, request, problems in
                request.insecure = checkedBool(value, option, &problems) ?? false
            },
            carry: { request, download in download.insecure = request.insecure },
            show: { .bool($0.insecure) },
            storage: DownloadColumn(name: "insecure", write: { .integer($0.insecure ? 1 : 0) }) { d, v in
                d.insecure = (v.int ?? 0) != 0
            },
            flag: .init(
                name: "insecure", placeholder: nil,
                help: "do not verify the origin's TLS certificate")),
        DownloadOption(
            name: "sequential", kind: .boolean, otherwise: "false", column: "sequential",
            apply: { option, value, request, problems in
                request.sequential = checkedBool(value, option, &problems) ?? false
            },
            carry: { request, download in download.sequential = request.sequential },
            show: { .bool($0.sequential) },
            storage: DownloadColumn(name: "sequential", write: { .integer($0.sequential ? 1 : 0) }) { d, v in
                d.sequential = (v.int ?? 0) != 0
            },
            flag: .init(
                name: "sequential", placeholder: nil,
                help: "fetch in order, from the start (for a player reading it as it arrives)"),
            aria2: ["stream-piece-selector"]),
        DownloadOption(
            name: "first_last", kind: .boolean, otherwise: "false", column: "first_last",
            apply: { option, value, request, problems in
                request.firstLast = checkedBool(value, option, &problems) ?? false
            },
            carry: { request, download in download.firstLast = request.firstLast },
            show: { .bool($0.firstLast) },
            storage: DownloadColumn(name: "first_last", write: { .integer($0.firstLast ? 1 : 0) }) { d, v in
                d.firstLast = (v.int ?? 0) != 0
            },
            flag: .init(
                name: "first-last", placeholder: nil,
                help: "fetch the first and last pieces first (where MP4 and MKV keep their index)")),
        DownloadOption(
            name: "proxy", kind: .text, otherwise: "the category's, else the settings' (--proxy)",
            column: "proxy",
            apply: { option, value, request, problems in
                guard let text = checkedString(value, option, &problems) else { return }
                switch ProxyChoice.parse(text) {
                case .success(let choice): request.proxy = choice
                case .failure(let problem): problems.append((option.name, problem.message))
                }
            },
            carry: { request, download in download.proxy = request.proxy },
            // Its password as ***.
            show: { JSONValue($0.proxy?.shown) },
            storage: DownloadColumn(name: "proxy", write: { text($0.proxy?.stored) }) { d, v in
                d.proxy = ProxyChoice.stored(v.string)
            },
            flag: .init(
                name: "proxy", placeholder: "URL",
                help: "through this proxy: http://, https://, socks4a://, socks5:// or socks5h://, "
                    + "with user:password@ if it asks; none for direct"),
            aria2: ["all-proxy"]),
        DownloadOption(
            name: "username", kind: .text, otherwise: "the URL's user information, else --netrc-file",
            column: "username",
            apply: { option, value, request, problems in
                request.username = checkedText(value, option, limit: 256, lines: false, &problems)
            },
            carry: { request, download in download.username = request.username },
            show: { JSONValue($0.username) },
            storage: DownloadColumn(name: "username", write: { text($0.username) }) { d, v in
                d.username = v.string
            },
            flag: .init(
                name: "user", placeholder: "NAME",
                help: "the origin's user name (Basic or Digest), with --password"),
            aria2: ["http-user"]),
        DownloadOption(
            name: "password", kind: .text, otherwise: "the URL's user information, else --netrc-file",
            column: "password",
            apply: { option, value, request, problems in
                request.password = checkedText(value, option, limit: 256, lines: false, &problems)
            },
            carry: { request, download in download.password = request.password },
            // A secret: never shown.
            storage: DownloadColumn(name: "password", write: { text($0.password) }) { d, v in
                d.password = v.string
            },
            flag: .init(
                name: "password", placeholder: "SECRET",
                help: "the origin's password (prefer user:password@ in a file read with -i)"),
            aria2: ["http-passwd"]),
        DownloadOption(
            name: "cookies", kind: .text, otherwise: "none", column: "cookies",
            apply: { option, value, request, problems in
                request.cookies = checkedText(value, option, limit: 16 << 10, lines: true, &problems)
            },
            carry: { request, download in download.cookies = request.cookies },
            // A secret: never shown.
            storage: DownloadColumn(name: "cookies", write: { text($0.cookies) }) { d, v in
                d.cookies = v.string
            },
            flag: .init(
                name: "cookies", placeholder: "FILE",
                help: "cookies from a Netscape cookies.txt, or 'name=value; other=value'",
                readsFile: true)),
        DownloadOption(
            name: "user_agent", kind: .text, otherwise: "--user-agent", column: "user_agent",
            apply: { option, value, request, problems in
                request.userAgent = checkedText(value, option, limit: 256, lines: false, &problems)
            },
            carry: { request, download in download.userAgent = request.userAgent },
            show: { JSONValue($0.userAgent) },
            storage: DownloadColumn(name: "user_agent", write: { text($0.userAgent) }) { d, v in
                d.userAgent = v.string
            },
            flag: .init(name: "user-agent", placeholder: "TEXT", help: "the User-Agent sent to the origin"),
            aria2: ["user-agent"]),
        DownloadOption(
            name: "referer", kind: .text, otherwise: "none", column: "referer",
            apply: { option, value, request, problems in
                guard let text = checkedString(value, option, &problems) else { return }
                guard text.unicodeScalars.count <= 2048 else {
                    return problems.append((option.name, "must be at most 2048 characters"))
                }
                if let problem = Validate.url(text, schemes: ["http", "https"]) {
                    return problems.append((option.name, problem))
                }
                request.referer = text
            },
            carry: { request, download in download.referer = request.referer },
            show: { JSONValue($0.referer) },
            storage: DownloadColumn(name: "referer", write: { text($0.referer) }) { d, v in
                d.referer = v.string
            },
            flag: .init(name: "referer", placeholder: "URL", help: "the Referer sent to the origin"),
            aria2: ["referer"]),
        DownloadOption(
            name: "host_key", kind: .text, otherwise: "--ssh-known-hosts", column: "host_key",
            apply: { option, value, request, problems in
                guard let text = checkedString(value, option, &problems) else { return }
                guard SSHHostKey.isFingerprint(text) else {
                    return problems.append(
                        (
                            option.name,
                            "must be an SSH host key fingerprint, SHA256: and "
                                + "43 base64 characters, as ssh-keygen -lf prints it"
                        ))
                }
                request.hostKey = SSHHostKey.normalized(text)
            },
            carry: { request, download in download.hostKey = request.hostKey },
            show: { JSONValue($0.hostKey) },
            storage: DownloadColumn(name: "host_key", write: { text($0.hostKey) }) { d, v in
                d.hostKey = v.string
            },
            flag: .init(
                name: "host-key", placeholder: "SHA256:...",
                help: "the SFTP server's host key fingerprint, instead of --ssh-known-hosts")),
        DownloadOption(
            name: "size", kind: .bytes(0...maxBytes), otherwise: "unknown until the probe",
            column: "expected_bytes",
            apply: { option, value, request, problems in
                request.expectedBytes = checkedInteger(value, option, &problems)
            },
            carry: { request, download in download.expectedBytes = request.expectedBytes },
            storage: DownloadColumn(name: "expected_bytes", write: { integer($0.expectedBytes) }) { d, v in
                d.expectedBytes = v.int
            }),
    ]

    /// Every option's JSON name.
    public static let names: Set<String> = Set(all.map(\.name))

    /// What PATCH may change besides the state.
    public static let patchable: Set<String> = Set(all.filter(\.patchable).map(\.name))

    /// What each request and resource uses of the rows, read once: the rows themselves are costly to copy.
    public static let shown = all.filter(\.shown)
    /// Each shown option's name as the resource writes it (quoted, with its colon), and how its value is shown.
    private static let showing = shown.map { (key: JSONWriter.key(bytes: $0.name), show: $0.show!) }
    private static let applying = all.map { (key: $0.key, apply: $0.apply) }
    static let carrying = all.compactMap(\.carry)

    /// The integer ranges, read once: every request checks them.
    private static let ranges: [String: ClosedRange<Int64>] = Dictionary(
        uniqueKeysWithValues: all.compactMap { option in option.range.map { (option.name, $0) } })

    /// The integer range of option `name` (a row of this table: a misspelt name is a programming error).
    public static func range(_ name: String) -> ClosedRange<Int64> {
        guard let range = ranges[name] else { preconditionFailure("no integer option \(name)") }
        return range
    }

    /// Sets the options `members` give on `request`: each checked by its row, what is wrong returned with its
    /// field. Members that are not options are left to the caller (the sources: `url`, `urls`, `mirrors`).
    public static func apply(_ members: [(String, JSONValue)], to request: inout NewDownload) -> [FieldProblem] {
        var problems: [FieldProblem] = []
        for (key, apply) in applying {
            guard let value = members.last(where: { $0.0 == key.name })?.1 else { continue }
            apply(key, value, &request, &problems)
        }
        // Every wire format: a password in the URL is kept as the download's, never shown with its URL.
        request.takeCredentialsFromURL()
        return problems
    }

    /// Appends the download's options as the resource shows them.
    public static func show(_ download: Download, into writer: inout JSONWriter) {
        for (key, show) in showing {
            writer.key(written: key)
            writer.value(show(download))
        }
    }

    // A null where a value is expected is an error, not "absent": only fields documented as nullable take it.
}
