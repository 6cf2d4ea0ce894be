import FoundationEssentials
import HaulLoop

/// One HLS download's transfer, as its runner sees it: a response, then the output's bytes in order, then the end.
/// Underneath, the playlist is read (a master's variant chosen, then its media playlist), and the pieces (init
/// sections and segments, or byte ranges of one file) are fetched `window` at a time with the download's own
/// request settings, decrypted, and handed on in order, each piece's size recorded in the index first. A request
/// that fails ends the stream with its failure: the machine retries as for any transfer, asking for the rest with
/// the playlist's fingerprint as If-Range.
final class HLSStream: FetchDelegate {
    enum Piece {
        case map(Int)
        case segment(Int)
    }

    enum Request {
        case playlist
        case piece(Int)
        case key(Int)
    }

    let id: TransferID
    private unowned let owner: HLSTransfers
    let template: TransferRequest
    /// The host of the download's own URL: the only one its credentials go to.
    private let templateHost: String?
    /// Held until the stream ends or is cancelled, as the fetcher holds a transfer's delegate.
    private var delegate: FetchDelegate?
    let wanted: String?
    private let window: Int
    let index: HLSIndex
    weak var observer: HLSObserver?

    private var requests: [TransferID: Request] = [:]
    /// The host each request holds a connection of.
    private var hosts: [TransferID: String] = [:]
    private var bodies: [TransferID: [UInt8]] = [:]
    private var answers: [TransferID: TransferResponse] = [:]
    /// Why a request was stopped from inside its callback: the failure its end reports.
    private var refusals: [TransferID: TransferResult] = [:]
    var playlistURL: String
    var playlistsRead = 0
    var firstAnswer: TransferResponse?
    var info = HLSInfo()
    var media: HLSMediaPlaylist?
    var pieces: [Piece] = []
    var fingerprint = ""
    var response: TransferResponse?
    private var responded = false
    var nextFetch = 0
    var nextDeliver = 0
    /// Bytes of the next piece already handed on (or, resuming, to skip).
    var offset: Int64 = 0
    private var fetched: [Int: [UInt8]] = [:]
    private var ready: [Int: [UInt8]] = [:]
    private var keys: [Int: [UInt8]] = [:]
    private var keysAsked: Set<Int> = []
    private var held = false
    private var finished = false
    private var pumpQueued = false
    /// A playlist to ask for once its host has a connection to spare.
    var pendingPlaylist: String?
    private var delivered: Int64 = 0
    /// Seconds of media in the segments handed on (from the start of the output): what the size is estimated by.
    var secondsDone: Double = 0
    var writtenBefore: Int64 = 0

    init(
        id: TransferID, owner: HLSTransfers, request: TransferRequest, delegate: FetchDelegate, variant: String?,
        window: Int, index: HLSIndex, observer: HLSObserver?
    ) {
        self.id = id
        self.owner = owner
        template = request
        templateHost = URLComponents(string: request.url)?.host?.lowercased()
        self.delegate = delegate
        wanted = variant
        self.window = window
        self.index = index
        self.observer = observer
        playlistURL = request.url
    }

    /// The largest piece held in memory; a larger one is refused.
    static let maxPiece = 256 << 20
    static let maxKey = 64

    func start() {
        pendingPlaylist = playlistURL
        pumpSoon()
    }

    func cancel() {
        finished = true
        for request in requests.keys {
            owner.fetcher.cancel(request)
            released(request)
        }
        requests.removeAll()
        delegate = nil
    }

    func resume() {
        guard held else { return }
        held = false
        pumpSoon()
    }

    // MARK: requests

    /// Asks for `what`; false when its host has no connection to spare (it is asked again when one is freed).
    @discardableResult
    func ask(_ what: Request, url: String, range: HLSByteRange?) -> Bool {
        let origin = host(of: url) ?? ""
        guard owner.acquire(origin) else { return false }
        var request = template
        request.url = url
        request.method = .get
        request.range = range.map { ($0.offset, $0.offset + $0.length - 1) }
        request.ifRange = nil
        // The credentials go only to the host the download names.
        if origin != templateHost { request.credentials = nil }
        let sub = owner.newRequestID()
        requests[sub] = what
        hosts[sub] = origin
        do {
            try owner.fetcher.start(sub, request, delegate: self)
        } catch {
            requests.removeValue(forKey: sub)
            owner.release(hosts.removeValue(forKey: sub) ?? origin)
            fail(TransferResult(failure: .other, message: "\(error)", response: nil))
        }
        return true
    }

