import FoundationEssentials
import HaulCore
import HaulLoop

/// The aria2-compatible front's settings.
public struct Aria2Config: Sendable {
    /// `aria2.shutdown` and `aria2.forceShutdown` stop the server (`--rpc-allow-shutdown`); refused otherwise.
    public var allowShutdown = false

    public init(allowShutdown: Bool = false) { self.allowShutdown = allowShutdown }
}

/// aria2's JSON-RPC (1.36) over Haul's operations: the methods AriaNg, the browser extensions and aria2p call,
/// with aria2's answer shapes and errors, and the same validation and confinement as REST (a download is made
/// through the option table; `dir` stays under the root). Transport-free: it takes a request's JSON and gives the
/// answer's; POST, GET (JSONP) and WebSocket carry them. Confined to the loop thread.
final class Aria2RPC {
    /// An error as aria2 answers it: `{"code": 1, "message": "..."}`.
    struct RPCError: Error {
        let code: Int
        let message: String

        init(_ message: String, code: Int = 1) {
            self.code = code
            self.message = message
        }

        static let unauthorized = RPCError("Unauthorized")

        var json: JSONValue { .object([("code", .number(Double(code))), ("message", .string(message))]) }
    }

    /// The version clients see: aria2's, whose feature set they check (AriaNg, aria2p), and Haul's beside it.
    static let aria2Version = "1.36.0"
    /// The most calls one batch or multicall may hold.
    static let maxBatch = 1000

    /// The operations for the server's own token ...
    let base: Operations
    /// ... and for the caller of the method being answered (its token's view: set as each call is admitted).
    private var operations: Operations
    private let gate: AccessGate
    private let config: Aria2Config
    private let gids = Aria2GIDs()
    /// Downloads removed through this front, as aria2 keeps them (`status: removed`) until a purge: their last
    /// status, newest last, at most `maxRemoved` (aria2's --max-download-result).
    private var removed: [(gid: String, owner: String?, status: [(String, JSONValue)])] = []
    static let maxRemoved = 1000
    /// `getSessionInfo`: one per process, as aria2's.
    let sessionID: String
    /// The WebSockets open, each told aria2's notifications about the downloads the token it proved sees: at its
    /// handshake (`?token=`, `Authorization: Bearer`) or by its last admitted call. On a server with a token, a
    /// socket that proved none hears nothing.
    private var sockets: [ObjectIdentifier: (socket: WebSocketConnection, caller: Caller?)] = [:]
    /// The socket whose message is being answered.
    private var answering: ObjectIdentifier?
    /// The aria2 status last told of each download that changed state while a socket was open: a start is told
    /// once however many active states it passes through, a removal is a stop only when it had not finished.
    private var lastStatus: [String: String] = [:]
    /// While a socket's call is answered: notifications wait in `held` until its answer has gone.
    private var holding = false
    private var held: [(message: [UInt8], owner: String?)] = []
    /// The token that added each download a notification may be about (kept for its removal, when it is gone).
    private var owners: [String: String?] = [:]
    /// A socket whose client leaves this much unread is closed (a slow reader costs no more than this).
    static let maxQueuedBytes = 4 << 20
    /// Stops the server soon (`shutdown` when allowed), after the answer is written.
    var onShutdown: (() -> Void)?

    private let log: Logger?

    init(operations: Operations, gate: AccessGate, config: Aria2Config, log: Logger? = nil) {
        self.log = log
        base = operations
        self.operations = operations
        self.gate = gate
        self.config = config
        var generator = SystemRandomNumberGenerator()
        sessionID = (0..<20).map { _ in
            let byte = UInt8.random(in: 0...255, using: &generator)
            return String(byte >> 4, radix: 16) + String(byte & 15, radix: 16)
        }.joined()
    }

    /// What the server's options in aria2's names are read from, for the caller.
    private var globalSource: Aria2GlobalOptions.Source {
        Aria2GlobalOptions.Source(settings: operations.settings, config: base.config, root: callersRoot)
    }
    private var root: String { base.config.downloadRoot }
    /// The folder the caller's downloads land under: its token's root, else the download root.
    private var callersRoot: String {
        guard let folder = operations.caller.token?.root else { return root }
        return root.hasSuffix("/") ? root + folder : root + "/" + folder
    }

