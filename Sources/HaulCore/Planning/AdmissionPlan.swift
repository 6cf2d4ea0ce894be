import FoundationEssentials
import HaulLoop

/// What admission reads of the server: its categories, the downloads it holds, its space and the tokens' usage.
/// Plain values and lookups, so a plan is a function of them (and a test gives them as a table row does).
struct AdmissionContext {
    var categories: [String: Category] = [:]
    /// `--completed-root`: a token with a root may then name no category with a completed folder.
    var completedRoot: String?
    /// The unfinished download fetching `url` into `directory` as `name`, if one does.
    var existing: (_ url: String, _ directory: String, _ name: String?) -> Download? = { _, _, _ in nil }
    /// Whether a download already has this id.
    var idTaken: (String) -> Bool = { _ in false }
    /// Why a file of this many bytes cannot be stored now (nil: it can).
    var spaceRefusal: (Int64) -> DownloadError? = { _ in nil }
    /// What a token's downloads hold now.
    var usage: (String) -> Int64 = { _ in 0 }
    /// The most new downloads the server takes now.
    var capacity = Int.max
    var defaultConnections = 8
    /// The sequence number of the first new download.
    var nextSequence: Int64 = 1
    var now = Date(timeIntervalSince1970: 0)
    var newID: () -> String = HaulID.random
    /// Whether BitTorrent is on (`--bittorrent`): magnet links and .torrent files are refused otherwise.
    var bittorrent = false
}

/// What becomes of a batch of requests to add downloads: for each, a new download, the existing one it names
/// again, or why not; and the new downloads, built. Works out the category's folder and defaults, the token's
/// root, the folders' depth, duplicates (of what is stored and within the batch), capacity, disk space, an id
/// already taken and the token's quota, each new one's size counted before the next is planned. Pure: the engine
/// commits the plan (stores, registers and announces the new downloads).
struct AdmissionPlan {
    enum Outcome: Equatable {
        /// The new download at this index of `fresh`.
        case new(Int)
        /// The existing download with this id (the same file asked for again).
        case same(String)
        /// The same file as an earlier request of this batch: its new download at this index of `fresh`.
        case sameAsNew(Int)
        case refused(EngineError)
    }

    private(set) var outcomes: [Outcome] = []
    private(set) var fresh: [Download] = []
    /// The tokens that asked, whose limits are known from now on.
    private(set) var owners: [AccessToken] = []

    var refusesAny: Bool { outcomes.contains { if case .refused = $0 { true } else { false } } }

    init(_ requests: [NewDownload], _ context: AdmissionContext) {
        var claimed: [String: Int] = [:]
        var reservedBytes: Int64 = 0
        var ownerReserved: [String: Int64] = [:]
        for request in requests {
            let step = Self.plan(
                request, context, claimed: claimed, reserved: reservedBytes,
                ownerReserved: ownerReserved, fresh: fresh)
            guard case .new(let download, let destination) = step else {
                if case .answered(let outcome) = step { outcomes.append(outcome) }
                continue
            }
            let size = request.expectedBytes ?? 0
            if let owner = request.owner, owner.quotaBytes != nil {
                ownerReserved[owner.id, default: 0] += size
                owners.append(owner)
            }
            reservedBytes += size
            claimed[destination] = fresh.count
            outcomes.append(.new(fresh.count))
            fresh.append(download)
        }
    }

    /// One request's outcome given what the batch planned before it.
    private enum Step {
        case new(Download, destination: String)
        /// Not a new download: the outcome says what instead.
        case answered(Outcome)
    }

