import Glibc
import HaulAPI
import HaulCore
import HaulLoop

/// `haul serve` settings: each flag has an environment twin (`--max-active` / `HAUL_MAX_ACTIVE`); flags win.
struct ServeConfig {
    var host = "127.0.0.1"
    var port: UInt16 = 8080
    /// A second address serving the same API, for aria2 clients that expect port 6800 (`--rpc-listen`).
    var rpcListen: (host: String, port: UInt16)?
    var rpcAllowShutdown = false
    var downloadDir = "./downloads"
    /// Where categories' completed folders are; nil: under the download directory.
    var completedRoot: String?
    /// A folder whose lists of links (`*.txt`) are added as they are dropped there.
    var watchDir: String?
    /// The operator's hooks (the config file's `on-complete` and `on-failed` only), their timeout and how many run
    /// at once.
    var hooks = HookConfig()
    var dataDir = "./data"
    var store: String?
    var node: String?
    var lease = 10.0
    var maxActive = 5
    var connections = 8
    var maxAttempts = 5
    var retryWait = 1.0
    var webhookRetryWait = 5.0
    var stallTimeout = 60
    var heartbeat = 15.0
    var progressInterval = 0.25
    var httpTimeout = 60
    var slowClientTimeout = 30.0
    var minSplitSize: Int64 = 4 << 20
    var maxConnectionsPerHost = 16
    var maxSpeed: Int64?
    var lowestSpeed: Int64 = 0
    var minFreeSpace: Int64 = 1 << 30
    var maxFileSize: Int64?
    var token: String?
    var allowUnauthenticated = false
    var allowedHosts: [String] = []
    var corsOrigins: [String] = []
    var denyPrivateNetworks = false
    var maxDownloads = 100_000
    var maxEventStreams = 10_000
    var maxConnectionsPerClient = 256
    var allowNetworks: [(bytes: [UInt8], prefix: Int)] = []
    var proxy: ProxyChoice?
    var noProxy = NoProxy()
    var proxyFromEnvironment = false
    /// The environment's proxies by URL scheme, `*` for all_proxy (read only with --proxy-from-env).
    var environmentProxies: [String: ProxyServer] = [:]
    var webhookProxy: ProxyServer?
    var userAgent: String?
    var netrcFile: String?
    var sshKey: String?
    var sshKnownHosts: String?
    var logLevel = Logger.Level.info
    var logFormat = Logger.Format.text