    // MARK: requests

    /// The answer to a request body: one response, or an array for a batch. A body that is not JSON is answered
    /// -32700 as aria2 does.
    func answer(_ body: [UInt8], caller: Request) -> JSONValue {
        let request: JSONValue
        do {
            request = try JSONValue.parse(body)
        } catch {
            return response(id: .null, error: RPCError("Parse error.", code: -32700))
        }
        return answer(request, caller: caller)
    }

    func answer(_ request: JSONValue, caller: Request) -> JSONValue {
        guard case .array(let calls) = request else { return answerOne(request, caller: caller) }
        guard calls.count <= Aria2RPC.maxBatch else {
            return response(id: .null, error: RPCError("a batch holds at most \(Aria2RPC.maxBatch) calls",
                                                       code: -32600))
        }
        return .array(calls.map { answerOne($0, caller: caller) })
    }

    private func answerOne(_ request: JSONValue, caller: Request) -> JSONValue {
        guard case .object = request, let method = request["method"]?.stringValue else {
            return response(id: request["id"] ?? .null, error: RPCError("Invalid Request.", code: -32600))
        }
        let id = request["id"] ?? .null
        var params: [JSONValue] = []
        switch request["params"] {
        case .array(let items)?: params = items
        case nil, .null?: break
        default: return response(id: id, error: RPCError("Invalid params.", code: -32602))
        }
        do {
            let result = try call(method, params, caller: caller)
            // A multicall's results were counted one by one.
            return response(id: id, result: method == "system.multicall" ? result : try caller.spend(result))
        } catch {
            return response(id: id, error: error)
        }
    }

    private func response(id: JSONValue, result: JSONValue) -> JSONValue {
        .object([("id", id), ("jsonrpc", .string("2.0")), ("result", result)])
    }

    private func response(id: JSONValue, error: RPCError) -> JSONValue {
        .object([("id", id), ("jsonrpc", .string("2.0")), ("error", error.json)])
    }

    // MARK: WebSocket

    var socketCount: Int { sockets.count }

    /// Answers each text message on `socket` (a call or a batch, as a POST body) and sends it aria2's notifications;
    /// `caller` is who its handshake proved it is, if anyone.
    func attach(_ socket: WebSocketConnection, caller proved: Caller?) {
        let key = ObjectIdentifier(socket)
        sockets[key] = (socket, proved)
        socket.onText = { [unowned self, unowned socket] text in
            // Notifications the call itself causes (a start, on adding) follow its answer, as aria2 sends them.
            self.holding = true
            self.answering = key
            let answer = self.answer(Array(text.utf8), caller: Request(address: socket.peer, mayChange: true))
            self.answering = nil
            self.holding = false
            self.send(answer.serializedBytes(), to: socket)
            let held = self.held
            self.held.removeAll()
            for (message, owner) in held { self.notify(message, about: owner) }
        }
        socket.onClose = { [weak self] in
            self?.sockets[key] = nil
            if self?.sockets.isEmpty == true {
                self?.lastStatus.removeAll()
                self?.owners.removeAll()
            }
        }
    }

    private func send(_ bytes: [UInt8], to socket: WebSocketConnection) {
        guard socket.queuedBytes <= Aria2RPC.maxQueuedBytes else {
            return socket.close(code: 1008, reason: "the client does not read what it is sent")
        }
        socket.send(bytes)
    }

    /// Tells the sockets what aria2 would: a download started, paused, stopped (removed), completed or failed.
    func engineChanged(_ change: EngineChange) {
        guard !sockets.isEmpty else { return }
        let id: String
        var notification: String?
        switch change {
        case .created: return
        case .updated(let changed, let stateChanged):
            guard stateChanged, let snapshot = base.snapshot(changed) else { return }
            id = changed
            owners[id] = snapshot.download.owner
            let now = Aria2Status.status(snapshot.download.state)
            let before = lastStatus.updateValue(now, forKey: id)
            guard now != before else { return }
            switch now {
            case "active": notification = "aria2.onDownloadStart"
            case "paused": notification = "aria2.onDownloadPause"
            case "complete": notification = "aria2.onDownloadComplete"
            case "error": notification = "aria2.onDownloadError"
            default: return
            }
        case .removed(let removed, let last):
            id = removed
            lastStatus.removeValue(forKey: id)
            defer { owners.removeValue(forKey: id) }
            // aria2 tells of a stop only for a download that had not finished: forgetting a result (a purge,
            // removeDownloadResult, DELETE of a finished one) is no stop.
            guard !last.isFinished else { return }
            notification = "aria2.onDownloadStop"
        }
        guard let notification else { return }
        let message = JSONValue.object([
            ("jsonrpc", .string("2.0")), ("method", .string(notification)),
            ("params", .array([.object([("gid", .string(Aria2GIDs.gid(of: id)))])])),
        ]).serializedBytes()
        let owner = owners[id] ?? nil
        if holding { held.append((message, owner)) } else { notify(message, about: owner) }
    }