    /// Gives back the connection `sub` held.
    private func released(_ sub: TransferID) {
        if let host = hosts.removeValue(forKey: sub) { owner.release(host) }
    }

    private func host(of url: String) -> String? { URLComponents(string: url)?.host?.lowercased() }

    func transfer(_ sub: TransferID, responded answer: TransferResponse) -> Bool {
        guard let what = requests[sub] else { return false }
        answers[sub] = answer
        guard (200..<300).contains(answer.status) else {
            let error = DownloadError.http(answer.status, response: answer)
            refusals[sub] = refusal(
                error.code.rawValue, "\(describe(what)): the server answered HTTP \(answer.status)",
                retryable: error.retryable)
            return false
        }
        if case .piece(let piece) = what, let range = range(of: piece) {
            let content = answer.header("content-range").flatMap(ContentRange.init)
            guard answer.status == 206, content?.first == range.offset else {
                refusals[sub] = refusal(
                    "range_mismatch", "\(describe(what)): the server did not answer its byte range", retryable: false)
                return false
            }
        }
        if case .playlist = what, firstAnswer == nil { firstAnswer = answer }
        return true
    }

    func transfer(_ sub: TransferID, received chunk: TransferChunk) -> ChunkDecision {
        guard let what = requests[sub] else { return .abort }
        let limit: Int
        switch what {
        case .playlist: limit = HLSParser.maxBytes
        case .piece: limit = Self.maxPiece
        case .key: limit = Self.maxKey
        }
        guard (bodies[sub]?.count ?? 0) + chunk.count <= limit else {
            refusals[sub] = refusal(
                "playlist_invalid", "\(describe(what)) is longer than \(limit) bytes", retryable: false)
            return .abort
        }
        chunk.append(to: &bodies[sub, default: []])
        return .consumed
    }

    func transfer(_ sub: TransferID, ended result: TransferResult) {
        // What follows may start or cancel requests: never from inside the fetcher's callback.
        owner.turns.later { [self] in requestEnded(sub, result) }
    }

    private func requestEnded(_ sub: TransferID, _ result: TransferResult) {
        released(sub)
        guard !finished, let what = requests.removeValue(forKey: sub) else { return }
        let body = bodies.removeValue(forKey: sub) ?? []
        let answer = answers.removeValue(forKey: sub)
        if let refused = refusals.removeValue(forKey: sub) { return fail(refused) }
        if result.failure != nil {
            var failed = result
            failed.message = "\(describe(what)): \(result.message)"
            return fail(failed)
        }
        switch what {
        case .playlist: playlistRead(body, url: answer?.effectiveURL ?? playlistURL)
        case .key(let key):
            guard body.count == 16 else {
                return fail(refusal("playlist_invalid", "the key of segments is not 16 bytes long", retryable: false))
            }
            keys[key] = body
            decryptWaiting()
        case .piece(let piece):
            fetched[piece] = body
            decryptWaiting()
        }
        pump()
    }

    private func describe(_ what: Request) -> String {
        switch what {
        case .playlist: return "the playlist"
        case .key: return "a key"
        case .piece(let piece):
            switch pieces[piece] {
            case .map: return "the init section"
            case .segment(let n): return "segment \(n + 1)"
            }
        }
    }

    func refusal(_ code: String, _ message: String, retryable: Bool) -> TransferResult {
        TransferResult(failure: .source(code: code, retryable: retryable), message: message, response: response)
    }

    // MARK: pieces

    private func decryptWaiting() {
        guard let media else { return }
        for (piece, raw) in fetched {
            guard case .segment(let n) = pieces[piece], let keyIndex = media.segments[n].key else {
                ready[piece] = raw
                fetched.removeValue(forKey: piece)
                continue
            }
            guard let key = keys[keyIndex] else { continue }
            let iv = media.keys[keyIndex].iv ?? Self.iv(sequence: media.segments[n].sequence)
            do {
                ready[piece] = try Cipher.aes128CBCDecrypt(raw, key: key, iv: iv)
                fetched.removeValue(forKey: piece)
            } catch {
                return fail(
                    refusal(
                        "decrypt_failed", "segment \(n + 1) does not decrypt with its AES-128 key", retryable: false))
            }
        }
    }

