/// A request for a download already in the list (the same URL into the same place, not finished) answers with that
/// download; what the request asks of it is never dropped without a word: an option PATCH could change (priority,
/// connections, speed limit) is applied, and a request whose other options differ is refused with the reason
/// (by the engine's plan, so an atomic batch holding one adds nothing).
extension Operations {
    /// Applies `request`'s changeable options to `existing`; returns the download as it is then.
    func reconcile(_ request: NewDownload, with existing: DownloadSnapshot) throws(EngineError) -> DownloadSnapshot {
        guard let changes = request.changes(to: existing.download) else { return existing }
        return try engine.update(existing.download.id, changes)
    }
}

extension NewDownload {
    /// Why this request may not simply answer with `d`, the download already fetching its URL into its place: it
    /// gives options that differ and cannot change once a download is added, or asks a change the token may not
    /// make. nil when `d` is the answer (with `changes(to:)` applied).
    func refusal(asking d: Download) -> EngineError? {
        let fixed = fixedDifferences(from: d)
        if !fixed.isEmpty {
            return .conflict(
                "\(d.id) fetches this URL into the same place already (\(d.state.rawValue)); its "
                    + "\(fixed.joined(separator: ", ")) differ, which cannot change once a download is added: remove it "
                    + "first to add it with these")
        }
        if changes(to: d) != nil, let owner, !Caller(owner).mayChange(d) {
            return .notOwner(
                "\(d.id) fetches this URL into the same place already and is another token's: its "
                    + "priority, connections and speed limit are not the token '\(owner.name)''s to change")
        }
        return nil
    }

    /// What PATCH would change of `d` to give it the options this request gives; nil for nothing.
    func changes(to d: Download) -> DownloadChanges? {
        var changes = DownloadChanges()
        if let connections, connections != d.connections { changes.connections = connections }
        if let priority, priority != d.priority { changes.priority = priority }
        if let maxSpeed, (maxSpeed == 0 ? nil : maxSpeed) != d.maxSpeed {
            changes.maxSpeed = .some(maxSpeed == 0 ? nil : maxSpeed)
        }
        return changes.connections != nil || changes.priority != nil || changes.maxSpeed != nil ? changes : nil
    }

    /// The options this request gives that differ from `d`'s and that no change can bring over: their JSON names.
    func fixedDifferences(from d: Download) -> [String] {
        var fields: [String] = []
        func differs(_ given: Bool, _ name: String) { if given { fields.append(name) } }
        differs(checksum != nil && checksum != d.checksum, "checksum")
        differs(!headers.isEmpty && headers != d.headers, "headers")
        differs(!mirrors.isEmpty && mirrors != d.mirrors.map(\.url), "mirrors")
        differs(insecure && !d.insecure, "insecure")
        differs(sequential && !d.sequential, "sequential")
        differs(firstLast && !d.firstLast, "first_last")
        differs(proxy != nil && proxy != d.proxy, "proxy")
        differs(username != nil && username != d.username, "username")
        differs(password != nil && password != d.password, "password")
        differs(cookies != nil && cookies != d.cookies, "cookies")
        differs(userAgent != nil && userAgent != d.userAgent, "user_agent")
        differs(referer != nil && referer != d.referer, "referer")
        differs(hostKey != nil && hostKey != d.hostKey, "host_key")
        return fields
    }
}