    static let usage = """
        usage: haul serve [options]
          --config PATH          read options from a file, TOML (max-active = 10) or, ending in .json, JSON
                                 ({"max_active": 10}), named as here; flags and the environment win (HAUL_CONFIG).
                                 Only the file names hooks, programs run without a shell after a download
                                 completes or fails: on-complete = ["/usr/local/bin/notify", "--done"], on-failed
          --listen HOST:PORT     address to listen on (HAUL_LISTEN, default 127.0.0.1:8080; port 0 picks one)
          --download-dir PATH    where files are saved (HAUL_DOWNLOAD_DIR, default ./downloads)
          --watch-dir PATH       add the lists of links (NAME.txt, one URL a line, aria2's input-file format)
                                 dropped into this folder, then rename each NAME.added or NAME.failed
                                 (HAUL_WATCH_DIR)
          --hook-timeout SECONDS a hook (the config file's on-complete and on-failed) is killed after this
                                 (HAUL_HOOK_TIMEOUT, default 60)
          --hook-concurrency N   hooks running at once; more wait (HAUL_HOOK_CONCURRENCY, default 4)
          --completed-root PATH  where categories' completed folders are, if not under the download directory
                                 (another file system: finished files are copied, synced, then removed)
                                 (HAUL_COMPLETED_ROOT)
          --data-dir PATH        where the database lives (HAUL_DATA_DIR, default ./data)
          --store URL            keep the downloads in PostgreSQL, a libpq URI like postgres://haul@db/haul,
                                 instead of SQLite in --data-dir (HAUL_STORE; the password may come from PGPASSWORD)
          --node NAME            this node's name among the nodes sharing --store, unique to each (HAUL_NODE,
                                 default the host name)
          --lease SECONDS        how long a node's claim on a download holds unrenewed: a node that dies has its
                                 downloads taken over after about this long (HAUL_LEASE, default 10)
          --max-active N         downloads running at once (HAUL_MAX_ACTIVE, default 5)
          --connections N        default connections per download, 1-32 (HAUL_CONNECTIONS, default 8)
          --max-connections-per-host N  connections to one host over all downloads
                                 (HAUL_MAX_CONNECTIONS_PER_HOST, default 16)
          --min-split-size BYTES never split a segment below this, but for a connection at under half the others'
                                 rate (HAUL_MIN_SPLIT_SIZE, default 4M)
          --max-speed BYTES      bytes per second over all downloads, 0 for no limit (HAUL_MAX_SPEED, default 0)
          --lowest-speed BYTES   close and retry a connection slower than this for --stall-timeout
                                 (HAUL_LOWEST_SPEED, default 0: only stalls)
          --min-free-space BYTES never let downloads leave less than this free on the download root's disk; a
                                 file that would fails with insufficient_space (HAUL_MIN_FREE_SPACE, default 1G)
          --max-file-size BYTES  the largest file accepted, 0 for no limit; larger ones fail with file_too_large
                                 (HAUL_MAX_FILE_SIZE, default 0)
          --max-attempts N       attempts before a download fails (HAUL_MAX_ATTEMPTS, default 5)
          --retry-wait SECONDS   first retry delay, doubling each time (HAUL_RETRY_WAIT, default 1)
          --webhook-retry-wait SECONDS  a webhook delivery's first retry delay, doubling to an hour; a failing
                                 receiver rests as long before its next attempt (HAUL_WEBHOOK_RETRY_WAIT, default 5,
                                 at least 1)
          --stall-timeout SECONDS  cut and retry a transfer that received nothing for this long
                                 (HAUL_STALL_TIMEOUT, default 60)
          --sse-heartbeat SECONDS  comment heartbeat on idle event streams (HAUL_SSE_HEARTBEAT, default 15)
          --progress-interval SECONDS  least time between progress events of a download
                                 (HAUL_PROGRESS_INTERVAL, default 0.25)
          --slow-client-timeout SECONDS  close an event stream whose client stopped reading this long ago
                                 (HAUL_SLOW_CLIENT_TIMEOUT, default 30)
          --max-downloads N      downloads stored, finished ones included (HAUL_MAX_DOWNLOADS, default 100000)
          --max-event-streams N  event streams and WebSockets open at once (HAUL_MAX_EVENT_STREAMS, default 10000)
          --max-connections-per-client N  API connections one address may hold open, 0 for no cap
                                 (HAUL_MAX_CONNECTIONS_PER_CLIENT, default 256)
          --http-timeout SECONDS an API connection must deliver each whole request within this long of opening
                                 or of its previous request, and is closed when idle as long (HAUL_HTTP_TIMEOUT,
                                 default 60)
          --token TOKEN          require 'Authorization: Bearer TOKEN' on every route but /healthz and the
                                 dashboard's page (HAUL_TOKEN; prefer the variable: arguments show in ps)
          --allow-unauthenticated  allow listening beyond loopback without a token (HAUL_ALLOW_UNAUTHENTICATED=1)
          --rpc-listen HOST:PORT a second address serving the same API, for aria2 clients that expect
                                 127.0.0.1:6800/jsonrpc (HAUL_RPC_LISTEN; the JSON-RPC is on --listen too)
          --rpc-allow-shutdown   let aria2.shutdown stop the server (HAUL_RPC_ALLOW_SHUTDOWN=1, default refused)
          --allowed-hosts NAMES  comma-separated names the Host header may carry (HAUL_ALLOWED_HOSTS; default on
                                 loopback: localhost, 127.0.0.1, ::1; elsewhere any)
          --cors-origin ORIGINS  comma-separated origins browsers may call the API from, like
                                 https://dash.example:8443 (HAUL_CORS_ORIGIN, default none; browser extensions'
                                 own origins are answered without being named)
          --deny-private-networks  fetch only from public addresses: no loopback, private, link-local (cloud
                                 metadata), unique-local or multicast ones, checked on every address connected
                                 to, also after redirects (HAUL_DENY_PRIVATE_NETWORKS=1)
          --allow-networks CIDRS comma-separated exceptions to --deny-private-networks, like 10.1.2.0/24
                                 (HAUL_ALLOW_NETWORKS)
          --proxy URL            the proxy of downloads whose own and whose category's name none: http://,
                                 https://, socks4a://, socks5:// or socks5h://, user:password@ when it asks; none
                                 for direct (HAUL_PROXY, default none; PATCH /settings changes it)
          --no-proxy HOSTS       comma-separated hosts, domains (.example.com) and networks (10.0.0.0/8) reached
                                 directly whatever the proxy (HAUL_NO_PROXY)
          --proxy-from-env       take http_proxy, https_proxy, all_proxy and no_proxy from the environment, for
                                 downloads no other setting gives a proxy; otherwise they are ignored
                                 (HAUL_PROXY_FROM_ENV=1)
          --webhook-proxy URL    the proxy webhook deliveries go through (HAUL_WEBHOOK_PROXY, default none)
          --user-agent TEXT      the User-Agent of downloads that name none (HAUL_USER_AGENT, default haul/VERSION)
          --netrc-file PATH      a .netrc whose machine entries give origins credentials, for downloads that
                                 carry none (HAUL_NETRC_FILE)
          --ssh-key PATH         the private key SFTP logs in with (its .pub beside it is used if there), for
                                 downloads without a password (HAUL_SSH_KEY); never given through the API
          --ssh-known-hosts PATH an OpenSSH known_hosts file SFTP servers' host keys must be in, unless a
                                 download pins its own host_key (HAUL_SSH_KNOWN_HOSTS)
          --log-level LEVEL      debug, info, warning or error (HAUL_LOG_LEVEL, default info)
          --log-format FORMAT    text (logfmt-style key=value) or json, one object per line, on standard error
                                 (HAUL_LOG_FORMAT, default text)
        """