    /// Sends a notification about a download `owner` added to the sockets that may hear of it: those whose token
    /// sees it; on a server without a token, also those that proved none (aria2p listens without calling).
    private func notify(_ message: [UInt8], about owner: String?) {
        for (socket, caller) in sockets.values {
            if let caller {
                guard caller.confinedTo == nil || caller.confinedTo == owner else { continue }
            } else if gate.hasToken {
                continue
            }
            send(message, to: socket)
        }
    }

    /// Closes the sockets whose proof was token `id` (revoked or expired): they hear nothing more.
    func closeSockets(ofToken id: String) {
        for (socket, caller) in sockets.values where caller?.token?.id == id {
            socket.close(code: 1008, reason: "the token is revoked or expired")
        }
    }

    /// The scoped tokens sockets proved, to check that each still stands.
    var socketTokens: Set<String> { Set(sockets.values.compactMap { $0.caller?.token?.id }) }

    // MARK: methods

    /// Every method, with the operation it is (the scope it needs) and whether it changes anything.
    static let methods: [String: Operation] = [
        "aria2.addUri": .addDownloads, "aria2.addTorrent": .addDownloads, "aria2.addMetalink": .addDownloads,
        "aria2.remove": .removeDownload, "aria2.forceRemove": .removeDownload,
        "aria2.pause": .changeDownload, "aria2.forcePause": .changeDownload,
        "aria2.pauseAll": .actOnDownloads, "aria2.forcePauseAll": .actOnDownloads,
        "aria2.unpause": .changeDownload, "aria2.unpauseAll": .actOnDownloads,
        "aria2.tellStatus": .getDownload, "aria2.getUris": .getDownload, "aria2.getFiles": .getDownload,
        "aria2.getPeers": .getDownload, "aria2.getServers": .getDownload,
        "aria2.tellActive": .listDownloads, "aria2.tellWaiting": .listDownloads, "aria2.tellStopped": .listDownloads,
        "aria2.changePosition": .changeDownload, "aria2.changeUri": .changeDownload,
        "aria2.getOption": .getDownload, "aria2.changeOption": .changeDownload,
        "aria2.getGlobalOption": .getSettings, "aria2.changeGlobalOption": .changeSettings,
        "aria2.getGlobalStat": .stats, "aria2.purgeDownloadResult": .removeDownloads,
        "aria2.removeDownloadResult": .removeDownload, "aria2.getVersion": .stats, "aria2.getSessionInfo": .stats,
        "aria2.shutdown": .changeSettings, "aria2.forceShutdown": .changeSettings, "aria2.saveSession": .stats,
        "system.multicall": .stats, "system.listMethods": .describeAPI, "system.listNotifications": .describeAPI,
    ]

    static let notifications = ["aria2.onDownloadStart", "aria2.onDownloadPause", "aria2.onDownloadStop",
                                "aria2.onDownloadComplete", "aria2.onDownloadError", "aria2.onBtDownloadComplete"]

