import HaulAPI
import HaulCore
import HaulLoop

/// Every `haul serve` option, one row each, in the order `--help` and README list them. A new option is a row
/// here (and, where it reaches a part of the server that has no field for it yet, that field).
enum ServerOptions {
    static let all: [ServerOption] =
        place + limits + timing + access + outbound + bittorrent + qbittorrent + logging

    static let byName: [String: ServerOption] = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })

    // MARK: where it runs and keeps things

    static let place: [ServerOption] = [
        text(
            "config", "PATH",
            help: "read options from a TOML (or, for `.json`, JSON) file, named as here; flags "
                + "and the environment win. Only the file names hooks (`on-complete`, `on-failed`) and the HLS remux "
                + "(`hls-remux`): argument lists run without a shell", sample: "/dev/null"
        ) { given, config throws(ServeConfig.Invalid) in
            config.configPath = given.text
        } show: {
            $0.configPath
        },
        text(
            "listen", "HOST:PORT", default: "127.0.0.1:8080", help: "address to listen on; port 0 picks one",
            sample: "127.0.0.1:0"
        ) { given, config throws(ServeConfig.Invalid) in
            guard let address = ListenAddress(given.text) else {
                throw given.invalid("must be HOST:PORT, got '\(given.text)'")
            }
            config.listen = address
        } show: {
            "\($0.listen.host):\($0.listen.port)"
        },
        text(
            "download-dir", "PATH", default: "./downloads", help: "where files are saved",
            sample: "/srv/dl"
        ) { given, config throws(ServeConfig.Invalid) in
            config.downloadDir = given.text
        } show: {
            $0.downloadDir
        },
        text(
            "watch-dir", "PATH",
            help: "lists of links (`NAME.txt`, aria2's input-file format) dropped there are "
                + "added, then renamed `NAME.added` or `NAME.failed`", sample: "/srv/lists"
        ) { given, config throws(ServeConfig.Invalid) in
            config.watchDir = given.text
        } show: {
            $0.watchDir
        },
        seconds(
            "hook-timeout", 0.1...86400, default: "60",
            help: "a hook (the config file's `on-complete`, "
                + "`on-failed`) is killed after this", sample: "5", \.engine.hooks.timeout),
        integer(
            "hook-concurrency", 1...64, default: "4", help: "hooks running at once; more wait their turn",
            sample: "2", \.engine.hooks.concurrency),
        text(
            "completed-root", "PATH", shown: "the download directory",
            help: "where categories' "
                + "`completed_directory` folders are (on another file system, finished files are copied, synced, then "
                + "removed)", sample: "/srv/done"
        ) { given, config throws(ServeConfig.Invalid) in
            config.completedRoot = given.text
        } show: {
            $0.completedRoot
        },
        text(
            "data-dir", "PATH", default: "./data", help: "where the database lives",
            sample: "/srv/data"
        ) { given, config throws(ServeConfig.Invalid) in
            config.dataDir = given.text
        } show: {
            $0.dataDir
        },
        text(
            "store", "URL", shown: "none (SQLite in `--data-dir`)",
            help: "keep the downloads in PostgreSQL, a libpq "
                + "URI like `postgres://haul@db/haul`, shared by several nodes (README: Several nodes on "
                + "PostgreSQL); the password may come from `PGPASSWORD`",
            sample: "postgres://haul@db/haul"
        ) { given, config throws(ServeConfig.Invalid) in
            guard given.text.hasPrefix("postgres://") || given.text.hasPrefix("postgresql://") else {
                throw given.invalid("takes a postgres:// URL; without it the downloads are in SQLite in --data-dir")
            }
            config.store = given.text
        } show: {
            $0.store
        },
        text(
            "node", "NAME", shown: "the host name",
            help: "this node's name among the nodes sharing `--store`, "
                + "unique to each", sample: "node-1"
        ) { given, config throws(ServeConfig.Invalid) in
            // A file of the download directory is named after it (.haul-nodes/NAME).
            guard ClusterMembership.isValidNodeName(given.text) else {
                throw given.invalid(
                    "takes up to 64 letters, digits, '-', '_' or '.', starting with a letter or "
                        + "digit, not '\(given.text)'")
            }
            config.node = given.text
        } show: {
            $0.node
        },
        seconds(
            "lease", 2...3600, default: "10",
            help: "how long a node's claim on a download holds unrenewed; a "
                + "dead node's downloads are taken over after about this long", sample: "30", \.engine.lease),
    ]

    // MARK: how much at once

    static let limits: [ServerOption] = [
        integer(
            "max-active", 1...1000, default: "5", help: "downloads running at once", settings: "max_active",
            sample: "3", \.engine.maxActive),
        integer(
            "connections", 1...32, default: "8", help: "default connections per download, 1-32",
            settings: "default_connections", sample: "4", \.engine.defaultConnections),
        integer(
            "max-connections-per-host", 1...1024, default: "16",
            help: "connections to one host over all "
                + "downloads", settings: "max_connections_per_host", sample: "6", \.engine.maxConnectionsPerHost),
        bytes(
            "min-split-size", 1...(Int64(1) << 40), default: "4M",
            help: "never split a segment below this, but to "
                + "take work from a connection at under half the others' rate", sample: "1M", sampleShown: "1048576",
            \.engine.minSplitSize),
        bytes(
            "max-speed", 0...(Int64(1) << 50), default: "0", shown: "0 (none)",
            help: "bytes per second over all "
                + "downloads, 0 for no limit", settings: "max_speed", sample: "2M", sampleShown: "2097152",
            none: \.engine.maxSpeed),
        bytes(
            "lowest-speed", 0...(Int64(1) << 50), default: "0", shown: "0 (only stalls)",
            help: "retry a connection "
                + "slower than this for `--stall-timeout`", sample: "10k", sampleShown: "10240", \.engine.lowestSpeed),
        bytes(
            "min-free-space", 0...(Int64(1) << 60), default: "1G",
            help: "free space downloads never take; a file "
                + "that would fails with `insufficient_space`", sample: "2G", sampleShown: "2147483648",
            \.engine.space.minFreeSpace),
        bytes(
            "max-file-size", 0...(Int64(1) << 60), default: "0", shown: "0 (none)",
            help: "the largest file "
                + "accepted, 0 for no limit; larger ones fail with `file_too_large`", sample: "1G",
            sampleShown: "1073741824", none: \.engine.space.maxFileSize),
        integer(
            "max-attempts", 1...100, default: "5", help: "attempts before a download fails", sample: "7",
            \.engine.maxAttempts),
        integer(
            "max-downloads", 1...10_000_000, default: "1000000",
            help: "downloads stored, finished ones included "
                + "(507 beyond)", sample: "5000", \.limits.maxDownloads),
        integer(
            "max-event-streams", 1...1_000_000, default: "10000",
            help: "event streams and WebSockets open at "
                + "once (503 beyond)", sample: "50", \.limits.maxEventStreams),
        toggle(
            "start-on-read",
            help: "a read of a queued download's file (`GET /downloads/{id}/file`) starts it ahead of the queue, "
                + "as `?start=1` asks",
            \.limits.startOnRead),
        integer(
            "max-connections-per-client", 0...1_000_000, default: "256",
            help: "API connections one address may "
                + "hold open, 0 for no cap", sample: "32", \.connectionPolicy.maxPerClient),
    ]

    // MARK: when

    static let timing: [ServerOption] = [
        seconds(
            "retry-wait", 0...3600, default: "1", help: "first retry delay, doubling each time", sample: "2",
            \.engine.retryBaseDelay),
        seconds(
            "webhook-retry-wait", 1...3600, default: "5",
            help: "a webhook delivery's first retry delay, doubling "
                + "to an hour; a failing receiver rests as long", sample: "10", \.engine.webhookRetryWait),
        integer(
            "stall-timeout", 1...3600, "SECONDS", default: "60",
            help: "cut and retry a transfer that received "
                + "nothing this long", sample: "30", \.engine.stallTimeout),
        seconds(
            "sse-heartbeat", 0.05...3600, default: "15",
            help: "comment heartbeat on idle event streams (shorter "
                + "than `--http-timeout`)", sample: "5", \.events.heartbeat),
        seconds(
            "progress-interval", 0.01...60, default: "0.25",
            help: "least time between progress events of a "
                + "download", sample: "0.5", \.events.progressInterval),
        seconds(
            "slow-client-timeout", 0.1...3600, default: "30",
            help: "close an event stream whose client stopped "
                + "reading this long ago", sample: "10", \.events.slowClientTimeout),
        integer(
            "http-timeout", 1...3600, "SECONDS", default: "60",
            help: "time to deliver each whole request, "
                + "counted from a connection's opening or its previous request; idle API connections close",
            sample: "20", \.httpTimeout),
        ServerOption(
            name: "threads", placeholder: "N", kind: .integer(1...1024), defaultShown: "the number of cores",
            help: "event loops: 1 runs the API, the engine and the transfers on one thread; from 2, the API's "
                + "connections are read and written on a loop of their own beside the engine's, which answers status "
                + "reads and pages of downloads at rest itself (REST's, aria2's tellStatus, qBittorrent's "
                + "torrents/info), and transfers run on N - 1 loops of their own",
            sample: "1",
            apply: { given, config in config.threads = given.integer }, show: { $0.threads.map(String.init) }),
    ]

    // MARK: who may use it

    static let access: [ServerOption] = [
        text(
            "token", "TOKEN",
            help: "bearer token for every route but `/healthz` and the dashboard's page (prefer "
                + "the variable: arguments show in ps)", sample: "a-token-of-sixteen-bytes", sampleShown: "set"
        ) {
            given, config throws(ServeConfig.Invalid) in
            guard given.text.utf8.count >= 16, given.text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw given.invalid("must be at least 16 printable characters without spaces")
            }
            config.token = given.text
        } show: {
            $0.token == nil ? nil : "set"
        },
        toggle("allow-unauthenticated", help: "listen beyond loopback without a token", \.allowUnauthenticated),
        address(
            "rpc-listen", help: "a second address serving the same API (aria2's `127.0.0.1:6800`)",
            sample: "127.0.0.1:6800", \.rpcListen),
        toggle(
            "rpc-allow-shutdown", help: "let `aria2.shutdown` and `POST /shutdown` stop the server",
            \.aria2.allowShutdown),
        list(
            "allowed-hosts", "NAMES", shown: "loopback names on loopback", help: "names the `Host` header may carry",
            sample: "haul.example,dl.example"
        ) { given, config throws(ServeConfig.Invalid) in
            config.allowedHosts = given.list.map { $0.lowercased() }
        } show: {
            $0.allowedHosts.isEmpty ? nil : $0.allowedHosts.joined(separator: ",")
        },
        list(
            "cors-origin", "ORIGINS",
            help: "other origins browsers may call the API from (browser extensions' own "
                + "are answered without being named)", sample: "https://dash.example"
        ) { given, config throws(ServeConfig.Invalid) in
            for origin in given.list {
                let web =
                    (origin.hasPrefix("http://") || origin.hasPrefix("https://"))
                    && !origin.dropFirst(8).contains("/")
                guard web || AccessPolicy.isExtensionOrigin(origin) else {
                    throw given.invalid(
                        "takes origins like https://dash.example:8443 or chrome-extension://ID, not "
                            + "'\(origin)'"
                            + (origin == "null"
                                ? " (Origin null is answered to calls that carry the "
                                    + "token, named or not)" : ""))
                }
            }
            config.corsOrigins = given.list
        } show: {
            $0.corsOrigins.isEmpty ? nil : $0.corsOrigins.joined(separator: ",")
        },
    ]

    // MARK: what it reaches

    static let outbound: [ServerOption] = [
        toggle(
            "deny-private-networks",
            help: "fetch only from public addresses: no loopback, private, link-local "
                + "(cloud metadata), unique-local or multicast ones, checked on every address connected to",
            \.denyPrivateNetworks),
        list(
            "allow-networks", "CIDRS", help: "exceptions to `--deny-private-networks`, like `10.1.2.0/24`",
            sample: "10.1.2.0/24"
        ) { given, config throws(ServeConfig.Invalid) in
            config.allowNetworks = try given.list.map { text throws(ServeConfig.Invalid) in
                guard let network = AddressPolicy.network(text) else {
                    throw given.invalid("takes networks like 10.1.2.0/24 or fd00::/8, not '\(text)'")
                }
                return network
            }
        } show: { config in
            config.allowNetworks.isEmpty
                ? nil
                : config.allowNetworks.map { IPAddress.text($0.bytes) + "/\($0.prefix)" }.joined(separator: ",")
        },
        text(
            "proxy", "URL",
            help: "proxy of downloads whose own and category's name none: `http://`, `https://`, "
                + "`socks4a://`, `socks5://` or `socks5h://`, with `user:password@` when it asks; `none` for direct",
            settings: "proxy", sample: "socks5h://127.0.0.1:1080"
        ) { given, config throws(ServeConfig.Invalid) in
            switch ProxyChoice.parse(given.text) {
            case .success(let choice): config.engine.proxy = choice == .direct ? nil : choice
            case .failure(let problem): throw given.invalid(problem.message)
            }
        } show: {
            $0.engine.proxy?.shown
        },
        list(
            "no-proxy", "HOSTS", help: "hosts, `.domains` and networks reached directly whatever the proxy",
            sample: ".example.com,10.0.0.0/8"
        ) { given, config throws(ServeConfig.Invalid) in
            config.noProxy = given.list
            config.noProxyLabel = given.label
        } show: {
            $0.noProxy.isEmpty ? nil : $0.noProxy.joined(separator: ",")
        },
        toggle(
            "proxy-from-env",
            help: "read `http_proxy`, `https_proxy`, `all_proxy` and `no_proxy` for downloads "
                + "no other setting gives a proxy; otherwise they are ignored", \.proxyFromEnvironment),
        text("webhook-proxy", "URL", help: "proxy of webhook deliveries", sample: "http://127.0.0.1:3128") {
            given, config throws(ServeConfig.Invalid) in
            guard !ASCII.equalsIgnoringCase(given.text, "none") else { return config.engine.webhookProxy = nil }
            switch ProxyServer.parse(given.text) {
            case .success(let server): config.engine.webhookProxy = server
            case .failure(let problem): throw given.invalid(problem.message)
            }
        } show: {
            $0.engine.webhookProxy?.shown
        },
        text(
            "user-agent", "TEXT", shown: "`haul/VERSION`", help: "User-Agent of downloads that name none",
            sample: "fetcher/2"
        ) { given, config throws(ServeConfig.Invalid) in
            guard !given.text.isEmpty, given.text.utf8.count <= 1024, HTTPField.isValue(given.text) else {
                throw given.invalid("must be 1 to 1024 bytes without control characters")
            }
            config.engine.userAgent = given.text
        } show: {
            $0.engine.userAgent
        },
        readable(
            "netrc-file", help: "a .netrc giving origins credentials, for downloads that carry none",
            \.engine.netrcFile),
        readable(
            "ssh-key",
            help: "the private key SFTP logs in with (its .pub beside it if there), for downloads "
                + "without a password; never given through the API", \.engine.sshKey),
        readable(
            "ssh-known-hosts",
            help: "OpenSSH known_hosts SFTP host keys must be in, unless a download pins "
                + "`host_key`", \.engine.sshKnownHosts),
    ]

    // MARK: what it says

    static let logging: [ServerOption] = [
        text("log-level", "LEVEL", default: "info", help: "debug, info, warning or error", sample: "debug") {
            given, config throws(ServeConfig.Invalid) in
            let levels: [String: Logger.Level] = ["debug": .debug, "info": .info, "warning": .warning, "error": .error]
            guard let level = levels[given.text.lowercased()] else {
                throw given.invalid("must be debug, info, warning or error, not '\(given.text)'")
            }
            config.logLevel = level
        } show: {
            ["debug", "info", "warning", "error"][$0.logLevel.rawValue]
        },
        text(
            "log-format", "FORMAT", default: "text",
            help: "`text` (logfmt-style key=value) or `json`, one object "
                + "per line, on standard error", sample: "json"
        ) { given, config throws(ServeConfig.Invalid) in
            guard let format = Logger.Format(rawValue: given.text.lowercased()) else {
                throw given.invalid("must be text or json, not '\(given.text)'")
            }
            config.logFormat = format
        } show: {
            $0.logFormat.rawValue
        },
        toggle(
            "check",
            help: "check the options (flags, environment, config file), print what they set, one "
                + "`name = value` a line, and exit", \.check),
    ]
}