    private static func plan(
        _ request: NewDownload, _ context: AdmissionContext, claimed: [String: Int],
        reserved: Int64, ownerReserved: [String: Int64], fresh: [Download]
    ) -> Step {
        var request = request
        // With BitTorrent on, a URL whose path names a .torrent is a torrent (kind file fetches the file itself).
        if context.bittorrent, request.kind == .auto, DownloadKind.pathNamesTorrent(request.url) {
            request.kind = .torrent
        }
        if !context.bittorrent, request.torrent != nil || DownloadKind.isMagnet(request.url) || request.kind == .torrent
        {
            return .answered(
                .refused(
                    .invalid(
                        field: request.torrent != nil ? "torrent" : request.kind == .torrent ? "kind" : "url",
                        message: "BitTorrent is off on this server (--bittorrent turns it on)")))
        }
        var category: Category?
        if let name = request.category {
            // As qBittorrent's API: a category is made before it is used (409), never by a typo.
            guard let found = context.categories[name] else {
                return .answered(
                    .refused(
                        .conflict(
                            "no category '\(name)'; make it first with PUT "
                                + "/categories/\(name)")))
            }
            category = found
        }
        let directory: String
        switch folder(request, category, completedRoot: context.completedRoot) {
        case .success(let folder): directory = folder
        case .failure(let error): return .answered(.refused(error))
        }
        let destination = DownloadRegistry.destination(request.url, directory, request.filename)
        // The same file asked for again: the download there is the answer, unless it is one the asking token may
        // not see (another token's under a shared root), which gets its own.
        if let download = context.existing(request.url, directory, request.filename),
            request.owner?.root == nil || download.owner == request.owner?.id
        {
            return .answered(request.refusal(asking: download).map { .refused($0) } ?? .same(download.id))
        }
        if let index = claimed[destination] { return .answered(.sameAsNew(index)) }
        if fresh.count >= context.capacity { return .answered(.refused(.tooMany)) }
        // Sizes of one batch add up: each must fit beside the ones before it.
        if let size = request.expectedBytes, let refusal = context.spaceRefusal(reserved + size) {
            return .answered(.refused(.insufficientStorage(refusal)))
        }
        if let id = request.id, context.idTaken(id) || fresh.contains(where: { $0.id == id }) {
            return .answered(.refused(.conflict("the id \(id) is taken")))
        }
        if let owner = request.owner, let quota = owner.quotaBytes {
            // What the token's downloads hold, those of this batch before this one included, must leave room.
            let held = context.usage(owner.id) + (ownerReserved[owner.id] ?? 0)
            let size = request.expectedBytes ?? 0
            if held >= quota || held + size > quota {
                return .answered(
                    .refused(
                        .insufficientStorage(
                            DownloadError(
                                .quotaExceeded,
                                "the token "
                                    + "'\(owner.name)' holds \(SpacePolicy.bytes(held)) of its \(SpacePolicy.bytes(quota)) quota"
                                    + (size > 0 ? "; this file needs \(SpacePolicy.bytes(size))" : "")))))
            }
        }
        return .new(
            build(
                request, category, directory: directory, context: context,
                sequence: context.nextSequence + Int64(fresh.count)), destination: destination)
    }

    /// The folder the download lands in: a category's folder holds its downloads (a download's own directory is
    /// then under it); a token's root holds all of the token's, and a category whose folder is elsewhere is not
    /// the token's to use.
    private static func folder(
        _ request: NewDownload, _ category: Category?, completedRoot: String?
    )
        -> Result<String, EngineError>
    {
        var folder = category?.directory ?? ""
        if let root = request.owner?.root {
            if folder.isEmpty {
                folder = root
            } else if folder != root && !folder.hasPrefix(root + "/") {
                return .failure(
                    .invalid(
                        field: "category",
                        message: "the category's folder '\(folder)' is outside "
                            + "the token's root '\(root)'"))
            }
            if let completed = category?.completedDirectory,
                completedRoot != nil
                    || (completed != root && !completed.hasPrefix(root + "/"))
            {
                return .failure(
                    .invalid(
                        field: "category",
                        message: "the category's completed folder '\(completed)' "
                            + "is outside the token's root '\(root)'"))
            }
        }
        let directory = [folder, request.directory].filter { !$0.isEmpty }.joined(separator: "/")
        let depth = directory.split(separator: "/").count
        if depth > FileName.maxDepth || directory.utf8.count > FileName.maxDirectoryBytes {
            return .failure(
                .invalid(
                    field: "directory",
                    message: "with the category's folder it would be \(depth) "
                        + "folders and \(directory.utf8.count) bytes; at most \(FileName.maxDepth) and "
                        + "\(FileName.maxDirectoryBytes)"))
        }
        return .success(directory)
    }

    /// The new download: the category's connections and priority are the defaults.
    private static func build(
        _ request: NewDownload, _ category: Category?, directory: String,
        context: AdmissionContext, sequence: Int64
    ) -> Download {
        var download = Download(
            id: request.id ?? context.newID(), sequence: sequence, url: request.url, headers: request.headers,
            requestedFilename: request.filename, directory: directory, state: request.startPaused ? .paused : .queued,
            connections: request.connections ?? category?.connections ?? context.defaultConnections,
            priority: request.priority ?? category?.priority ?? 0, maxSpeed: request.maxSpeed, createdAt: context.now)
        download.mirrors = request.mirrors.map(Mirror.init)
        download.owner = request.owner?.id
        download.ownerName = request.owner?.name
        // The category's completed folder, with the download's own folder under it as under the category's.
        download.completedDirectory = category?.completedDirectory.map { completed in
            [completed, request.directory].filter { !$0.isEmpty }.joined(separator: "/")
        }
        for carry in DownloadOptions.carrying { carry(request, &download) }
        return download
    }
}