    /// Calls `method`: its token checked (aria2's methods, when the server has one), then the method.
    func call(_ method: String, _ given: [JSONValue], caller: Request, nested: Bool = false) throws(RPCError)
        -> JSONValue {
        try caller.startCall()
        guard let operation = Aria2RPC.methods[method] else { throw RPCError("No such method: \(method)") }
        var params = given
        let presented = params.first?.stringValue.flatMap { $0.hasPrefix("token:") ? String($0.dropFirst(6)) : nil }
        if presented != nil { params.removeFirst() }
        if method.hasPrefix("aria2.") {
            guard let admitted = gate.admitsSecret(presented, address: caller.address,
                                                   now: ProcessInfo.processInfo.systemUptime) else {
                throw .unauthorized
            }
            let proved = presented != nil && gate.hasToken
            if proved { caller.proved() }
            if caller.needsToken, !proved {
                throw RPCError(gate.hasToken ? "Unauthorized" : "Unauthorized: a call a web page may have made "
                    + "(JSONP, a GET from another site, Origin null) needs the token, and this server has none "
                    + "(start it with --token)")
            }
            // Stopping the server is the admin's, as REST's tokens and webhooks are.
            let needed = method.hasSuffix("hutdown") ? .admin : operation.scope
            if let needed, needed > admitted.scope {
                throw RPCError("the token has the \(admitted.scope.name) scope; \(method) needs \(needed.name)")
            }
            operations = base.acting(as: admitted)
            if let answering { sockets[answering]?.caller = admitted }
            if operation.changesState, let log, log.minimum <= .info {
                log.info("rpc call", admitted.logFields.merging(["rpc.method": method, "client.address": caller.address])
                    { first, _ in first })
            }
        }
        if operation.changesState || method == "aria2.shutdown" || method == "aria2.forceShutdown",
           !caller.mayChange, !(presented != nil && gate.hasToken) {
            throw RPCError("\(method) changes what the server holds: send it by POST or WebSocket (by GET only with "
                + "the server's token)")
        }
        let p = Params(method: method, values: params)
        switch method {
        case "aria2.addUri": return try addURI(p)
        case "aria2.addTorrent", "aria2.addMetalink":
            throw RPCError("Haul fetches HTTP(S), FTP(S) and SFTP: it has no BitTorrent or Metalink")
        case "aria2.remove", "aria2.forceRemove": return try remove(try p.gid(0))
        case "aria2.pause", "aria2.forcePause": return try pause(try p.gid(0))
        case "aria2.unpause": return try unpause(try p.gid(0))
        case "aria2.pauseAll", "aria2.forcePauseAll":
            act(.pause, states: [.queued, .probing, .downloading, .verifying])
            return .string("OK")
        case "aria2.unpauseAll":
            act(.resume, states: [.paused])
            return .string("OK")
        case "aria2.tellStatus": return try status(of: try p.gid(0), keys: try p.keys(1))
        case "aria2.getUris": return Aria2Status.uris(try snapshot(try p.gid(0)).download)
        case "aria2.getFiles": return .array([Aria2Status.file(try snapshot(try p.gid(0)).download, root: root,
                                                             completedRoot: base.config.completedRoot)])
        case "aria2.getPeers":
            _ = try snapshot(try p.gid(0))
            return .array([])
        case "aria2.getServers": return try servers(try p.gid(0))
        case "aria2.tellActive":
            let keys = try p.keys(0)
            let items = operations.page(query(states: [.probing, .downloading, .verifying], order: .created, at: 0,
                                              limit: DownloadQuery.limits.upperBound)).downloads
            return .array(items.map { status($0, keys: keys) })
        case "aria2.tellWaiting":
            return try list(waiting: true, offset: try p.int(0), count: try p.int(1), keys: try p.keys(2))
        case "aria2.tellStopped":
            return try list(waiting: false, offset: try p.int(0), count: try p.int(1), keys: try p.keys(2))
        case "aria2.changePosition": return try changePosition(try p.gid(0), try p.int(1), try p.string(2))
        case "aria2.changeUri":
            _ = try snapshot(try p.gid(0))
            throw RPCError("Haul keeps a download's sources as they were added: remove it and add it again")
        case "aria2.getOption":
            return Aria2Options.download(try snapshot(try p.gid(0)).download, root: root, global: globalSource)
        case "aria2.changeOption": return try changeOption(try p.gid(0), try p.object(1))
        case "aria2.getGlobalOption": return Aria2GlobalOptions.json(globalSource)
        case "aria2.changeGlobalOption": return try changeGlobalOption(try p.object(0))
        case "aria2.getGlobalStat": return globalStat()
        case "aria2.purgeDownloadResult": return purge()
        case "aria2.removeDownloadResult": return try removeResult(try p.gid(0))
        case "aria2.getVersion":
            return .object([("version", .string(Aria2RPC.aria2Version)),
                            ("enabledFeatures", .array(["Async DNS", "GZip", "HTTPS", "Message Digest", "SFTP"]
                                .map { .string($0) })),
                            ("haul", .string(HaulVersion.current))])
        case "aria2.getSessionInfo": return .object([("sessionId", .string(sessionID))])
        case "aria2.saveSession": return .string("OK")
        case "aria2.shutdown", "aria2.forceShutdown":
            guard config.allowShutdown, let onShutdown else {
                throw RPCError("shutdown is refused: start Haul with --rpc-allow-shutdown to allow it")
            }
            // The caller stops the server after this answer has gone out.
            onShutdown()
            return .string("OK")
        case "system.multicall":
            guard !nested else { throw RPCError("system.multicall cannot be nested") }
            return try multicall(p, caller: caller)
        case "system.listMethods": return .array(Aria2RPC.methods.keys.sorted().map { .string($0) })
        case "system.listNotifications": return .array(Aria2RPC.notifications.map { .string($0) })
        default: throw RPCError("No such method: \(method)")
        }
    }

