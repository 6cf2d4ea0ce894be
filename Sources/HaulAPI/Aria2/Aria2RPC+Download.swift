import FoundationEssentials
import HaulCore
import HaulLoop

/// The methods on one download: adding, reading, pausing, changing and removing it.
extension Aria2RPC {
    func idOf(_ gid: String) -> String? {
        // The GIDs of every download (the map is shared by every caller); what the caller sees is checked after.
        session.gids.id(of: gid, count: base.count, now: ProcessInfo.processInfo.systemUptime) {
            base.ids(matching: DownloadFilter())
        }
    }

    func snapshot(_ gid: String) throws(RPCError) -> DownloadSnapshot {
        guard let id = idOf(gid), let snapshot = try? operations.get(id) else {
            throw RPCError("GID \(gid) is not found")
        }
        return snapshot
    }

    func status(_ snapshot: DownloadSnapshot, keys: [String]?) -> JSONValue {
        Aria2Status.select(
            Aria2Status.json(
                snapshot, gid: Aria2GIDs.gid(of: snapshot.download.id), root: root,
                completedRoot: base.config.completedRoot),
            keys: keys)
    }

    func status(of gid: String, keys: [String]?) throws(RPCError) -> JSONValue {
        if let id = idOf(gid), let snapshot = try? operations.get(id) {
            let members = Aria2Status.json(
                snapshot, gid: Aria2GIDs.gid(of: id), root: root, completedRoot: base.config.completedRoot)
            // While it rests, the API's own loop answers the next such calls with it (`API.readsBeside`).
            operations.publishFront(Aria2Beside.Status(members), key: Aria2Beside.key(gid), for: id)
            return Aria2Status.select(members, keys: keys)
        }
        if let gone = session.removedStatus(gid, seenBy: operations.caller) {
            return Aria2Status.select(gone, keys: keys)
        }
        throw RPCError("GID \(gid) is not found")
    }

    func addURI(_ p: Aria2Call) throws(RPCError) -> JSONValue {
        guard case .array(let items)? = p.value(0), !items.isEmpty else {
            throw RPCError("URI is not provided.")
        }
        let uris = items.compactMap(\.stringValue)
        guard uris.count == items.count else { throw RPCError("URI must be a string.") }
        guard uris.count <= API.maxMirrors + 1 else {
            throw RPCError("at most \(API.maxMirrors + 1) URIs of one file")
        }
        let options = try p.object(1)
        var request: NewDownload
        do {
            // A token with a root: `dir` is taken under it, as it sees it (getGlobalOption's dir), and the engine
            // puts the download under that root.
            request = try Aria2Options.newDownload(uris: uris, options: options, root: callersRoot)
        } catch {
            throw RPCError(error.message)
        }
        return try add(request, options: options, position: p.value(2))
    }

    /// `aria2.addTorrent(torrent, uris, options, position)`: a .torrent file in base64 (its web seeds, `uris`, are
    /// not used), checked as POST /downloads checks one; the download's URL is the torrent's magnet link.
    func addTorrent(_ p: Aria2Call) throws(RPCError) -> JSONValue {
        guard let text = p.value(0)?.stringValue, let bytes = Base64.decode(text), !bytes.isEmpty else {
            throw RPCError("the torrent must be a .torrent file in base64")
        }
        let meta: TorrentMeta
        do {
            meta = try TorrentSession.parse(bytes)
        } catch {
            throw RPCError(error.message)
        }
        if let problem = TorrentLayout.problem(meta.files) { throw RPCError(problem) }
        let options = try p.object(2)
        var request: NewDownload
        do {
            let link = Magnet.link(infoHash: meta.infoHash, name: meta.name)
            request = try Aria2Options.newDownload(uris: [link], options: options, root: callersRoot)
        } catch {
            throw RPCError(error.message)
        }
        request.torrent = bytes
        return try add(request, options: options, position: p.value(3))
    }

    /// Adds `request` with aria2's `gid` option and `position`: the new download's GID.
    private func add(
        _ request: NewDownload, options: [(String, JSONValue)], position: JSONValue?
    ) throws(RPCError)
        -> JSONValue
    {
        var request = request
        // aria2's `gid`: the caller names the download's GID (16 hex digits, not all zero, not taken).
        if let gid = options.last(where: { $0.0 == "gid" })?.1 {
            guard let text = gid.stringValue, Aria2GIDs.isGID(text), text != "0000000000000000",
                let id = Aria2GIDs.id(forGID: text.lowercased())
            else {
                throw RPCError("option gid must be 16 hex digits, not all zero")
            }
            guard idOf(text.lowercased()) == nil else { throw RPCError("GID \(text.lowercased()) is not unique.") }
            request.id = id
        }
        let added: DownloadSnapshot
        do {
            added = try operations.add(request).snapshot
        } catch {
            throw RPCError(Problem(error).detail)
        }
        session.gids.remember(added.download.id)
        if case .number? = position, let position = position?.integerValue, added.download.isWaiting {
            _ = try? operations.move(added.download.id, .position(max(0, Int(position))))
        }
        return .string(Aria2GIDs.gid(of: added.download.id))
    }

