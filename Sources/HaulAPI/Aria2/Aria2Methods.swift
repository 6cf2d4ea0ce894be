import FoundationEssentials
import HaulCore

/// One aria2 method: the operation it is (the scope a token needs, whether it changes anything: the gate's rules,
/// as for a REST route) and what answers it.
struct Aria2Method: Sendable {
    typealias Answer = @Sendable (Aria2RPC, Aria2Call) throws(Aria2RPC.RPCError) -> JSONValue

    let operation: Operation
    let answer: Answer

    init(_ operation: Operation, _ answer: @escaping Answer) {
        self.operation = operation
        self.answer = answer
    }
}

/// A method's call as its answer reads it: the positional parameters (the token taken off), read with aria2's
/// complaints, and the request it came in (its budget, its transport).
struct Aria2Call {
    typealias RPCError = Aria2RPC.RPCError

    let method: String
    let values: [JSONValue]
    let request: Aria2RPC.Request
    /// Inside a `system.multicall` (which may not hold another).
    let nested: Bool

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
        guard let text = value(index)?.stringValue else { throw RPCError("The parameter at \(index) has wrong type.") }
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

extension Aria2RPC {
    /// The version clients see: aria2's, whose feature set they check (AriaNg, aria2p), and Haul's beside it.
    static let aria2Version = "1.36.0"

    /// Every method aria2 1.36 answers, by name: adding and removing, pausing, reading one download or a page of
    /// them, the queue, options, statistics, results, the session, and the system's.
    static let methods: [String: Aria2Method] = [
        "aria2.addUri": Aria2Method(.addDownloads) { rpc, call throws(RPCError) in try rpc.addURI(call) },
        "aria2.addTorrent": Aria2Method(.addDownloads) { rpc, call throws(RPCError) in try rpc.addTorrent(call) },
        "aria2.addMetalink": Aria2Method(.addDownloads) { _, _ throws(RPCError) in throw noMetalinks },
        "aria2.remove": Aria2Method(.removeDownload) { rpc, call throws(RPCError) in try rpc.remove(call.gid(0)) },
        "aria2.forceRemove": Aria2Method(.removeDownload) { rpc, call throws(RPCError) in
            try rpc.remove(call.gid(0))
        },
        "aria2.pause": Aria2Method(.changeDownload) { rpc, call throws(RPCError) in try rpc.pause(call.gid(0)) },
        "aria2.forcePause": Aria2Method(.changeDownload) { rpc, call throws(RPCError) in try rpc.pause(call.gid(0)) },
        "aria2.unpause": Aria2Method(.changeDownload) { rpc, call throws(RPCError) in try rpc.unpause(call.gid(0)) },
        "aria2.pauseAll": Aria2Method(.actOnDownloads) { rpc, _ in rpc.pauseAll() },
        "aria2.forcePauseAll": Aria2Method(.actOnDownloads) { rpc, _ in rpc.pauseAll() },
        "aria2.unpauseAll": Aria2Method(.actOnDownloads) { rpc, _ in
            rpc.act(.resume, states: [.paused])
            return .string("OK")
        },
        "aria2.tellStatus": Aria2Method(.getDownload) { rpc, call throws(RPCError) in
            try rpc.status(of: call.gid(0), keys: call.keys(1))
        },
        "aria2.getUris": Aria2Method(.getDownload) { rpc, call throws(RPCError) in
            Aria2Status.uris(try rpc.snapshot(call.gid(0)).download)
        },
        "aria2.getFiles": Aria2Method(.getDownload) { rpc, call throws(RPCError) in try rpc.files(call.gid(0)) },
        "aria2.getPeers": Aria2Method(.getDownload) { rpc, call throws(RPCError) in
            _ = try rpc.snapshot(call.gid(0))
            return .array([])
        },
        "aria2.getServers": Aria2Method(.getDownload) { rpc, call throws(RPCError) in try rpc.servers(call.gid(0)) },
        "aria2.tellActive": Aria2Method(.listDownloads) { rpc, call throws(RPCError) in
            try rpc.active(keys: call.keys(0))
        },
        "aria2.tellWaiting": Aria2Method(.listDownloads) { rpc, call throws(RPCError) in
            try rpc.list(waiting: true, offset: call.int(0), count: call.int(1), keys: call.keys(2))
        },
        "aria2.tellStopped": Aria2Method(.listDownloads) { rpc, call throws(RPCError) in
            try rpc.list(waiting: false, offset: call.int(0), count: call.int(1), keys: call.keys(2))
        },
        "aria2.changePosition": Aria2Method(.changeDownload) { rpc, call throws(RPCError) in
            try rpc.changePosition(call.gid(0), call.int(1), call.string(2))
        },
        "aria2.changeUri": Aria2Method(.changeDownload) { rpc, call throws(RPCError) in
            _ = try rpc.snapshot(call.gid(0))
            throw RPCError("Haul keeps a download's sources as they were added: remove it and add it again")
        },
        "aria2.getOption": Aria2Method(.getDownload) { rpc, call throws(RPCError) in try rpc.option(call.gid(0)) },
        "aria2.changeOption": Aria2Method(.changeDownload) { rpc, call throws(RPCError) in
            try rpc.changeOption(call.gid(0), call.object(1))
        },
        "aria2.getGlobalOption": Aria2Method(.getSettings) { rpc, _ in Aria2GlobalOptions.json(rpc.globalSource) },
        "aria2.changeGlobalOption": Aria2Method(.changeSettings) { rpc, call throws(RPCError) in
            try rpc.changeGlobalOption(call.object(0))
        },
        "aria2.getGlobalStat": Aria2Method(.stats) { rpc, _ in rpc.globalStat() },
        "aria2.purgeDownloadResult": Aria2Method(.removeDownloads) { rpc, _ in rpc.purge() },
        "aria2.removeDownloadResult": Aria2Method(.removeDownload) { rpc, call throws(RPCError) in
            try rpc.removeResult(call.gid(0))
        },
        "aria2.getVersion": Aria2Method(.version) { _, _ in
            .object([
                ("version", .string(aria2Version)),
                (
                    "enabledFeatures",
                    .array(
                        ["Async DNS", "GZip", "HTTPS", "Message Digest", "SFTP"]
                            .map { .string($0) })
                ),
                ("haul", .string(HaulVersion.current)),
            ])
        },
        "aria2.getSessionInfo": Aria2Method(.stats) { rpc, _ in .object([("sessionId", .string(rpc.session.id))]) },
        "aria2.saveSession": Aria2Method(.stats) { _, _ in .string("OK") },
        "aria2.shutdown": Aria2Method(.shutdown) { rpc, _ throws(RPCError) in try rpc.shutdown() },
        "aria2.forceShutdown": Aria2Method(.shutdown) { rpc, _ throws(RPCError) in try rpc.shutdown() },
        "system.multicall": Aria2Method(.stats) { rpc, call throws(RPCError) in
            guard !call.nested else { throw RPCError("system.multicall cannot be nested") }
            return try rpc.multicall(call)
        },
        "system.listMethods": Aria2Method(.describeAPI) { _, _ in .array(methods.keys.sorted().map { .string($0) }) },
        "system.listNotifications": Aria2Method(.describeAPI) { _, _ in
            .array(Aria2Notifier.methods.map { .string($0) })
        },
    ]

    static let noMetalinks = RPCError("Haul fetches HTTP(S), FTP(S), SFTP, HLS and BitTorrent: it has no Metalink")
}