    /// A method's positional parameters, read with aria2's complaints.
    struct Params {
        let method: String
        let values: [JSONValue]

        func value(_ index: Int) -> JSONValue? { index < values.count ? values[index] : nil }

        func gid(_ index: Int) throws(RPCError) -> String {
            guard let text = value(index)?.stringValue else { throw RPCError("GID is not provided.") }
            guard Aria2GIDs.isGID(text) else { throw RPCError("Invalid GID \(text)") }
            return text.lowercased()
        }

        func int(_ index: Int) throws(RPCError) -> Int {
            guard let number = value(index)?.integerValue else {
                throw RPCError("The parameter at \(index) has wrong type.")
            }
            return Int(number)
        }

        func string(_ index: Int) throws(RPCError) -> String {
            guard let text = value(index)?.stringValue else {
                throw RPCError("The parameter at \(index) has wrong type.")
            }
            return text
        }

        func object(_ index: Int) throws(RPCError) -> [(String, JSONValue)] {
            switch value(index) {
            case nil, .null?: return []
            case .object(let members)?: return members
            default: throw RPCError("The parameter at \(index) has wrong type.")
            }
        }

        /// `keys`: an array of strings, or absent for every key.
        func keys(_ index: Int) throws(RPCError) -> [String]? {
            switch value(index) {
            case nil, .null?: return nil
            case .array(let items)?: return items.compactMap(\.stringValue)
            default: throw RPCError("The parameter at \(index) has wrong type.")
            }
        }
    }

    // MARK: downloads

    private func idOf(_ gid: String) -> String? {
        // The GIDs of every download (the map is shared by every caller); what the caller sees is checked after.
        gids.id(of: gid, count: base.count, now: ProcessInfo.processInfo.systemUptime) {
            base.ids(matching: DownloadFilter())
        }
    }

    private func snapshot(_ gid: String) throws(RPCError) -> DownloadSnapshot {
        guard let id = idOf(gid), let snapshot = try? operations.get(id) else {
            throw RPCError("GID \(gid) is not found")
        }
        return snapshot
    }

    private func status(_ snapshot: DownloadSnapshot, keys: [String]?) -> JSONValue {
        Aria2Status.select(Aria2Status.json(snapshot, gid: Aria2GIDs.gid(of: snapshot.download.id), root: root,
                                            completedRoot: base.config.completedRoot),
                           keys: keys)
    }

    private func status(of gid: String, keys: [String]?) throws(RPCError) -> JSONValue {
        if let id = idOf(gid), let snapshot = try? operations.get(id) { return status(snapshot, keys: keys) }
        if let gone = removed.last(where: { $0.gid == gid && sees($0.owner) }) {
            return Aria2Status.select(gone.status, keys: keys)
        }
        throw RPCError("GID \(gid) is not found")
    }