    func remove(_ gid: String) throws(RPCError) -> JSONValue {
        let snapshot = try snapshot(gid)
        guard !snapshot.download.state.isFinished else {
            throw RPCError("Active Download not found for GID#\(gid)")
        }
        var last = Aria2Status.json(snapshot, gid: gid, root: root, completedRoot: base.config.completedRoot)
        last =
            last.filter { !["status", "downloadSpeed", "connections", "errorCode", "errorMessage"].contains($0.0) }
            + [
                ("status", .string("removed")), ("downloadSpeed", .string("0")), ("connections", .string("0")),
                ("errorCode", .string("31")), ("errorMessage", .string("")),
            ]
        do {
            try operations.remove(snapshot.download.id, deleteFile: false)
        } catch {
            throw RPCError(Problem(error).detail)
        }
        session.keepRemoved(gid, owner: snapshot.download.owner, status: last)
        return .string(gid)
    }

    func pause(_ gid: String) throws(RPCError) -> JSONValue {
        let snapshot = try snapshot(gid)
        guard snapshot.download.state == .queued || snapshot.download.state.isActive else {
            throw RPCError("GID#\(gid) cannot be paused now")
        }
        return try change(snapshot.download.id, gid, DownloadChanges(state: .paused))
    }

    func unpause(_ gid: String) throws(RPCError) -> JSONValue {
        let snapshot = try snapshot(gid)
        guard snapshot.download.state == .paused else { throw RPCError("GID#\(gid) cannot be unpaused now") }
        return try change(snapshot.download.id, gid, DownloadChanges(state: .queued))
    }

    func change(_ id: String, _ gid: String, _ changes: DownloadChanges) throws(RPCError) -> JSONValue {
        do {
            _ = try operations.change(id, changes)
        } catch {
            throw RPCError(Problem(error).detail)
        }
        return .string(gid)
    }

    /// Does `action` to every download in `states`, a slice at a time as REST's bulk actions.
    func act(_ action: BulkAction, states: Set<DownloadState>) {
        let ids = operations.ids(matching: DownloadFilter(states: states))
        var start = 0
        while start < ids.count {
            let end = min(ids.count, start + 500)
            _ = operations.act(action, on: ids[start..<end])
            start = end
        }
    }

    func pauseAll() -> JSONValue {
        act(.pause, states: [.queued, .probing, .downloading, .verifying])
        return .string("OK")
    }

    func files(_ gid: String) throws(RPCError) -> JSONValue {
        .array([Aria2Status.file(try snapshot(gid).download, root: root, completedRoot: base.config.completedRoot)])
    }

    func option(_ gid: String) throws(RPCError) -> JSONValue {
        Aria2Options.download(try snapshot(gid).download, root: root, global: globalSource)
    }

    /// `tellActive`: every running download, oldest first.
    func active(keys: [String]?) throws(RPCError) -> JSONValue {
        let items = operations.page(
            query(
                states: [.probing, .downloading, .verifying], order: .created, at: 0,
                limit: DownloadQuery.limits.upperBound)
        ).downloads
        return .array(items.map { status($0, keys: keys) })
    }

    func servers(_ gid: String) throws(RPCError) -> JSONValue {
        let snapshot = try snapshot(gid)
        guard snapshot.download.state.isActive else { throw RPCError("No active download for GID#\(gid)") }
        let d = snapshot.download
        let uri = Redact.url(d.url)
        var servers: [JSONValue] = [
            .object([
                ("uri", .string(uri)), ("currentUri", .string(Redact.url(d.finalURL ?? d.url))),
                ("downloadSpeed", .string(String(Int64(snapshot.speed.rounded())))),
            ])
        ]
        for (index, mirror) in d.mirrors.enumerated() where mirror.state == .active {
            let speed = index + 1 < snapshot.mirrorSpeeds.count ? snapshot.mirrorSpeeds[index + 1] : 0
            servers.append(
                .object([
                    ("uri", .string(Redact.url(mirror.url))),
                    ("currentUri", .string(Redact.url(mirror.url))),
                    ("downloadSpeed", .string(String(Int64(speed.rounded())))),
                ]))
        }
        return .array([.object([("index", .string("1")), ("servers", .array(servers))])])
    }
}
