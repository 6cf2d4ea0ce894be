import HaulLoop

/// Status answers and pages of the list the engine published while what they show rested, for the API's own loop
/// to answer `GET /downloads/{id}` and `GET /downloads?...` with, without a turn of the engine's loop.
///
/// The engine puts a status answer up when it has answered a status read of a download at rest (nothing runs, no
/// write or retry is pending: nothing in it changes unless something changes it), and takes it down, before
/// anything else happens, at any change of the download's machine, its removal or its replacement (`MachineBox`).
/// It puts a page up when every download in it rests, and takes every page down, first, at any change of any
/// download's machine, any download added, removed or replaced, and any event (a page tells the events'
/// sequence): what a page holds, its cursor and its length can change with any of them. A change's answer goes
/// out after its turn, so a read that starts after it finds the old answers gone and is answered by the engine.
/// Shared between the loops under one lock; the engine's thread puts up and takes down, any loop reads.
public final class StatusBoard: @unchecked Sendable {
    private let lock = Lock()
    private var answers: [String: HTTPResponse] = [:]
    /// Pages by the request target they answer, as the client sent it (path and query).
    private var pages: [String: HTTPResponse] = [:]
    private var pageBytes = 0
    /// Other fronts' answers about one download (aria2's `tellStatus`, by GID) under keys of their choosing, each
    /// with the download it shows; put up and taken down with its status answer.
    private var frontAnswers: [String: (id: String, value: any Sendable)] = [:]
    /// The keys of `frontAnswers` by download.
    private var frontKeys: [String: [String]] = [:]
    /// Whether any page is up. Read and written on the engine's thread only (which alone puts pages up and takes
    /// them down), so a change looks at it without the lock: a running download's every chunk does.
    private var pagesUp = false
    /// Whether the API reads from it (from two loops); while not, nothing is put up.
    private var isOpen = false

    /// At most this many answers are up at once (a few megabytes); past it the board is cleared and filled again.
    static let capacity = 4096
    /// A larger answer (a torrent's many files) is always worked out by the engine.
    static let largestBody = 64 << 10
    /// The pages up hold at most this many bytes of bodies, and are at most `capacity` (their keys, targets up to
    /// 8 KiB, are not in the bytes: a client walking cursors past the end made a page of 60 bytes of each); past
    /// either they are cleared and filled again.
    static let pageCapacity = 16 << 20
    /// A larger page (a thousand downloads) is always worked out by the engine.
    static let largestPage = 1 << 20

    public init() {}

    /// Lets answers be put up: the API's own loop reads them from now on.
    public func open() { lock.withLock { isOpen = true } }

    /// The answer up for `id`, if any.
    public func answer(for id: String) -> HTTPResponse? { lock.withLock { answers[id] } }

    /// Puts up `response` for `id`; false when the board is closed or the answer too large.
    func put(_ response: HTTPResponse, for id: String) -> Bool {
        guard response.body.count <= StatusBoard.largestBody, response.file == nil else { return false }
        return lock.withLock {
            guard isOpen else { return false }
            if answers.count >= StatusBoard.capacity, answers[id] == nil { answers.removeAll(keepingCapacity: true) }
            answers[id] = response
            return true
        }
    }

    /// Takes down the answers for `id`: its status answer and other fronts'.
    func withdraw(_ id: String) {
        lock.withLock {
            answers.removeValue(forKey: id)
            for key in frontKeys.removeValue(forKey: id) ?? [] { frontAnswers[key] = nil }
        }
    }

    /// What another front put up under `key` (`putFront`), if anything.
    public func frontAnswer(for key: String) -> (any Sendable)? { lock.withLock { frontAnswers[key]?.value } }

    /// Puts up `value`, another front's answer about `id`, under `key`; false when the board is closed, or `key`
    /// already shows another download (two downloads under one key are the engine's to tell apart).
    func putFront(_ value: any Sendable, key: String, for id: String) -> Bool {
        lock.withLock {
            guard isOpen else { return false }
            if let shown = frontAnswers[key]?.id, shown != id { return false }
            if frontAnswers.count >= StatusBoard.capacity, frontAnswers[key] == nil {
                frontAnswers.removeAll(keepingCapacity: true)
                frontKeys.removeAll(keepingCapacity: true)
            }
            if frontAnswers.updateValue((id, value), forKey: key) == nil { frontKeys[id, default: []].append(key) }
            return true
        }
    }

    /// The page up for `target` (a request's path and query, as sent), if any.
    public func page(for target: String) -> HTTPResponse? { lock.withLock { pages[target] } }

    /// Puts up `response` as the answer to `target`, the engine's thread only; false when the board is closed or
    /// the page too large.
    func putPage(_ response: HTTPResponse, for target: String) -> Bool {
        guard response.body.count <= StatusBoard.largestPage, response.file == nil else { return false }
        let put = lock.withLock {
            guard isOpen else { return false }
            let replaced = pages[target]?.body.count ?? 0
            if pageBytes - replaced + response.body.count > StatusBoard.pageCapacity
                || (pages.count >= StatusBoard.capacity && pages[target] == nil)
            {
                pages.removeAll(keepingCapacity: true)
                pageBytes = 0
            }
            pageBytes += response.body.count - (pages.updateValue(response, forKey: target)?.body.count ?? 0)
            return true
        }
        if put { pagesUp = true }
        return put
    }

    /// Takes every page down, the engine's thread only: anything changed that a page may show.
    public func clearPages() {
        guard pagesUp else { return }
        pagesUp = false
        lock.withLock {
            pages.removeAll(keepingCapacity: true)
            pageBytes = 0
        }
    }

    /// Takes everything down, the engine's thread only: the settings or the categories changed, which some
    /// answers show worked out (qBittorrent's seeding limits are a download's own, its category's or the server's).
    public func clearAll() {
        lock.withLock {
            answers.removeAll(keepingCapacity: true)
            frontAnswers.removeAll(keepingCapacity: true)
            frontKeys.removeAll(keepingCapacity: true)
        }
        clearPages()
    }

    /// How many answers are up (for the tests).
    var count: Int { lock.withLock { answers.count } }

    /// How many pages are up (for the tests).
    var pageCount: Int { lock.withLock { pages.count } }
}