    private func addURI(_ p: Params) throws(RPCError) -> JSONValue {
        guard case .array(let items)? = p.value(0), !items.isEmpty else {
            throw RPCError("URI is not provided.")
        }
        let uris = items.compactMap(\.stringValue)
        guard uris.count == items.count else { throw RPCError("URI must be a string.") }
        guard uris.count <= API.maxMirrors + 1 else {
            throw RPCError("at most \(API.maxMirrors + 1) URIs of one file")
        }
        var members: [(String, JSONValue)] = [("urls", .array(uris.map { .string($0) }))]
        let options = try p.object(1)
        do {
            // A token with a root: `dir` is taken under it, as it sees it (getGlobalOption's dir), and the engine
            // puts the download under that root.
            members += try Aria2Options.downloadMembers(options, root: callersRoot, sources: uris.count)
        } catch {
            throw RPCError(error.message)
        }
        // aria2's `gid`: the caller names the download's GID (16 hex digits, not all zero, not taken).
        var chosen: String?
        if let gid = options.last(where: { $0.0 == "gid" })?.1 {
            guard let text = gid.stringValue, Aria2GIDs.isGID(text), text != "0000000000000000",
                  let id = Aria2GIDs.id(forGID: text.lowercased()) else {
                throw RPCError("option gid must be 16 hex digits, not all zero")
            }
            guard idOf(text.lowercased()) == nil else { throw RPCError("GID \(text.lowercased()) is not unique.") }
            chosen = id
        }
        var body = RequestBody(members: members)
        var request = API.newDownload(&body)
        request.id = chosen
        if let first = body.errors.first {
            throw RPCError(body.errors.count == 1 ? "\(first.field): \(first.message)"
                : body.errors.map { "\($0.field): \($0.message)" }.joined(separator: "; "))
        }
        let added: DownloadSnapshot
        do {
            added = try operations.add(request).snapshot
        } catch {
            throw RPCError(Problem(error).detail)
        }
        gids.remember(added.download.id)
        if case .number? = p.value(2), let position = p.value(2)?.integerValue, added.download.isWaiting {
            _ = try? operations.move(added.download.id, .position(max(0, Int(position))))
        }
        return .string(Aria2GIDs.gid(of: added.download.id))
    }

    private func remove(_ gid: String) throws(RPCError) -> JSONValue {
        let snapshot = try snapshot(gid)
        guard !snapshot.download.state.isFinished else {
            throw RPCError("Active Download not found for GID#\(gid)")
        }
        var last = Aria2Status.json(snapshot, gid: gid, root: root, completedRoot: base.config.completedRoot)
        last = last.filter { !["status", "downloadSpeed", "connections", "errorCode", "errorMessage"].contains($0.0) }
            + [("status", .string("removed")), ("downloadSpeed", .string("0")), ("connections", .string("0")),
               ("errorCode", .string("31")), ("errorMessage", .string(""))]
        do {
            try operations.remove(snapshot.download.id, deleteFile: false)
        } catch {
            throw RPCError(Problem(error).detail)
        }
        keepRemoved(gid, snapshot.download.owner, last)
        return .string(gid)
    }

    /// Whether the caller sees a download `owner` added (a token with a root sees only its own).
    private func sees(_ owner: String?) -> Bool {
        operations.caller.confinedTo.map { $0 == owner } ?? true
    }

    /// The removed downloads kept that the caller sees.
    private var visibleRemoved: [(gid: String, owner: String?, status: [(String, JSONValue)])] {
        operations.caller.confinedTo == nil ? removed : removed.filter { sees($0.owner) }
    }

    private func keepRemoved(_ gid: String, _ owner: String?, _ status: [(String, JSONValue)]) {
        removed.append((gid, owner, status))
        if removed.count > Aria2RPC.maxRemoved { removed.removeFirst(removed.count - Aria2RPC.maxRemoved) }
    }

    private func pause(_ gid: String) throws(RPCError) -> JSONValue {
        let snapshot = try snapshot(gid)
        guard snapshot.download.state == .queued || snapshot.download.state.isActive else {
            throw RPCError("GID#\(gid) cannot be paused now")
        }
        return try change(snapshot.download.id, gid, DownloadChanges(state: .paused))
    }

    private func unpause(_ gid: String) throws(RPCError) -> JSONValue {
        let snapshot = try snapshot(gid)
        guard snapshot.download.state == .paused else { throw RPCError("GID#\(gid) cannot be unpaused now") }
        return try change(snapshot.download.id, gid, DownloadChanges(state: .queued))
    }

    private func change(_ id: String, _ gid: String, _ changes: DownloadChanges) throws(RPCError) -> JSONValue {
        do {
            _ = try operations.change(id, changes)
        } catch {
            throw RPCError(Problem(error).detail)
        }
        return .string(gid)
    }

