import HaulLoop

/// Status answers the engine published for downloads at rest, for the API's own loop to answer `GET
/// /downloads/{id}` with, without a turn of the engine's loop. The engine puts an answer up when it has answered a
/// status read of a download at rest (nothing runs, no write or retry is pending: nothing in it changes unless
/// something changes it), and takes it down, before anything else happens, at any change of the download's machine,
/// its removal or its replacement (`MachineBox`). A change's answer goes out after its turn, so a read that starts
/// after it finds the old answer gone and is answered by the engine. Shared between the loops under one lock.
public final class StatusBoard: @unchecked Sendable {
    private let lock = Lock()
    private var answers: [String: HTTPResponse] = [:]
    /// Whether the API reads from it (from two loops); while not, nothing is put up.
    private var isOpen = false

    /// At most this many answers are up at once (a few megabytes); past it the board is cleared and filled again.
    static let capacity = 4096
    /// A larger answer (a torrent's many files) is always worked out by the engine.
    static let largestBody = 64 << 10

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

    /// Takes down the answer for `id`.
    func withdraw(_ id: String) { _ = lock.withLock { answers.removeValue(forKey: id) } }

    /// How many answers are up (for the tests).
    var count: Int { lock.withLock { answers.count } }
}