    /// Every option `usage` lists, read from it: an option cannot be accepted without being documented.
    static let names: [String] = usage.split(separator: "\n").compactMap { line in
        let text = line.drop(while: { $0 == " " })
        guard text.hasPrefix("--") else { return nil }
        return String(text.dropFirst(2).prefix(while: { $0 != " " }))
    }

    /// Options that take no value (`--name` alone means on; `--name=0` off, see `Switch`).
    /// Options only the config file may give: the programs hooks run.
    static let fileOnly: Set<String> = ["on-complete", "on-failed"]

    static let switches: Set<String> = ["allow-unauthenticated", "deny-private-networks", "proxy-from-env",
                                        "rpc-allow-shutdown"]

    /// The flags as the command-line reader takes them.
    static let known: [FlagParser.Flag] = names.map { FlagParser.Flag(name: $0, takesValue: !switches.contains($0)) }

    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    static func parse(_ arguments: [String], environment: [String: String]) throws -> ServeConfig {
        // Lowest first: the config file, the environment, the flags. Each value remembers how its user wrote its
        // name, which is how an error names it.
        var values: [String: String] = [:]
        var spelling: [String: String] = [:]
        func variable(_ name: String) -> String { "HAUL_" + name.uppercased().replacing("-", with: "_") }
        let flags: [(name: String, value: String)]
        do {
            // A flag given twice: the last one counts, as a later line of a config file would.
            let parsed = try FlagParser(arguments, known: known, repeats: { _ in true }, checkSwitches: false)
            if let stray = parsed.positional.first { throw Invalid(description: "unexpected argument '\(stray)'") }
            flags = parsed.flags
        } catch let failure as FlagParser.Failure {
            switch failure {
            case .unknown(let written) where written.hasPrefix("--"):
                throw Invalid(description: "unknown option \(written)")
            case .unknown(let written): throw Invalid(description: "unexpected argument '\(written)'")
            case .needsValue(let name): throw Invalid(description: "--\(name) needs a value")
            case .notASwitchWord, .givenTwice: throw Invalid(description: "\(failure)")
            }
        }
        var hookCommands = HookConfig()
        let configPath = flags.last(where: { $0.name == "config" })?.value ?? environment["HAUL_CONFIG"]
        if let configPath {
            for entry in try ConfigFile.read(configPath) {
                let name = entry.name.replacing("_", with: "-")
                if ServeConfig.fileOnly.contains(name) {
                    // A program to run: the operator's file names it as an argument list, never a flag, the
                    // environment or a client.
                    let argv = entry.items ?? [entry.value]
                    guard argv.first?.hasPrefix("/") == true else {
                        throw Invalid(description: "\(entry.place) must be a list whose first item is the program's "
                            + "absolute path, like [\"/usr/local/bin/notify\", \"--done\"] (run without a shell)")
                    }
                    if name == "on-complete" { hookCommands.onComplete = argv } else { hookCommands.onFailed = argv }
                    continue
                }
                guard names.contains(name), name != "config" else {
                    throw Invalid(description: "\(entry.place): no such option (haul serve --help lists them)")
                }
                values[name] = entry.value
                spelling[name] = entry.place
            }
        }
        for name in names {
            if let value = environment[variable(name)] {
                values[name] = value
                spelling[name] = variable(name)
            }
        }
        for (name, value) in flags {
            values[name] = value
            spelling[name] = "--" + name
        }
        func label(_ name: String) -> String { spelling[name] ?? "--" + name }

        var config = ServeConfig()
        if let listen = values["listen"] {
            guard let address = ListenAddress(listen) else {
                throw Invalid(description: "\(label("listen")) must be HOST:PORT, got '\(listen)'")
            }
            (config.host, config.port) = (address.host, address.port)
        }
        if let v = values["download-dir"] { config.downloadDir = v }
        if let v = values["completed-root"] { config.completedRoot = v }
        if let v = values["watch-dir"] { config.watchDir = v }
        if let v = values["data-dir"] { config.dataDir = v }
        if let v = values["store"] {
            guard v.hasPrefix("postgres://") || v.hasPrefix("postgresql://") else {
                throw Invalid(description: "\(label("store")) takes a postgres:// URL; without it the downloads are "
                    + "in SQLite in --data-dir")
            }
            config.store = v
        }
        if let v = values["node"] {
            // A file of the download directory is named after it (.haul-nodes/NAME).
            guard ClusterState.isValidNodeName(v) else {
                throw Invalid(description: "\(label("node")) takes up to 64 letters, digits, '-', '_' or '.', "
                    + "starting with a letter or digit, not '\(v)'")
            }
            config.node = v
        }
        config.lease = try seconds(values["lease"], label("lease"), 2...3600) ?? config.lease
        config.maxActive = try integer(values["max-active"], label("max-active"), 1...1000) ?? config.maxActive
        config.hooks = hookCommands
        config.hooks.timeout = try seconds(values["hook-timeout"], label("hook-timeout"), 0.1...86400)
            ?? config.hooks.timeout
        config.hooks.concurrency = try integer(values["hook-concurrency"], label("hook-concurrency"), 1...64)
            ?? config.hooks.concurrency
        config.connections = try integer(values["connections"], label("connections"), 1...32) ?? config.connections
        config.maxAttempts = try integer(values["max-attempts"], label("max-attempts"), 1...100) ?? config.maxAttempts
        config.retryWait = try seconds(values["retry-wait"], label("retry-wait"), 0...3600) ?? config.retryWait
        config.webhookRetryWait = try seconds(values["webhook-retry-wait"], label("webhook-retry-wait"), 1...3600)
            ?? config.webhookRetryWait
        config.stallTimeout = try integer(values["stall-timeout"], label("stall-timeout"), 1...3600)
            ?? config.stallTimeout
        config.heartbeat = try seconds(values["sse-heartbeat"], label("sse-heartbeat"), 0.05...3600)
            ?? config.heartbeat
        config.progressInterval = try seconds(values["progress-interval"], label("progress-interval"), 0.01...60)
            ?? config.progressInterval
        config.maxConnectionsPerHost = try integer(values["max-connections-per-host"],
                                                   label("max-connections-per-host"),
                                                   1...1024) ?? config.maxConnectionsPerHost
        config.minSplitSize = try bytes(values["min-split-size"], label("min-split-size"), 1...(Int64(1) << 40))
            ?? config.minSplitSize
        if let speed = try bytes(values["max-speed"], label("max-speed"), 0...(Int64(1) << 50)) {
            config.maxSpeed = speed == 0 ? nil : speed
        }
        config.lowestSpeed = try bytes(values["lowest-speed"], label("lowest-speed"), 0...(Int64(1) << 50))
            ?? config.lowestSpeed
        config.minFreeSpace = try bytes(values["min-free-space"], label("min-free-space"), 0...(Int64(1) << 60))
            ?? config.minFreeSpace
        if let size = try bytes(values["max-file-size"], label("max-file-size"), 0...(Int64(1) << 60)) {
            config.maxFileSize = size == 0 ? nil : size
        }
        config.slowClientTimeout = try seconds(values["slow-client-timeout"], label("slow-client-timeout"),
                                               0.1...3600)
            ?? config.slowClientTimeout
        config.maxDownloads = try integer(values["max-downloads"], label("max-downloads"), 1...10_000_000)
            ?? config.maxDownloads
        config.maxEventStreams = try integer(values["max-event-streams"], label("max-event-streams"),
                                             1...1_000_000)
            ?? config.maxEventStreams
        config.maxConnectionsPerClient = try integer(values["max-connections-per-client"],
                                                     label("max-connections-per-client"), 0...1_000_000)
            ?? config.maxConnectionsPerClient
        config.httpTimeout = try integer(values["http-timeout"], label("http-timeout"), 1...3600)
            ?? config.httpTimeout
        if config.heartbeat >= Double(config.httpTimeout) {
            throw Invalid(description: "\(label("sse-heartbeat")) must be shorter than \(label("http-timeout")), "
                + "or idle streams are cut")
        }
        config.allowUnauthenticated = try toggle(values["allow-unauthenticated"], label("allow-unauthenticated"))
            ?? config.allowUnauthenticated
        config.denyPrivateNetworks = try toggle(values["deny-private-networks"], label("deny-private-networks"))
            ?? config.denyPrivateNetworks
        for text in list(values["allow-networks"]) {
            guard let network = AddressPolicy.network(text) else {
                throw Invalid(description: "\(label("allow-networks")) takes networks like 10.1.2.0/24 or fd00::/8, "
                    + "not '\(text)'")
            }
            config.allowNetworks.append(network)
        }
        if let v = values["proxy"] {
            switch ProxyChoice.parse(v) {
            case .success(let choice): config.proxy = choice == .direct ? nil : choice
            case .failure(let problem): throw Invalid(description: "\(label("proxy")) \(problem.message)")
            }
        }
        if let v = values["webhook-proxy"], !ASCII.equalsIgnoringCase(v, "none") {
            switch ProxyServer.parse(v) {
            case .success(let server): config.webhookProxy = server
            case .failure(let problem): throw Invalid(description: "\(label("webhook-proxy")) \(problem.message)")
            }
        }
        var bypass = list(values["no-proxy"])
        config.proxyFromEnvironment = try toggle(values["proxy-from-env"], label("proxy-from-env"))
            ?? config.proxyFromEnvironment
        if config.proxyFromEnvironment {
            // curl's conventions: lower case first (HTTP_PROXY upper case is not read: a CGI request's Proxy header
            // becomes it), an empty value is none.
            func named(_ name: String) -> String? {
                let value = environment[name] ?? (name == "http_proxy" ? nil : environment[name.uppercased()])
                return value.flatMap { $0.isEmpty ? nil : $0 }
            }
            for (scheme, name) in [("http", "http_proxy"), ("https", "https_proxy"), ("*", "all_proxy")] {
                guard var text = named(name) else { continue }
                // A proxy without a scheme is an HTTP proxy, as curl reads it.
                if !text.contains("://") { text = "http://" + text }
                switch ProxyServer.parse(text) {
                case .success(let server): config.environmentProxies[scheme] = server
                case .failure(let problem):
                    throw Invalid(description: "\(name) in the environment (--proxy-from-env) \(problem.message)")
                }
            }
            if let text = named("no_proxy") { bypass += text.split(separator: ",").map(String.init) }
        }
        switch NoProxy.parse(bypass) {
        case .success(let noProxy): config.noProxy = noProxy
        case .failure(let problem): throw Invalid(description: "\(label("no-proxy")) \(problem.message)")
        }
        if let v = values["user-agent"] {
            guard !v.isEmpty, v.utf8.count <= 1024, HTTPField.isValue(v) else {
                throw Invalid(description: "\(label("user-agent")) must be 1 to 1024 bytes without control characters")
            }
            config.userAgent = v
        }
        if let v = values["netrc-file"] {
            guard access(v, R_OK) == 0 else {
                throw Invalid(description: "\(label("netrc-file")) cannot be read: \(v)")
            }
            config.netrcFile = v
        }
        for name in ["ssh-key", "ssh-known-hosts"] {
            guard let v = values[name] else { continue }
            guard access(v, R_OK) == 0 else { throw Invalid(description: "\(label(name)) cannot be read: \(v)") }
            if name == "ssh-key" { config.sshKey = Files.absolute(v) } else { config.sshKnownHosts = Files.absolute(v) }
        }
        if let v = values["token"] {
            guard v.utf8.count >= 16, v.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw Invalid(description: "\(label("token")) must be at least 16 printable characters without spaces")
            }
            config.token = v
        }
        config.allowedHosts = list(values["allowed-hosts"]).map { $0.lowercased() }
        config.corsOrigins = list(values["cors-origin"])
        for origin in config.corsOrigins {
            let web = (origin.hasPrefix("http://") || origin.hasPrefix("https://")) && !origin.dropFirst(8).contains("/")
            guard web || AccessPolicy.isExtensionOrigin(origin) else {
                throw Invalid(description: "\(label("cors-origin")) takes origins like https://dash.example:8443 or "
                    + "chrome-extension://ID, not '\(origin)'" + (origin == "null" ? " (Origin null is answered "
                    + "to calls that carry the token, named or not)" : ""))
            }
        }
        if let v = values["log-level"] {
            let levels: [String: Logger.Level] = ["debug": .debug, "info": .info, "warning": .warning, "error": .error]
            guard let level = levels[v.lowercased()] else {
                throw Invalid(description: "\(label("log-level")) must be debug, info, warning or error, not '\(v)'")
            }
            config.logLevel = level
        }
        if let v = values["log-format"] {
            guard let format = Logger.Format(rawValue: v.lowercased()) else {
                throw Invalid(description: "\(label("log-format")) must be text or json, not '\(v)'")
            }
            config.logFormat = format
        }
        if let listen = values["rpc-listen"] {
            guard let address = ListenAddress(listen) else {
                throw Invalid(description: "\(label("rpc-listen")) must be HOST:PORT, got '\(listen)'")
            }
            config.rpcListen = (address.host, address.port)
        }
        config.rpcAllowShutdown = try toggle(values["rpc-allow-shutdown"], label("rpc-allow-shutdown")) ?? false
        if let rpc = config.rpcListen, !ServeConfig.isLoopback(rpc.host), config.token == nil,
           !config.allowUnauthenticated {
            throw Invalid(description: "refusing to listen on \(rpc.host) without a token: anyone who can reach "
                + "it could make this machine download; set HAUL_TOKEN, or pass --allow-unauthenticated")
        }
        if !config.isLoopback, config.token == nil, !config.allowUnauthenticated {
            throw Invalid(description: "refusing to listen on \(config.host) without a token: anyone who can reach "
                + "it could make this machine download; set HAUL_TOKEN, or pass --allow-unauthenticated")
        }
        return config
    }

    /// The Host names the server answers to: those given, else on loopback the loopback names, else any (nil).
    var hostAllowlist: Set<String>? {
        if !allowedHosts.isEmpty {
            return Set(allowedHosts).union(isLoopback ? AccessPolicy.loopbackHosts : [])
        }
        return isLoopback ? AccessPolicy.loopbackHosts : nil
    }

    /// A switch's value: only the documented words, so a guard never reads a typo as "off".
    private static func toggle(_ text: String?, _ name: String) throws -> Bool? {
        guard let text else { return nil }
        guard let value = Switch.parse(text) else {
            throw Invalid(description: "\(name) takes \(Switch.words), not '\(text)'")
        }
        return value
    }

    private static func list(_ text: String?) -> [String] {
        (text ?? "").split(separator: ",").map { $0.trimmingSpaces() }.filter { !$0.isEmpty }
    }

    var isLoopback: Bool { ServeConfig.isLoopback(host) && rpcListen.map { ServeConfig.isLoopback($0.host) } ?? true }

    static func isLoopback(_ host: String) -> Bool { host == "localhost" || host == "::1" || host.hasPrefix("127.") }

    /// A byte count, with an optional k, m or g suffix (powers of 1024).
    private static func bytes(_ text: String?, _ name: String, _ range: ClosedRange<Int64>) throws -> Int64? {
        guard let text else { return nil }
        guard let value = ByteSize.parse(text), range.contains(value) else {
            throw Invalid(description: "\(name) must be a byte count like 4194304, 4m or 1.5G")
        }
        return value
    }

    private static func seconds(_ text: String?, _ name: String, _ range: ClosedRange<Double>) throws -> Double? {
        guard let text else { return nil }
        guard let value = Double(text), range.contains(value) else {
            throw Invalid(description: "\(name) must be seconds from \(range.lowerBound) to \(range.upperBound)")
        }
        return value
    }

    private static func integer(_ text: String?, _ name: String, _ range: ClosedRange<Int>) throws -> Int? {
        guard let text else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw Invalid(description: "\(name) must be an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return value
    }
}