    /// Does `action` to every download in `states`, a slice at a time as REST's bulk actions.
    private func act(_ action: BulkAction, states: Set<DownloadState>) {
        let ids = operations.ids(matching: DownloadFilter(states: states))
        var start = 0
        while start < ids.count {
            let end = min(ids.count, start + 500)
            _ = operations.act(action, on: ids[start..<end])
            start = end
        }
    }

    private func servers(_ gid: String) throws(RPCError) -> JSONValue {
        let snapshot = try snapshot(gid)
        guard snapshot.download.state.isActive else { throw RPCError("No active download for GID#\(gid)") }
        let d = snapshot.download
        let uri = Redact.url(d.url)
        var servers: [JSONValue] = [.object([("uri", .string(uri)), ("currentUri", .string(Redact.url(d.finalURL ?? d.url))),
                                             ("downloadSpeed", .string(String(Int64(snapshot.speed.rounded()))))])]
        for (index, mirror) in d.mirrors.enumerated() where mirror.state == .active {
            let speed = index + 1 < snapshot.mirrorSpeeds.count ? snapshot.mirrorSpeeds[index + 1] : 0
            servers.append(.object([("uri", .string(Redact.url(mirror.url))),
                                    ("currentUri", .string(Redact.url(mirror.url))),
                                    ("downloadSpeed", .string(String(Int64(speed.rounded()))))]))
        }
        return .array([.object([("index", .string("1")), ("servers", .array(servers))])])
    }

    private func query(states: Set<DownloadState>, order: DownloadOrder, at position: Int, limit: Int)
        -> DownloadQuery {
        var query = DownloadQuery()
        query.filter = DownloadFilter(states: states)
        query.order = order
        query.cursor = .position(position)
        query.limit = max(1, min(limit, DownloadQuery.limits.upperBound))
        return query
    }

    /// `tellWaiting` (queued and paused, in the order they start) and `tellStopped` (finished, oldest first, then
    /// those removed here): `offset` from the start, or from the end when negative (then in reverse), at most `count`.
    private func list(waiting: Bool, offset: Int, count: Int, keys: [String]?) throws(RPCError) -> JSONValue {
        let totals = operations.totals()
        let states: Set<DownloadState> = waiting ? [.queued, .paused] : [.completed, .failed]
        let stored = states.reduce(0) { $0 + totals.count($1) }
        let extra = waiting ? [] : visibleRemoved
        let total = stored + extra.count
        guard count > 0 else { return .array([]) }
        var positions: [Int] = []
        if offset >= 0 {
            if offset < total { positions = Array(offset..<min(total, offset + min(count, total))) }
        } else if total + offset >= 0 {
            let start = total + offset
            positions = Array(stride(from: start, through: max(0, start - count + 1), by: -1))
        }
        let inStore = positions.filter { $0 < stored }
        var byPosition: [Int: JSONValue] = [:]
        if let low = inStore.min(), let high = inStore.max() {
            var at = low
            while at <= high {
                let page = operations.page(query(states: states, order: waiting ? .queue : .created, at: at,
                                                 limit: high - at + 1))
                if page.downloads.isEmpty { break }
                for (index, snapshot) in page.downloads.enumerated() { byPosition[at + index] = status(snapshot, keys: keys) }
                at += page.downloads.count
            }
        }
        return .array(positions.compactMap { position in
            position < stored ? byPosition[position] : Aria2Status.select(extra[position - stored].status, keys: keys)
        })
    }

    private func changePosition(_ gid: String, _ position: Int, _ how: String) throws(RPCError) -> JSONValue {
        let snapshot = try snapshot(gid)
        guard snapshot.download.isWaiting else { throw RPCError("GID#\(gid) not found in the waiting queue.") }
        let totals = operations.totals()
        let waiting = totals.count(.queued) + totals.count(.paused)
        let target: Int
        switch how {
        case "POS_SET": target = position
        case "POS_END": target = waiting - 1 + position
        case "POS_CUR":
            guard let current = waitingPosition(of: snapshot.download.id) else {
                throw RPCError("GID#\(gid) not found in the waiting queue.")
            }
            target = current + position
        default: throw RPCError("Illegal argument.")
        }
        do {
            return .number(Double(try operations.move(snapshot.download.id, .position(max(0, min(target, waiting - 1))))))
        } catch {
            throw RPCError(Problem(error).detail)
        }
    }

