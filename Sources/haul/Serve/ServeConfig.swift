import HaulAPI
import HaulCore
import Glibc
import HaulLoop

/// `haul serve`'s configuration, as `ServerOptions` set it from the config file, the environment and the flags
/// (each later one winning), into the parts of the server they configure: the engine's, the event streams', the
/// API's limits, the connections' policy. `main` hands those parts over as they are.
struct ServeConfig {
    var configPath: String?
    var listen = ListenAddress(host: "127.0.0.1", port: 8080)
    /// A second address serving the same API, for aria2 clients that expect port 6800 (`--rpc-listen`).
    var rpcListen: ListenAddress?
    /// A third address serving the same API, for qBittorrent clients that expect port 8080 (`--qbittorrent-listen`).
    var qbittorrentListen: ListenAddress?
    var downloadDir = ""
    /// Where categories' completed folders are; nil: under the download directory.
    var completedRoot: String?
    /// A folder whose lists of links (`*.txt`) are added as they are dropped there.
    var watchDir: String?
    var dataDir = ""
    var store: String?
    var node: String?
    /// The engine's settings; its download root is set from `downloadDir` at start, its address policy, no-proxy
    /// list and environment proxies from the options below once they are all read.
    var engine = EngineConfig(downloadRoot: "")
    var events = EventStreamConfig()
    var limits = APILimits()
    var connectionPolicy = ConnectionPolicy()
    var httpTimeout = 60
    /// Event loops (`--threads`); nil for one per core.
    var threads: Int?
    var aria2 = Aria2Config()
    var qbittorrent = QBittorrentConfig()
    var token: String?
    var allowUnauthenticated = false
    var allowedHosts: [String] = []
    var corsOrigins: [String] = []
    var denyPrivateNetworks = false
    var allowNetworks: [(bytes: [UInt8], prefix: Int)] = []
    var noProxy: [String] = []
    var noProxyLabel = "--no-proxy"
    var proxyFromEnvironment = false
    var logLevel = Logger.Level.info
    var logFormat = Logger.Format.text
    /// `--check`: print what the options set, and exit.
    var check = false

    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    /// Options only the config file may give: the programs hooks run.
    static let fileOnly: Set<String> = ["on-complete", "on-failed", "hls-remux"]

    /// The flags as the command-line reader takes them.
    static let known: [FlagParser.Flag] = ServerOptions.all.map {
        FlagParser.Flag(name: $0.name, takesValue: $0.placeholder != nil)
    }

    static var usage: String {
        (["usage: haul serve [options]"] + ServerOptions.all.flatMap(\.usageLines)).joined(separator: "\n")
    }

    /// README's table of the options.
    static var markdown: String {
        (["| Flag | Environment | Default | What it does |", "|---|---|---|---|"]
            + ServerOptions.all.map(\.markdownRow)).joined(separator: "\n")
    }

    /// `--check`'s answer: every option as it is set, `name = value`.
    var checked: String {
        ServerOptions.all.compactMap { option in option.show(self).map { "\(option.name) = \($0)" } }
            .joined(separator: "\n")
    }

    static func parse(_ arguments: [String], environment: [String: String]) throws -> ServeConfig {
        // Lowest first: the defaults, the config file, the environment, the flags. Each value remembers how its
        // user wrote its name, which is how an error names it.
        var values: [String: (text: String, label: String)] = [:]
        for option in ServerOptions.all {
            if let value = option.defaultValue { values[option.name] = (value, "--" + option.name) }
        }
        let flags = try flagValues(arguments)
        var config = ServeConfig()
        config.configPath = flags.last(where: { $0.name == "config" })?.value ?? environment["HAUL_CONFIG"]
        if let path = config.configPath {
            for entry in try ConfigFile.read(path) {
                let name = entry.name.replacing("_", with: "-")
                if ServeConfig.fileOnly.contains(name) {
                    try config.hook(name, entry)
                } else {
                    guard ServerOptions.byName[name] != nil, name != "config" else {
                        throw Invalid(description: "\(entry.place): no such option (haul serve --help lists them)")
                    }
                    values[name] = (entry.value, entry.place)
                }
            }
        }
        for option in ServerOptions.all {
            if let value = environment[option.variable] { values[option.name] = (value, option.variable) }
        }
        for (name, value) in flags { values[name] = (value, "--" + name) }
        // Every value wrong is said at once: fixing one at a time and starting again would find the next.
        var problems: [String] = []
        for option in ServerOptions.all where option.name != "config" {
            guard let (text, label) = values[option.name] else { continue }
            do {
                try option.take(text, label: label, into: &config)
            } catch {
                problems.append(error.description)
            }
        }
        if !problems.isEmpty { throw Invalid(description: problems.joined(separator: "; ")) }
        try config.finish(environment: environment, label: { values[$0]?.label ?? "--" + $0 })
        return config
    }

