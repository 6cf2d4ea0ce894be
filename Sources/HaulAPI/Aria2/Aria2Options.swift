import FoundationEssentials
import HaulCore
import HaulLoop

/// aria2's options as Haul's: a download's through the option table's aria2 names (values are strings there:
/// `"split": "8"`, `"max-download-limit": "1M"`, `"header": ["Cookie: a=1"]`), both ways; the server's through
/// `Aria2GlobalOptions`. Options that name a path or a program (aria2 #2030: an RPC caller set
/// `on-download-complete` and `dir` and ran what it liked) are refused. A new download's options Haul does not have
/// are ignored, as aria2c ignores those that do not apply (browser extensions send many); a change to one is
/// refused with its name, so a settings page never shows a change that did nothing.
enum Aria2Options {
    /// The most connections a download takes: aria2's split may ask for more.
    static let maxConnections = 32

    /// Refused by name or prefix: each names a file the server would write or read, or a program it would run.
    static func isRefused(_ name: String) -> Bool {
        let exact: Set<String> = [
            "log", "save-session", "save-cookies", "load-cookies", "input-file", "conf-path",
            "server-stat-of", "server-stat-if", "dht-file-path", "dht-file-path6",
            "netrc-path", "private-key", "certificate", "ca-certificate", "torrent-file",
            "metalink-file", "index-out", "stop-with-process", "daemon",
        ]
        return exact.contains(name) || name.hasPrefix("on-download-") || name.hasPrefix("on-bt-")
            || name.hasPrefix("rpc-")
    }

    /// What went wrong with an option: aria2 answers these as code 1 with the message.
    struct Refusal: Error {
        let message: String
    }

    /// The refusal of a change to an option Haul has no equivalent for.
    static func unsupported(_ name: String) -> Refusal {
        Refusal(
            message: aria2Names.contains(name)
                ? "option \(name) is not supported by Haul"
                : "option \(name) is not an aria2 option")
    }