    /// Where `id` is in the waiting queue, 0 first.
    private func waitingPosition(of id: String) -> Int? {
        var at = 0
        while true {
            let page = operations.page(query(states: [.queued, .paused], order: .queue, at: at,
                                             limit: DownloadQuery.limits.upperBound))
            if let index = page.downloads.firstIndex(where: { $0.download.id == id }) { return at + index }
            guard page.next != nil, !page.downloads.isEmpty else { return nil }
            at += page.downloads.count
        }
    }

    private func changeOption(_ gid: String, _ options: [(String, JSONValue)]) throws(RPCError) -> JSONValue {
        let snapshot = try snapshot(gid)
        let changes: DownloadChanges
        do {
            changes = try Aria2Options.changes(options)
        } catch {
            throw RPCError(error.message)
        }
        guard changes.maxSpeed != nil || changes.connections != nil else { return .string("OK") }
        _ = try change(snapshot.download.id, gid, changes)
        return .string("OK")
    }

    private func changeGlobalOption(_ options: [(String, JSONValue)]) throws(RPCError) -> JSONValue {
        let members: [(String, JSONValue)]
        do {
            members = try Aria2GlobalOptions.settingsMembers(options)
        } catch {
            throw RPCError(error.message)
        }
        guard !members.isEmpty else { return .string("OK") }
        let (change, errors) = SettingsChange.parse(members)
        if let first = errors.first { throw RPCError("\(first.field): \(first.message)") }
        do {
            _ = try operations.changeSettings(change)
        } catch {
            throw RPCError(Problem(error).detail)
        }
        return .string("OK")
    }

    private func globalStat() -> JSONValue {
        let totals = operations.totals()
        let stopped = totals.count(.completed) + totals.count(.failed) + visibleRemoved.count
        return .object([
            ("downloadSpeed", .string(String(Int64(totals.speed.rounded())))),
            ("uploadSpeed", .string("0")),
            ("numActive", .string(String(totals.active))),
            ("numWaiting", .string(String(totals.count(.queued) + totals.count(.paused)))),
            // Capped as aria2 caps it (--max-download-result, 1000 as getGlobalOption says); the total is not.
            ("numStopped", .string(String(min(stopped, Aria2RPC.maxRemoved)))),
            ("numStoppedTotal", .string(String(stopped))),
        ])
    }

    /// aria2 forgets its finished results, not their files: Haul removes the finished downloads' records (files
    /// stay) and the removed ones it kept.
    private func purge() -> JSONValue {
        removed.removeAll { sees($0.owner) }
        act(.remove(deleteFile: false), states: [.completed, .failed])
        return .string("OK")
    }

    private func removeResult(_ gid: String) throws(RPCError) -> JSONValue {
        if let index = removed.lastIndex(where: { $0.gid == gid && sees($0.owner) }) {
            removed.remove(at: index)
            return .string("OK")
        }
        let snapshot = try snapshot(gid)
        guard snapshot.download.state.isFinished else {
            throw RPCError("Could not remove download result of GID#\(gid)")
        }
        do {
            try operations.remove(snapshot.download.id, deleteFile: false)
        } catch {
            throw RPCError(Problem(error).detail)
        }
        return .string("OK")
    }

    private func multicall(_ p: Params, caller: Request) throws(RPCError) -> JSONValue {
        guard case .array(let calls)? = p.value(0) else { throw RPCError("Bad multicall signature") }
        guard calls.count <= Aria2RPC.maxBatch else {
            throw RPCError("a multicall holds at most \(Aria2RPC.maxBatch) calls")
        }
        return .array(calls.map { entry -> JSONValue in
            guard let method = entry["methodName"]?.stringValue else {
                return RPCError("Missing methodName.").json
            }
            var params: [JSONValue] = []
            switch entry["params"] {
            case .array(let items)?: params = items
            case nil, .null?: break
            default: return RPCError("Missing params.").json
            }
            do throws(RPCError) {
                return .array([try caller.spend(try call(method, params, caller: caller, nested: true))])
            } catch {
                return error.json
            }
        })
    }
}
