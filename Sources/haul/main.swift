import FoundationEssentials
import Glibc
import HaulAPI
import HaulCore
import HaulLoop

/// `haul serve`: the REST API (evhttp) and the transfers (libcurl) on one event loop.
func serve(_ arguments: [String]) -> Int32 {
    if arguments.contains("--help") || arguments.contains("-h") {
        print(ServeConfig.usage)
        return 0
    }
    // For the tests that hold README and every source of each option to the table: its rows, as a table and as data.
    if arguments == ["--help-markdown"] {
        print(ServeConfig.markdown)
        return 0
    }
    if arguments == ["--describe-options"] {
        print(
            JSONValue.array(
                ServerOptions.all.map { option in
                    .object([
                        ("name", .string(option.name)), ("variable", .string(option.variable)),
                        ("switch", .bool(option.placeholder == nil)), ("sample", .string(option.sample)),
                        ("shown", .string(option.sampleShown ?? option.sample)),
                        ("settings", JSONValue(option.settings)),
                    ])
                }
            ).serialized())
        return 0
    }
    let config: ServeConfig
    do {
        config = try ServeConfig.parse(arguments, environment: ProcessInfo.processInfo.environment)
    } catch {
        writeError("haul: \(error) (haul serve --help lists the options)\n")
        return 2
    }
    if config.check {
        print(config.checked)
        return 0
    }
    let logBuffer = LogBuffer()
    let log = Logger(minimum: config.logLevel, format: config.logFormat, buffer: logBuffer)
    defer { logBuffer.flush() }
    // A client that disconnects mid-reply must not kill the server.
    signal(SIGPIPE, SIG_IGN)
    raiseOpenFileLimit()
    do {
        let downloadRoot = Files.absolute(config.downloadDir)
        let dataDir = Files.absolute(config.dataDir)
        try ServerDirectories.prepare(
            downloadRoot, role: "the download directory",
            option: "--download-dir, HAUL_DOWNLOAD_DIR", private: false)
        let completedRoot = config.completedRoot.map(Files.absolute)
        let watchDir = config.watchDir.map(Files.absolute)
        if let watchDir {
            try ServerDirectories.prepare(
                watchDir, role: "the watched folder", option: "--watch-dir, HAUL_WATCH_DIR",
                private: false)
        }
        if let completedRoot {
            try ServerDirectories.prepare(
                completedRoot, role: "the completed root",
                option: "--completed-root, HAUL_COMPLETED_ROOT", private: false)
        }
        if config.store == nil {
            try ServerDirectories.prepare(
                dataDir, role: "the data directory", option: "--data-dir, HAUL_DATA_DIR",
                private: true)
            try ServerDirectories.checkDatabase(dataDir + "/haul.sqlite", option: "--data-dir, HAUL_DATA_DIR")
        }
        let loop = try EventLoop()
        // Log lines go out once per loop turn: a timer of no delay fires after the events of the current turn.
        let logFlush = LoopTimer(loop: loop, delay: 0) { logBuffer.flush() }
        logBuffer.schedule = {
            guard loop.inLoopThread else { return false }
            if !logFlush.isPending { logFlush.start() }
            return true
        }
        defer { logBuffer.schedule = nil }
        let node = config.node ?? hostName()
        let store =
            try config.store.map { try DownloadStore(postgres: $0, node: node) }
            ?? DownloadStore(path: dataDir + "/haul.sqlite")
        // The options set each part's configuration; what is worked out at start goes in here.
        var engineConfig = config.engine
        engineConfig.downloadRoot = downloadRoot
        engineConfig.completedRoot = completedRoot
        // A crash test's point of no return (FileMove): never set in production.
        engineConfig.crashAt = ProcessInfo.processInfo.environment["HAUL_CRASH_AT"]
        engineConfig.node = node
        // From two threads, transfers run on loops of their own beside the engine's and the API's: one less than
        // asked, as the engine's thread is busy with what they hand it.
        engineConfig.transferLoops = config.effectiveThreads > 1 ? config.effectiveThreads - 1 : 0
        let engine = try Engine(loop: loop, store: store, config: engineConfig, log: log)
        let access = AccessPolicy(
            token: config.token, allowedHosts: config.hostAllowlist,
            corsOrigins: Set(config.corsOrigins))
        let api = API(
            engine: engine, loop: loop, events: config.events, access: access, limits: config.limits,
            aria2: config.aria2, qbittorrent: config.qbittorrent, log: log)
        let connections = config.connectionPolicy
        // From two threads, the clients' connections are read and written on a loop of their own; the engine's
        // loop answers them (ForwardedExchange).
        let apiThread = config.effectiveThreads > 1 ? try LoopThread(name: "haul-api") : nil
        if apiThread != nil { loop.prioritizeInbox(.transfer) }
        let server = try HTTPServer(
            loop: apiThread?.loop ?? loop, handledOn: loop, timeout: Int32(config.httpTimeout),
            connections: connections, answeredHere: apiThread.map { api.readsBeside(on: $0.loop) }
        ) { exchange in
            api.serve(exchange.message, receivedAt: exchange.receivedAt) { result in
                switch result {
                case .response(let response):
                    exchange.respond(response)
                case .eventStream(let request):
                    api.attach(HTTPEventSink(exchange: exchange, headers: request.headers), for: request)
                case .fileStream(let request):
                    api.attach(HTTPByteSink(exchange: exchange), for: request)
                case .webSocket(let upgrade):
                    if let socket = exchange.upgrade(headers: upgrade.headers) {
                        api.attach(socket, for: upgrade)
                    }
                case .pending:
                    // Worked through a slice per loop turn: the response comes through this closure when done.
                    break
                }
            }
        }
        let port = try server.bind(host: config.listen.host, port: config.listen.port)
        if let rpc = config.rpcListen {
            let rpcPort = try server.bind(host: rpc.host, port: rpc.port)
            log.info("aria2 JSON-RPC also listening", ["http.address": "\(rpc.host):\(rpcPort)"])
        }
        if let qbittorrent = config.qbittorrentListen {
            let qbittorrentPort = try server.bind(host: qbittorrent.host, port: qbittorrent.port)
            log.info(
                "qBittorrent Web API also listening", ["http.address": "\(qbittorrent.host):\(qbittorrentPort)"])
        }
        try engine.start()
        if let watchDir {
            try api.watch(folder: watchDir)
            log.info("watching for lists of links", ["folder": watchDir])
        }
        Memory.returnFreePages()
        let clock = LoopClock(loop: loop)
        var shutdownTimer: ClockTimer?
        api.onShutdown = {
            // After the answer has been written.
            shutdownTimer = clock.after(0.2) {
                log.info("shutting down (by request)")
                engine.shutdown()
                loop.stop()
            }
        }
        for signalNumber in [SIGTERM, SIGINT] {
            signal(signalNumber, SIG_IGN)
            loop.onSignal(signalNumber) {
                log.info("shutting down")
                engine.shutdown()
                loop.stop()
            }
        }
        let host = config.listen.host.contains(":") ? "[\(config.listen.host)]" : config.listen.host
        // Scripts and tests read the address from this line (useful with port 0).
        printOutput("haul listening on http://\(host):\(port)")
        log.info(
            "listening",
            [
                "http.address": "\(host):\(port)", "download.root": downloadRoot,
                "store": store.location,
            ])
        if let apiThread {
            // Once the engine's loop runs (its thread known to it): what the API's loop posts waits there till then.
            loop.whenRunning {
                do { try apiThread.start() } catch {
                    log.error("cannot start the API's thread: \(error)")
                    loop.stop()
                }
            }
        }
        loop.run()
        // The API's loop stops first (what it still posts to the engine's is never run), then everything is torn
        // down in order while the event bases still exist: open event streams are ended before their connections
        // are freed.
        apiThread?.stop()
        // What the API's loop forwarded as the engine's stopped is never answered: let go, with what it holds.
        if apiThread != nil { loop.closeInbox() }
        server.close()
        withExtendedLifetime((server, api, engine, store, shutdownTimer, apiThread)) {}
        return 0
    } catch {
        log.error("cannot start: \(error)")
        return 1
    }
}

/// The machine's name: a node's default name in a shared store.
func hostName() -> String {
    var buffer = [CChar](repeating: 0, count: 256)
    guard gethostname(&buffer, buffer.count - 1) == 0 else { return "haul" }
    let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return ClusterMembership.isValidNodeName(name) ? name : "haul"
}

/// Every event-stream client holds a socket: allow as many as the hard limit permits.
func raiseOpenFileLimit() {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
    limit.rlim_cur = limit.rlim_max
    _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "serve" { exit(serve(Array(arguments.dropFirst()))) }
exit(ClientCommand.main(arguments, environment: ProcessInfo.processInfo.environment))