    /// aria2 1.36's option names (its prefs.cc), to tell an option Haul lacks from a name no aria2 has.
    static let aria2Names: Set<String> = Set(
        """
        all-proxy all-proxy-passwd all-proxy-user allow-overwrite allow-piece-length-change always-resume async-dns
        async-dns-server auto-file-renaming auto-save-interval bt-detach-seed-only bt-enable-hook-after-hash-check
        bt-enable-lpd bt-exclude-tracker bt-external-ip bt-force-encryption bt-hash-check-seed bt-keep-alive-interval
        bt-load-saved-metadata bt-lpd-interface bt-max-open-files bt-max-peers bt-metadata-only bt-min-crypto-level
        bt-prioritize-piece bt-remove-unselected-file bt-request-peer-speed-limit bt-request-timeout bt-require-crypto
        bt-save-metadata bt-seed-unverified bt-stop-timeout bt-timeout bt-tracker bt-tracker-connect-timeout
        bt-tracker-interval bt-tracker-timeout ca-certificate certificate check-certificate check-integrity checksum
        conditional-get conf-path connect-timeout console-log-level content-disposition-default-utf8 continue daemon
        deferred-input dht-entry-point dht-entry-point-host dht-entry-point-host6 dht-entry-point-port
        dht-entry-point-port6 dht-entry-point6 dht-file-path dht-file-path6 dht-listen-addr dht-listen-addr6
        dht-listen-port dht-message-timeout dir disable-ipv6 disk-cache dns-timeout download-result dry-run dscp
        enable-async-dns6 enable-color enable-dht enable-dht6 enable-http-keep-alive enable-http-pipelining enable-mmap
        enable-peer-exchange enable-rpc event-poll file-allocation follow-metalink follow-torrent force-save
        force-sequential ftp-passwd ftp-pasv ftp-proxy ftp-proxy-passwd ftp-proxy-user ftp-reuse-connection ftp-type
        ftp-user gid hash-check-only header help http-accept-gzip http-auth-challenge http-no-cache http-passwd
        http-proxy http-proxy-passwd http-proxy-user http-user https-proxy https-proxy-passwd https-proxy-user
        human-readable index-out input-file interface keep-unfinished-download-result listen-port load-cookies log
        log-level lowest-speed-limit max-concurrent-downloads max-connection-per-server max-download-limit
        max-download-result max-downloads max-file-not-found max-http-pipelining max-mmap-limit
        max-overall-download-limit max-overall-upload-limit max-resume-failure-tries max-tries max-upload-limit
        metalink-base-uri metalink-enable-unique-protocol metalink-file metalink-language metalink-location metalink-os
        metalink-preferred-protocol metalink-version min-split-size min-tls-version multiple-interface netrc-path
        no-conf no-file-allocation-limit no-netrc no-proxy no-want-digest-header on-bt-download-complete
        on-download-complete on-download-error on-download-pause on-download-start on-download-stop
        optimize-concurrent-downloads out parameterized-uri pause pause-metadata peer-agent peer-connection-timeout
        peer-id-prefix piece-length private-key proxy-method quiet realtime-chunk-checksum referer remote-time
        remove-control-file retry-wait reuse-uri rlimit-nofile rpc-allow-origin-all rpc-certificate rpc-listen-all
        rpc-listen-port rpc-max-request-size rpc-passwd rpc-private-key rpc-save-upload-metadata rpc-secret rpc-secure
        rpc-user save-cookies save-not-found save-session save-session-interval seed-ratio seed-time select-file
        select-least-used-host server-stat-if server-stat-of server-stat-timeout show-console-readout show-files
        socket-recv-buffer-size split ssh-host-key-md startup-idle-time stderr stop stop-with-process
        stream-piece-selector summary-interval timeout torrent-file truncate-console-readout uri-selector use-head
        user-agent version
        """.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init))

    /// A new download's JSON members from aria2's options (sources are added by the caller). `root` is the download
    /// root: an absolute `dir` under it is taken relative to it, one outside refused.
    static func downloadMembers(
        _ options: [(String, JSONValue)], root: String, sources: Int
    )
        throws(Refusal) -> [(String, JSONValue)]
    {
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

    /// The new download aria2's `addUri` asks for: its sources (the first, then mirrors), and its options through
    /// the option table's rows (each checks its value as it does for REST); every problem said at once.
    static func newDownload(
        uris: [String], options: [(String, JSONValue)], root: String
    )
        throws(Refusal) -> NewDownload
    {
        var request = NewDownload(url: uris.first ?? "")
        var problems: [FieldProblem] = []
        for (index, uri) in uris.enumerated() {
            let magnet = DownloadKind.isMagnet(uri)
            if magnet, uris.count > 1 {
                problems.append(("urls[\(index)]", "a magnet link is a download of its own, without mirrors"))
            } else if let problem = magnet ? Magnet.problem(uri) : Validate.url(uri) {
                problems.append(("urls[\(index)]", problem))
            } else if index > 0, uri != request.url, !request.mirrors.contains(uri) {
                // A source named twice is one source.
                request.mirrors.append(uri)
            }
        }
        problems += DownloadOptions.apply(try downloadMembers(options, root: root, sources: uris.count), to: &request)
        guard problems.isEmpty else {
            throw Refusal(message: problems.map { "\($0.field): \($0.message)" }.joined(separator: "; "))
        }
        return request
    }

    /// One option's value in the JSON type of its row.
    private static func convert(
        _ name: String, _ value: JSONValue, option: DownloadOption, root: String
    )
        throws(Refusal) -> JSONValue
    {
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
                fields.append(
                    (
                        HTTPField.trimmed(String(line[..<colon])),
                        .string(HTTPField.trimmed(String(line[line.index(after: colon)...])))
                    ))
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
        case .decimal:
            guard let number = Double(text), number.isFinite else {
                throw Refusal(message: "option \(name) must be a number: \(text)")
            }
            return .number(number)
        case .boolean where name == "stream-piece-selector":
            // aria2's piece selectors: only inorder is Haul's sequential; the others spread the connections.
            guard ["default", "inorder", "random", "geom"].contains(text) else {
                throw Refusal(message: "option \(name) must be default, inorder, random or geom: \(text)")
            }
            return .bool(text == "inorder")
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
    static func text(_ value: JSONValue) -> String? {
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

    /// A download's options in aria2's names (`getOption`): each option-table row with aria2 names and a shown
    /// value, written as aria2 writes values, the folder absolute, the digest in aria2's form, headers by name only;
    /// then the server's own (a download inherits them, as aria2's getOption shows).
    static func download(_ d: Download, root: String, global: Aria2GlobalOptions.Source) -> JSONValue {
        var members: [(String, JSONValue)] = [("dir", .string(Aria2Status.directory(d, root: root)))]
        for option in DownloadOptions.all where !option.aria2.isEmpty {
            guard let show = option.show, let value = aria2Text(show(d)) else { continue }
            for name in option.aria2 {
                if name == "checksum" {
                    members.append((name, .string(checksumText(value))))
                } else if name == "stream-piece-selector" {
                    members.append((name, .string(value == "true" ? "inorder" : "default")))
                } else {
                    members.append((name, .string(value)))
                }
            }
        }
        if members.first(where: { $0.0 == "out" }) == nil, let name = d.requestedFilename {
            members.append(("out", .string(name)))
        }
        if !d.headers.isEmpty {
            // Names only: values may be cookies or tokens.
            members.append(("header", .array(d.headers.map { .string($0.name + ": ***") })))
        }
        if !d.insecure { members.append(("check-certificate", .string("true"))) }
        let shown = Set(members.map(\.0))
        for row in Aria2GlobalOptions.rows
        where !shown.contains(row.name) && row.name != "max-concurrent-downloads"
            && row.name != "max-overall-download-limit"
        {
            members.append((row.name, .string(row.value(global))))
        }
        return .object(members)
    }

    /// A shown value as aria2 writes it: a string, a decimal number, true or false; nil for none.
    private static func aria2Text(_ value: JSONValue) -> String? {
        switch value {
        case .string(let text): return text
        case .bool(let flag): return flag ? "true" : "false"
        case .number: return value.integerValue.map(String.init)
        default: return nil
        }
    }

    /// Haul's `sha256:hex` as aria2's `sha-256=hex`.
    private static func checksumText(_ checksum: String) -> String {
        guard let colon = checksum.firstIndex(of: ":") else { return checksum }
        let algorithm = String(checksum[..<colon])
        let named =
            [
                "sha1": "sha-1", "sha224": "sha-224", "sha256": "sha-256", "sha384": "sha-384",
                "sha512": "sha-512",
            ][algorithm] ?? algorithm
        return named + "=" + checksum[checksum.index(after: colon)...]
    }

    /// A download's changes from `changeOption`: the option-table rows PATCH may change, by their aria2 names
    /// (speed limit, connections). An option Haul has that cannot change once a download is added, or one it does
    /// not have, refuses the whole change with its name.
    static func changes(_ options: [(String, JSONValue)]) throws(Refusal) -> DownloadChanges {
        var changes = DownloadChanges()
        for (name, value) in options {
            if isRefused(name) { throw Refusal(message: "option \(name) is not allowed through the RPC") }
            guard let row = DownloadOptions.all.first(where: { $0.aria2.contains(name) }) else {
                if Aria2GlobalOptions.byName[name] != nil {
                    throw Refusal(
                        message: "option \(name) is the server's, not a download's: change it with "
                            + "changeGlobalOption where it can change")
                }
                throw unsupported(name)
            }
            guard row.patchable else {
                throw Refusal(
                    message: "option \(name) cannot be changed once a download is added: remove it and add "
                        + "it again")
            }
            guard let text = text(value) else { throw Refusal(message: "option \(name) must be a string") }
            switch row.kind {
            case .bytes:
                guard let number = bytes(text) else { throw Refusal(message: "\(name) must be bytes: \(text)") }
                changes.maxSpeed = .some(number == 0 ? nil : number)
            default:
                guard let number = Int(text), number >= 1 else {
                    throw Refusal(message: "\(name) must be a positive number: \(text)")
                }
                changes.connections = min(number, maxConnections)
            }
        }
        return changes
    }
}
