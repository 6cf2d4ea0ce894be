import FoundationEssentials
import HaulCore
import HaulLoop

/// Listing downloads in pages, event streams, and tickets for links.
extension API {
    func listDownloads(_ c: RequestContext) throws(Problem) -> HTTPResponse {
        var errors: [(field: String, message: String)] = []
        let states = API.states(c.query["state"], &errors)
        var query = DownloadQuery()
        query.filter.states = states
        if let text = c.query["limit"] {
            if let value = Int(text), DownloadQuery.limits.contains(value) {
                query.limit = value
            } else {
                errors.append(("limit", "must be an integer from 1 to 1000"))
            }
        }
        if var text = c.query["sort"] {
            query.descending = text.hasPrefix("-")
            if query.descending { text.removeFirst() }
            if let value = DownloadOrder(rawValue: text) {
                query.order = value
            } else {
                errors.append(
                    (
                        "sort",
                        "must be " + DownloadOrder.allCases.map(\.rawValue).joined(separator: ", ")
                            + ", with - before it for descending"
                    ))
            }
        }
        if let cursor = c.query["cursor"] {
            // A position ("o200", or a bare number in an order other than creation), or a sequence number.
            let byPosition = query.order != .created || query.descending
            let position = cursor.hasPrefix("o") ? Int(cursor.dropFirst()) : byPosition ? Int(cursor) : nil
            if let position, position >= 0 {
                query.cursor = .position(position)
            } else if let value = Int64(cursor), value >= 0 {
                query.cursor = .sequence(value)
            } else {
                errors.append(("cursor", "is not the next_cursor of an earlier page"))
            }
        }
        if let text = c.query["q"] {
            if (1...200).contains(text.count) {
                query.filter.search = text.lowercased()
            } else {
                errors.append(("q", "must be 1 to 200 characters"))
            }
        }
        if let prefix = c.query["id_prefix"] {
            if (1...64).contains(prefix.count) {
                query.filter.idPrefix = prefix.lowercased()
            } else {
                errors.append(("id_prefix", "must be 1 to 64 characters"))
            }
        }
        query.filter.category = c.query["category"]
        if let category = query.filter.category, let problem = Validate.categoryName(category) {
            errors.append(("category", problem))
        }
        var changes: (changed: Set<String>, removed: [String])??
        if let text = c.query["changed_since"] {
            if let since = Int64(text), since >= 0 {
                changes = .some(events.changes(since: since, for: c.caller))
            } else {
                errors.append(("changed_since", "must be a sequence number from an earlier answer"))
            }
        }
        if !errors.isEmpty { throw Problem.invalid(errors) }
        // Read before listing: a change made after this number shows up in the next delta, never lost.
        let sequence = events.sequence
        query.filter.ids = changes??.changed
        let page = c.operations.page(query)
        var w = JSONWriter(capacity: 256 + page.downloads.count * 1536)
        w.object { w in
            w.key("downloads")
            w.array { w in
                for snapshot in page.downloads {
                    DownloadResource.write(snapshot, owner: c.caller.seesOwners, into: &w)
                }
            }
            w.key("next_cursor")
            switch page.next {
            case nil: w.null()
            case .position(let position)?: w.string("o\(position)")
            case .sequence(let number)?: w.string(String(number))
            }
            w.member("sequence", sequence)
            if let changes {
                w.key("removed")
                w.array { w in
                    for id in changes?.removed ?? [] { w.string(id) }
                }
                // The removals before `changed_since` are forgotten: this is the full list, start afresh.
                w.member("reset", changes == nil)
            }
        }
        let response = API.tagged(API.json(200, bytes: w.bytes))
        // While every download in it rests, the API's own loop answers the next reads of this page with it.
        c.operations.publishPage(response, for: c.request.target, showing: page.downloads.map(\.download.id))
        return API.conditional(c.request, tagged: response)
    }

    func eventStream(_ c: RequestContext, downloadID: String?) throws(Problem) -> APIResult {
        if let downloadID { _ = try attempt(c.operations.get(downloadID)) }
        var lastEventID: Int64?
        if let text = c.request.header("Last-Event-ID") ?? c.query["last_event_id"] {
            guard let value = Int64(text.trimmingSpaces()), value >= 0 else {
                throw Problem.invalid([("last_event_id", "must be the id of an event this server sent")])
            }
            lastEventID = value
        }
        try checkLongLivedRoom()
        if c.request.method == "HEAD" {
            return .response(HTTPResponse(status: 200, headers: EventStreamRequest.standardHeaders))
        }
        var request = EventStreamRequest(downloadID: downloadID, lastEventID: lastEventID, caller: c.caller)
        if let category = c.query["category"] {
            if let problem = Validate.categoryName(category) { throw Problem.invalid([("category", problem)]) }
            request.category = category
        }
        return .eventStream(request)
    }

    /// Refuses another event stream or WebSocket once `--max-event-streams` of them are open.
    func checkLongLivedRoom() throws(Problem) {
        guard longLivedCount >= limits.maxEventStreams else { return }
        throw Problem(
            status: 503, slug: "too-many-streams", title: "Too many event streams",
            detail: "this server serves at most \(limits.maxEventStreams) event streams and WebSockets at once",
            headers: [("Retry-After", "5")])
    }

    /// `POST /tickets`: a ticket that opens one stream or file path for a minute, for a URL a browser opens without
    /// headers (a link, an EventSource), so that the token never goes into a URL.
    func issueTicket(_ c: RequestContext) throws(Problem) -> HTTPResponse {
        var body = try RequestBody(c.request)
        body.rejectUnknown(except: ["path"])
        let path = body.string("path", required: true)
        if let path, router.match(path)?.route.access != .streamToken || path.contains("?") {
            body.reject(
                "path",
                "must be the path of a file or an event stream: /events, /downloads/ID/events or "
                    + "/downloads/ID/file")
        }
        try body.finish()
        let issued = gate.tickets.issue(
            path: path!, now: Date().timeIntervalSince1970,
            for: c.caller.token.map { .token($0.id) } ?? .server)
        return API.json(
            201,
            .object([
                ("ticket", .string(issued.ticket)),
                ("path", .string(path!)),
                ("url", .string(path! + "?ticket=" + issued.ticket)),
                ("expires_at", .string(Timestamp.rfc3339(Date(timeIntervalSince1970: issued.expires)))),
            ]))
    }
}
