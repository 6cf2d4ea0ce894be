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
///
/// In parts: `Aria2Envelope` (JSON-RPC's ids, batches and errors), the method table (`Aria2Method`: a name, its
/// operation, its answer), `Aria2Notifier` (what the sockets are told), `Aria2Session` (GIDs, removed results);
/// here, one access path (the gate's, by each method's operation) and the sockets.
final class Aria2RPC {
    /// The operations for the server's own token ...
    let base: Operations
    /// ... and for the caller of the method being answered (its token's view: set as each call is admitted).
    private(set) var operations: Operations
    private let gate: AccessGate
    private let config: Aria2Config
    let session = Aria2Session()
    /// The WebSockets open, each told aria2's notifications about the downloads the token it proved sees: at its
    /// handshake (`?token=`, `Authorization: Bearer`) or by its last admitted call. On a server with a token, a
    /// socket that proved none hears nothing.
    private var sockets: [ObjectIdentifier: (socket: any WebSocketEndpoint, caller: Caller?)] = [:]
    /// The socket whose message is being answered.
    private var answering: ObjectIdentifier?
    private var notifier = Aria2Notifier()
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
    }

    /// What the server's options in aria2's names are read from, for the caller.
    var globalSource: Aria2GlobalOptions.Source {
        Aria2GlobalOptions.Source(settings: operations.settings, config: base.config, root: callersRoot)
    }
    var root: String { base.config.downloadRoot }
    /// The folder the caller's downloads land under: its token's root, else the download root.
    var callersRoot: String {
        guard let folder = operations.caller.token?.root else { return root }
        return root.hasSuffix("/") ? root + folder : root + "/" + folder
    }

    // MARK: requests

    /// The answer to a request body: one response, or an array for a batch.
    func answer(_ body: [UInt8], caller: Request) -> JSONValue {
        Aria2Envelope.answer(body) { answer($0, caller: caller) }
    }

    func answer(_ request: JSONValue, caller: Request) -> JSONValue {
        Aria2Envelope.answer(request) { answer($0, caller: caller) }
    }

    private func answer(_ call: Aria2Envelope.Call, caller: Request) -> Result<JSONValue, RPCError> {
        do throws(RPCError) {
            let result = try self.call(call.method, call.params, caller: caller)
            // A multicall's results were counted one by one.
            return .success(call.method == "system.multicall" ? result : try caller.spend(result))
        } catch {
            return .failure(error)
        }
    }

    /// Calls `method`: the caller admitted by the gate for the method's operation (its token, its scope, whether
    /// the transport may change anything), then the method's answer.
    func call(
        _ method: String, _ given: [JSONValue], caller: Request, nested: Bool = false
    ) throws(RPCError)
        -> JSONValue
    {
        try caller.startCall()
        guard let entry = Aria2RPC.methods[method] else { throw RPCError("No such method: \(method)") }
        let operation = entry.operation
        var params = given
        let presented = params.first?.stringValue.flatMap { $0.hasPrefix("token:") ? String($0.dropFirst(6)) : nil }
        if presented != nil { params.removeFirst() }
        let proved = presented != nil && gate.hasToken
        if method.hasPrefix("aria2.") {
            guard
                let admitted = gate.admitsSecret(
                    presented, address: caller.address,
                    now: ProcessInfo.processInfo.systemUptime)
            else {
                throw .unauthorized
            }
            if proved { caller.proved() }
            if caller.needsToken, !proved {
                throw RPCError(
                    gate.hasToken
                        ? "Unauthorized"
                        : "Unauthorized: a call a web page may have made "
                            + "(JSONP, a GET from another site, Origin null) needs the token, and this server has none "
                            + "(start it with --token)")
            }
            if let needed = operation.scope, needed > admitted.scope {
                throw RPCError("the token has the \(admitted.scope.name) scope; \(method) needs \(needed.name)")
            }
            operations = base.acting(as: admitted)
            if let answering { sockets[answering]?.caller = admitted }
            if operation.changesState, let log, log.minimum <= .info {
                log.info(
                    "rpc call",
                    admitted.logFields.merging(["rpc.method": method, "client.address": caller.address]) { first, _ in
                        first
                    })
            }
        }
        if operation.changesState, !caller.mayChange, !proved {
            throw RPCError(
                "\(method) changes what the server holds: send it by POST or WebSocket (by GET only with "
                    + "the server's token)")
        }
        return try entry.answer(self, Aria2Call(method: method, values: params, request: caller, nested: nested))
    }

    /// Whether a request may stop the server (`--rpc-allow-shutdown`, and a way to stop it).
    var allowsShutdown: Bool { config.allowShutdown && onShutdown != nil }

    /// Stops the server after the answer has gone out, when `--rpc-allow-shutdown` allows it.
    func shutdown() throws(RPCError) -> JSONValue {
        guard allowsShutdown, let onShutdown else {
            throw RPCError("shutdown is refused: start Haul with --rpc-allow-shutdown to allow it")
        }
        onShutdown()
        return .string("OK")
    }

    // MARK: WebSocket

    var socketCount: Int { sockets.count }

    /// Answers each text message on `socket` (a call or a batch, as a POST body) and sends it aria2's notifications;
    /// `caller` is who its handshake proved it is, if anyone.
    func attach(_ socket: any WebSocketEndpoint, caller proved: Caller?) {
        let key = ObjectIdentifier(socket)
        sockets[key] = (socket, proved)
        socket.onText = { [unowned self, unowned socket] text in
            // Notifications the call itself causes (a start, on adding) follow its answer, as aria2 sends them.
            self.notifier.answerStarted()
            self.answering = key
            let answer = self.answer(Array(text.utf8), caller: Request(address: socket.peer, mayChange: true))
            self.answering = nil
            let held = self.notifier.answerSent()
            self.send(answer.serializedBytes(), to: socket)
            for notification in held { self.notify(notification) }
        }
        socket.onClose = { [weak self] in
            self?.sockets[key] = nil
            if self?.sockets.isEmpty == true { self?.notifier.forget() }
        }
    }

    private func send(_ bytes: [UInt8], to socket: any WebSocketEndpoint) {
        guard socket.queuedBytes <= Aria2RPC.maxQueuedBytes else {
            return socket.close(code: 1008, reason: "the client does not read what it is sent")
        }
        socket.send(bytes)
    }

    /// Tells the sockets what aria2 would: a download started, paused, stopped (removed), completed or failed.
    func engineChanged(_ change: EngineChange) {
        guard !sockets.isEmpty else { return }
        var download: Download?
        if case .updated(let id, true) = change { download = base.snapshot(id)?.download }
        for notification in notifier.changed(change, download: download) { notify(notification) }
    }

    /// Sends a notification to the sockets that may hear of its download: those whose token sees it; on a server
    /// without a token, also those that proved none (aria2p listens without calling).
    private func notify(_ notification: Aria2Notifier.Notification) {
        let message = notification.message
        for (socket, caller) in sockets.values {
            if let caller {
                guard caller.confinedTo == nil || caller.confinedTo == notification.owner else { continue }
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
}