    /// RFC 8216 5.2: without an IV, the media sequence number as a big-endian 128-bit number.
    static func iv(sequence: Int64) -> [UInt8] {
        var iv = [UInt8](repeating: 0, count: 16)
        var value = UInt64(bitPattern: sequence)
        for index in (8..<16).reversed() {
            iv[index] = UInt8(value & 0xFF)
            value >>= 8
        }
        return iv
    }

    func pumpSoon() {
        guard !pumpQueued else { return }
        pumpQueued = true
        owner.turns.later { [self] in
            pumpQueued = false
            pump()
        }
    }

    /// Answers first; then asks for what the window allows, and hands on what is ready, in order.
    private func pump() {
        guard !finished, let delegate else { return }
        if let url = pendingPlaylist {
            if ask(.playlist, url: url, range: nil) { pendingPlaylist = nil }
            return
        }
        guard let response else { return }
        if !responded {
            responded = true
            guard delegate.transfer(id, responded: response) else { return stop() }
            if template.method == .head { return end() }
        }
        launch()
        while !held, !finished, let bytes = ready[nextDeliver] {
            if nextDeliver >= index.sizes.count {
                index.append(Int64(bytes.count))
            } else if index.sizes[nextDeliver] != Int64(bytes.count) {
                index.begin(fingerprint + "-changed")
                return fail(
                    refusal(
                        "remote_changed", "a segment changed size since it was written; starting over",
                        retryable: true))
            }
            while offset < Int64(bytes.count) {
                let count = min(Int(Int64(bytes.count) - offset), 256 << 10)
                let decision = bytes.withUnsafeBytes { raw in
                    delegate.transfer(
                        id,
                        received: TransferChunk(
                            bytes: UnsafeRawBufferPointer(rebasing: raw[Int(offset)..<Int(offset) + count])))
                }
                switch decision {
                case .consumed:
                    offset += Int64(count)
                    delivered += Int64(count)
                case .pause:
                    held = true
                    return
                case .abort:
                    return stop()
                }
                guard !finished else { return }
            }
            ready.removeValue(forKey: nextDeliver)
            if case .segment(let n) = pieces[nextDeliver], let media {
                info.segmentsDone += 1
                secondsDone += media.segments[n].duration
            }
            nextDeliver += 1
            offset = 0
            if !info.sizeExact, secondsDone > 0, let media {
                info.size = Int64(Double(writtenBefore + delivered) * media.duration / secondsDone)
            }
            observer?.playlistProgress(info)
            launch()
        }
        if !finished, nextDeliver == pieces.count { end() }
    }

    private func launch() {
        guard let media else { return }
        while requests.count < window, nextFetch < pieces.count, nextFetch < nextDeliver + 2 * window {
            let piece = nextFetch
            switch pieces[piece] {
            case .map(let map):
                guard ask(.piece(piece), url: media.maps[map].uri, range: media.maps[map].range) else { return }
            case .segment(let n):
                let segment = media.segments[n]
                if let key = segment.key, keys[key] == nil, !keysAsked.contains(key) {
                    guard ask(.key(key), url: media.keys[key].uri, range: nil) else { return }
                    keysAsked.insert(key)
                }
                guard ask(.piece(piece), url: segment.uri, range: segment.range) else { return }
            }
            nextFetch += 1
            if finished { return }
        }
    }

    private func end() {
        finished = true
        owner.ended(id)
        let delegate = self.delegate
        self.delegate = nil
        delegate?.transfer(id, ended: TransferResult(failure: nil, response: response, bodyBytes: delivered))
    }

    /// The runner stopped the stream from its callback: it ends as `.aborted`, on the next turn.
    private func stop() {
        fail(TransferResult(failure: .aborted, message: "stopped", response: response))
    }

    func fail(_ result: TransferResult) {
        guard !finished else { return }
        finished = true
        for request in requests.keys {
            owner.fetcher.cancel(request)
            released(request)
        }
        requests.removeAll()
        owner.ended(id)
        let delegate = self.delegate
        self.delegate = nil
        var result = result
        result.response = result.response ?? response
        result.bodyBytes = delivered
        owner.turns.later { delegate?.transfer(self.id, ended: result) }
    }
}
