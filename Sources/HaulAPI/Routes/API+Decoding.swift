import FoundationEssentials
import HaulCore
import HaulLoop

/// What request bodies become: a new download, a batch, and what makes two requests the same.
extension API {
    /// What POST /downloads makes of `request` without adding anything: the download, or the status of the problem
    /// it would answer. For the fuzzer, which feeds it anything.
    public static func decodeNewDownload(_ request: HTTPRequest) -> (download: NewDownload?, status: Int) {
        do {
            return (try newDownload(from: request), 201)
        } catch {
            return (nil, error.status)
        }
    }

    /// What POST /downloads makes of a batch body without adding anything: each element's download (nil for one
    /// refused), or the status of the problem the whole batch would answer. For the fuzzer.
    public static func decodeBatch(_ request: HTTPRequest) -> (downloads: [NewDownload?], status: Int) {
        do {
            var body = try RequestBody(request)
            let (items, atomic) = try newDownloads(from: request, &body)
            return (items.map { try? $0.get() }, atomic ? 201 : 200)
        } catch {
            return ([], error.status)
        }
    }

    /// A POST /downloads body as a new download: every field checked, all problems reported at once (422), or
    /// 400/413/415 for a body that is not a JSON object.
    static func newDownload(from http: HTTPRequest) throws(Problem) -> NewDownload {
        var body = try RequestBody(http)
        let request = newDownload(&body)
        checkIdempotencyKey(http, &body)
        try body.finish()
        return request
    }

    /// The fields of one download (a POST body, or one element of a batch's `downloads`), their problems
    /// collected in `body`.
    static func newDownload(_ body: inout RequestBody) -> NewDownload {
        // The sources, and the options of the table.
        body.rejectUnknown(except: newDownloadMembers)
        // `urls` names every source, the first one first; or `url` and its `mirrors`.
        let urls = body.array("urls", count: 1...(API.maxMirrors + 1))?.map { $0.stringValue }
        if urls != nil, body.has("url") || body.has("mirrors") {
            body.reject("urls", "give urls, or url with mirrors, not both")
        }
        let torrent = body.has("torrent") ? torrentFile(&body) : nil
        let url = urls != nil ? urls?.first ?? nil : body.string("url", required: !body.has("torrent"))
        if urls?.contains(nil) == true { body.reject("urls", "must be strings") }
        if let url, let problem = DownloadKind.isMagnet(url) ? Magnet.problem(url) : Validate.url(url) {
            body.reject(urls == nil ? "url" : "urls[0]", problem)
        }
        if url != nil, body.has("torrent") { body.reject("torrent", "give url or torrent, not both") }
        var request = NewDownload(url: url ?? torrent?.link ?? "")
        request.torrent = torrent?.bytes
        let mirrors =
            urls.map { Array($0.dropFirst()) }
            ?? body.array("mirrors", count: 0...API.maxMirrors)?
            .map { $0.stringValue }
        let field = urls == nil ? "mirrors" : "urls"
        for (index, mirror) in (mirrors ?? []).enumerated() {
            let at = "\(field)[\(urls == nil ? index : index + 1)]"
            guard let mirror else { body.reject(at, "must be a string"); continue }
            if let problem = Validate.url(mirror) {
                body.reject(at, problem)
            }
            // A source named twice is one source.
            else if mirror != url && !request.mirrors.contains(mirror) {
                request.mirrors.append(mirror)
            }
        }
        for (field, message) in DownloadOptions.apply(body.allMembers, to: &request) { body.reject(field, message) }
        return request
    }

    /// What a new download's JSON may hold: its sources, and the options of the table.
    static let newDownloadMembers: Set<String> = DownloadOptions.names.union(["url", "urls", "mirrors", "torrent"])

    /// A .torrent file given as base64 (`torrent`): its bytes and its magnet link, refused when it is not one, is
    /// too large or has too many files, or names files that would leave its folder.
    static func torrentFile(_ body: inout RequestBody) -> (bytes: [UInt8], link: String)? {
        guard let text = body.string("torrent") else { return nil }
        guard let bytes = Base64.decode(text), !bytes.isEmpty else {
            body.reject("torrent", "must be a .torrent file in base64")
            return nil
        }
        do {
            let meta = try TorrentSession.parse(bytes)
            if let problem = TorrentLayout.problem(meta.files) {
                body.reject("torrent", problem)
                return nil
            }
            return (bytes, Magnet.link(infoHash: meta.infoHash, name: meta.name))
        } catch {
            body.reject("torrent", error.message)
            return nil
        }
    }

    /// The most mirrors one download may have.
    static let maxMirrors = 16

    static func checkIdempotencyKey(_ http: HTTPRequest, _ body: inout RequestBody) {
        if let key = http.header("Idempotency-Key"),
            key.isEmpty || key.utf8.count > 255 || !HTTPField.isValue(key)
        {
            body.reject("Idempotency-Key", "must be 1 to 255 bytes without control characters")
        }
    }

    /// The most downloads one batch may add.
    public static let maxBatch = 1000

    /// A batch POST body, `{"downloads": [...], "atomic": false}`: each element checked on its own (its problem,
    /// or the download), or, with `atomic`, every element's problems in one 422 with fields like
    /// `downloads[3].url`.
    static func newDownloads(
        from http: HTTPRequest, _ body: inout RequestBody
    ) throws(Problem)
        -> (items: [Result<NewDownload, Problem>], atomic: Bool)
    {
        body.rejectUnknown(except: ["downloads", "atomic"])
        let atomic = body.bool("atomic") ?? false
        let elements = body.array("downloads", count: 1...maxBatch, required: true) ?? []
        checkIdempotencyKey(http, &body)
        try body.finish()
        var items: [Result<NewDownload, Problem>] = []
        var all: [(field: String, message: String)] = []
        for (index, element) in elements.enumerated() {
            guard case .object(let members) = element else {
                items.append(.failure(.invalid([("downloads[\(index)]", "must be an object")])))
                all.append(("downloads[\(index)]", "must be an object"))
                continue
            }
            var item = RequestBody(members: members)
            let request = newDownload(&item)
            if item.errors.isEmpty {
                items.append(.success(request))
            } else {
                items.append(.failure(.invalid(item.errors)))
                all += item.errors.map { ("downloads[\(index)].\($0.field)", $0.message) }
            }
        }
        if atomic && !all.isEmpty {
            var combined = RequestBody(members: [])
            for error in all { combined.reject(error.field, error.message) }
            do {
                try combined.finish()
            } catch var problem {
                // As a refusal found later (507): every element's fate, 424 for the valid ones.
                let notAdded = Problem(EngineError.notAdded)
                problem.extra = [
                    (
                        "results",
                        .array(
                            items.map { item in
                                var refusal = notAdded
                                if case .failure(let problem) = item { refusal = problem }
                                return .object([
                                    ("status", JSONValue(refusal.status)),
                                    ("problem", refusal.json(instance: "/downloads")),
                                ])
                            })
                    )
                ]
                throw problem
            }
        }
        return (items, atomic)
    }

    /// What makes two POSTs "the same request" for an Idempotency-Key: the body's JSON, whatever the member order
    /// or spacing.
    static func requestHash(_ body: [UInt8]) -> String {
        ETag.of((try? JSONValue.parse(body).canonical().serializedBytes()) ?? body)
    }
}