    /// The flags given, by name, in order: a flag given twice counts last, as a later line of a file would.
    private static func flagValues(_ arguments: [String]) throws -> [(name: String, value: String)] {
        do {
            let parsed = try FlagParser(arguments, known: known, repeats: { _ in true }, checkSwitches: false)
            if let stray = parsed.positional.first { throw Invalid(description: "unexpected argument '\(stray)'") }
            return parsed.flags
        } catch let failure as FlagParser.Failure {
            switch failure {
            case .unknown(let written) where written.hasPrefix("--"):
                throw Invalid(description: "unknown option \(written)")
            case .unknown(let written): throw Invalid(description: "unexpected argument '\(written)'")
            case .needsValue(let name): throw Invalid(description: "--\(name) needs a value")
            case .notASwitchWord, .givenTwice: throw Invalid(description: "\(failure)")
            }
        }
    }

    /// A hook from the config file: a program to run, named by the operator's file as an argument list, never by
    /// a flag, the environment or a client.
    private mutating func hook(_ name: String, _ entry: ConfigFile.Entry) throws(Invalid) {
        let argv = entry.items ?? [entry.value]
        guard argv.first?.hasPrefix("/") == true else {
            throw Invalid(
                description: "\(entry.place) must be a list whose first item is the program's absolute "
                    + "path, like [\"/usr/local/bin/notify\", \"--done\"] (run without a shell)")
        }
        switch name {
        case "on-complete": engine.hooks.onComplete = argv
        case "on-failed": engine.hooks.onFailed = argv
        default:
            guard argv.contains("{input}"), HookConfig.remuxExtension(argv) != nil else {
                throw Invalid(
                    description: "\(entry.place) must name {input} (the joined file) and {output.EXT} (the new one, "
                        + "its extension EXT), like [\"/usr/bin/ffmpeg\", \"-i\", \"{input}\", \"-c\", \"copy\", "
                        + "\"{output.mp4}\"]")
            }
            engine.hooks.remux = argv
        }
    }

    /// What depends on several options: the API's deadline, the address policy, the proxies of the environment and
    /// the no-proxy list, and whether listening beyond loopback is allowed.
    private mutating func finish(environment: [String: String], label: (String) -> String) throws {
        if events.heartbeat >= Double(httpTimeout) {
            throw Invalid(
                description: "\(label("sse-heartbeat")) must be shorter than \(label("http-timeout")), "
                    + "or idle streams are cut")
        }
        connectionPolicy.requestDeadline = Double(httpTimeout)
        if denyPrivateNetworks { engine.addressPolicy = AddressPolicy(exceptions: allowNetworks) }
        var bypass = noProxy
        if proxyFromEnvironment {
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
                case .success(let server): engine.environmentProxies[scheme] = server
                case .failure(let problem):
                    throw Invalid(description: "\(name) in the environment (--proxy-from-env) \(problem.message)")
                }
            }
            if let text = named("no_proxy") { bypass += text.split(separator: ",").map(String.init) }
        }
        switch NoProxy.parse(bypass) {
        case .success(let noProxy): engine.noProxy = noProxy
        case .failure(let problem): throw Invalid(description: "\(noProxyLabel) \(problem.message)")
        }
        for address in extraListen + [listen] where !ServeConfig.isLoopback(address.host) {
            guard token != nil || allowUnauthenticated else {
                throw Invalid(
                    description: "refusing to listen on \(address.host) without a token: anyone who can "
                        + "reach it could make this machine download; set HAUL_TOKEN, or pass --allow-unauthenticated")
            }
        }
    }

    /// The Host names the server answers to: those given, else on loopback the loopback names, else any (nil).
    var hostAllowlist: Set<String>? {
        if !allowedHosts.isEmpty {
            return Set(allowedHosts).union(isLoopback ? AccessPolicy.loopbackHosts : [])
        }
        return isLoopback ? AccessPolicy.loopbackHosts : nil
    }

    var isLoopback: Bool {
        ([listen] + extraListen).allSatisfy { ServeConfig.isLoopback($0.host) }
    }

    /// The addresses besides `listen` serving the same API (aria2's and qBittorrent's ports).
    /// The event loops to run: `--threads`, or one per core the process may run on.
    var effectiveThreads: Int { threads ?? max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    var extraListen: [ListenAddress] { [rpcListen, qbittorrentListen].compactMap { $0 } }

    static func isLoopback(_ host: String) -> Bool { host == "localhost" || host == "::1" || host.hasPrefix("127.") }
}
