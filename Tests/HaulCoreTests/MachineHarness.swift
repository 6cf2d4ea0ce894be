import Foundation
import HaulCore
import HaulLoop

/// Plays the runner for a `DownloadMachine` without sockets, files or sleeps: a scripted origin answers each fetch,
/// the part file is bytes in memory, and time is a number the test moves. Every action the machine asks for is kept,
/// in order, for the test to look at.
final class MachineHarness {
    /// What the scripted origin does with one request.
    struct Reply {
        enum Ending {
            /// The body ends as announced.
            case complete
            /// The connection is cut after the body (curl: partial file).
            case cut
            /// Nothing more comes, and the transfer never ends by itself.
            case stall
            /// No response at all: the transfer fails with this.
            case fail(TransferFailure)
            /// The body comes this many bytes a second (delivered at each tick), never faster.
            case trickle(Int)
            /// Not even headers come, and the transfer never ends by itself.
            case silent
        }

        var status = 200
        var headers: [(String, String)] = []
        var body: [UInt8] = []
        var ending = Ending.complete

        static func failure(_ failure: TransferFailure) -> Reply { Reply(status: 0, ending: .fail(failure)) }
    }

    /// One request the origin received.
    struct Request: Equatable {
        var id: TransferID
        var kind: FetchKind
    }

    var machine: DownloadMachine
    var now: Double = 0
    /// The file the origin serves, its validator, and whether it honours ranges.
    var content: [UInt8]
    var etag: String? = "\"v1\""
    var ranges = true
    /// Overrides the origin for chosen requests (by their number, from 0).
    var script: [Int: Reply] = [:]
    /// Overrides how the origin answers every first request (`probe`), and every HEAD, when set.
    var first: Reply?
    var head: Reply?
    /// Overrides how the origin answers ranged requests, when it returns a reply.
    var rangeReply: ((_ start: Int64, _ end: Int64?) -> Reply?)?
    /// Requests (by number) answered as usual up to the headers, then never another byte.
    var stallRequests: Set<Int> = []
    /// What the mirrors serve, when it is not `content` (a file of the same size with other bytes, say).
    var mirrorContent: [UInt8]?
    /// The transfers asked of mirrors.
    private var mirrorTransfers: Set<TransferID> = []

    /// The part file: what was written where, and its size as the file system sees it.
    private(set) var part: [UInt8] = []
    var partOpen = false
    /// An existing part file the runner would find (adopted when unjournaled).
    var existingPart: Int64?
    var free: Int64 = 1 << 40
    var diskFullOnReserve = false
    var failNextWrite = false
    /// A host with no connection to spare refuses this many range fetches.
    var hostRefusals = 0

    private(set) var actions: [MachineAction] = []
    private(set) var requests: [Request] = []
    /// The requests made to mirrors (`fetchFrom`), with the mirror's URL.
    private(set) var mirrorRequests: [(kind: FetchKind, url: String)] = []
    private(set) var savedJournal: [Segment]?
    private(set) var finished = false
    /// Transfers started and not ended, in the order they were asked for.
    private var running: [(id: TransferID, kind: FetchKind)] = []
    /// Bodies coming slowly: what is left and how much comes per tick.
    private var trickling: [TransferID: (rest: ArraySlice<UInt8>, rate: Int, response: TransferResponse)] = [:]
    private var timers: [TimerID: Double] = [:]
    private var pendingSyncs: [MachineEvent] = []
    private var queue: [MachineEvent] = []
    private var dispatching = false
    /// The transfer whose reply is being delivered, and whether the machine stopped it.
    private var current: TransferID?
    private var stopped: Set<TransferID> = []
    private var chunk: ArraySlice<UInt8> = []
    /// Transfers left hanging (stalled), never ending by themselves.
    private var stalled: Set<TransferID> = []

    init(
        size: Int = 64 * 1024, connections: Int = 4, settings: MachineSettings = MachineHarness.settings,
        configure: (inout Download) -> Void = { _ in }
    ) {
        var generator = SplitMix64(seed: UInt64(size))
        content = (0..<size).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        var download = Download(
            id: "d1", sequence: 1, url: "http://origin.test/file.bin", headers: [],
            requestedFilename: nil, directory: "", state: .queued, connections: connections,
            priority: 0, maxSpeed: nil, createdAt: Date(timeIntervalSince1970: 0))
        configure(&download)
        machine = DownloadMachine(download: download, settings: settings)
    }

    static var settings: MachineSettings {
        var settings = MachineSettings()
        settings.maxAttempts = 4
        settings.retryBaseDelay = 1
        settings.stallTimeout = 5
        settings.minSplitSize = 4096
        settings.space = SpacePolicy(minFreeSpace: 0)
        return settings
    }

    var download: Download { machine.download }
    var state: DownloadState { machine.download.state }

    // MARK: driving

    /// Hands the machine `event` and carries out what it asks, with what that raises, until nothing is left.
    func send(_ event: MachineEvent) {
        queue.append(event)
        guard !dispatching else { return }
        dispatching = true
        defer { dispatching = false }
        while !queue.isEmpty {
            let next = queue.removeFirst()
            let asked = machine.handle(next, at: now)
            actions += asked
            for action in asked { perform(action) }
        }
    }

    /// Starts the download and lets the origin answer until nothing more happens without time passing.
    func start() {
        send(.start(now: now))
        settle()
    }

    /// Delivers every reply of every transfer running (and the syncs done) until nothing is pending.
    func settle() {
        var rounds = 0
        while rounds < 10_000 {
            rounds += 1
            if let sync = pendingSyncs.first {
                pendingSyncs.removeFirst()
                send(sync)
                continue
            }
            guard let next = running.first(where: { !stalled.contains($0.id) && trickling[$0.id] == nil }) else {
                return
            }
            play(next.id, next.kind)
        }
    }

    /// Moves time on by `seconds`, one tick a second, firing due timers, settling after each.
    func advance(_ seconds: Double) {
        let end = now + seconds
        while now < end {
            let step = min(1, end - now)
            let due = timers.filter { $0.value <= now + step }.sorted { $0.value < $1.value }
            if let (timer, at) = due.first {
                now = at
                timers.removeValue(forKey: timer)
                send(.timer(timer))
            } else {
                now += step
                for id in trickling.keys.sorted(by: { $0.value < $1.value }) { trickle(id) }
                send(.tick(now: now))
            }
            settle()
        }
    }

    /// Starts a queued download (a slot is free) and runs until it is finished or paused, or `limit` seconds pass.
    func runToEnd(limit: Double = 600) {
        if !machine.isRunning, state == .queued { send(.start(now: now)) }
        settle()
        var waited = 0.0
        while machine.isRunning, waited < limit {
            advance(1)
            waited += 1
        }
    }

    // MARK: the origin

    private var requestCount: Int { requests.count }

    private func reply(to kind: FetchKind, number: Int) -> Reply {
        if let scripted = script[number] { return scripted }
        let content =
            requests.indices.contains(number) && mirrorTransfers.contains(requests[number].id)
            ? mirrorContent ?? self.content : self.content
        let total = Int64(content.count)
        var common: [(String, String)] = [("Content-Type", "application/octet-stream")]
        if let etag { common.append(("ETag", etag)) }
        switch kind {
        case .probe:
            if let first { return first }
            return ranged(start: 0, end: total - 1, common: common, content: content)
        case .head:
            if let head { return head }
            return Reply(
                status: 200,
                headers: common + [("Content-Length", String(total))]
                    + (ranges ? [("Accept-Ranges", "bytes")] : []))
        case .range(let start, let end, let ifRange):
            if let override = rangeReply?(start, end) { return override }
            if let ifRange, ifRange != etag {
                return Reply(status: 200, headers: common + [("Content-Length", String(total))], body: content)
            }
            return ranged(start: start, end: end ?? total - 1, common: common, content: content)
        case .compare(let start, let end, _):
            return ranged(start: start, end: end, common: common, content: content)
        case .whole:
            return Reply(status: 200, headers: common + [("Content-Length", String(total))], body: content)
        }
    }

    private func ranged(start: Int64, end: Int64, common: [(String, String)], content: [UInt8]) -> Reply {
        let total = Int64(content.count)
        if total == 0 { return Reply(status: 416, headers: common + [("Content-Range", "bytes */0")]) }
        guard ranges else {
            return Reply(status: 200, headers: common + [("Content-Length", String(total))], body: content)
        }
        let last = min(end, total - 1)
        return Reply(
            status: 206,
            headers: common + [
                ("Content-Range", "bytes \(start)-\(last)/\(total)"),
                ("Content-Length", String(last - start + 1)),
            ],
            body: Array(content[Int(start)...Int(last)]))
    }

    /// Plays one transfer's reply through the machine: headers, body in 4 KiB chunks, end.
    private func play(_ id: TransferID, _ kind: FetchKind) {
        let number = requests.firstIndex { $0.id == id } ?? 0
        var reply = reply(to: kind, number: number)
        if stallRequests.contains(number) {
            reply.body = []
            reply.ending = .stall
        }
        if case .fail(let failure) = reply.ending {
            end(id)
            return send(.ended(id, TransferResult(failure: failure, message: "scripted", response: nil)))
        }
        if case .silent = reply.ending {
            stalled.insert(id)
            return
        }
        let response = TransferResponse(
            status: reply.status, headers: reply.headers.map { ($0.0.lowercased(), $0.1) },
            effectiveURL: download.url)
        current = id
        send(.responded(id, response))
        current = nil
        guard isRunning(id) else { return }
        if case .compare(let start, _, _) = kind { return compare(id, start: Int(start), reply, response) }
        if case .trickle(let rate) = reply.ending, !stopped.contains(id) {
            trickling[id] = (reply.body[...], rate, response)
            return
        }
        var sent = 0
        // A HEAD has no body; neither has a reply the machine stopped at its headers.
        if kind != .head, !stopped.contains(id) {
            while sent < reply.body.count, isRunning(id), !stopped.contains(id) {
                let size = min(4096, reply.body.count - sent)
                chunk = reply.body[sent..<sent + size]
                current = id
                send(.received(id, count: size))
                current = nil
                sent += size
            }
        }
        guard isRunning(id) else { return }
        if case .stall = reply.ending, !stopped.contains(id) {
            stalled.insert(id)
            return
        }
        end(id)
        let failure: TransferFailure? =
            stopped.remove(id) != nil
            ? .aborted
            : {
                if case .cut = reply.ending { return .cutOff }
                return nil
            }()
        send(
            .ended(
                id,
                TransferResult(
                    failure: failure, message: failure == nil ? "" : "scripted", response: response,
                    bodyBytes: Int64(sent))))
    }

    /// A `compare` transfer, as the runner plays it: the body against the part file, nothing written.
    private func compare(_ id: TransferID, start: Int, _ reply: Reply, _ response: TransferResponse) {
        var differsAt: Int64?
        if !stopped.contains(id) {
            for (offset, byte) in reply.body.enumerated() {
                let at = start + offset
                if at >= part.count || part[at] != byte {
                    differsAt = Int64(at)
                    break
                }
            }
        }
        end(id)
        let aborted = stopped.remove(id) != nil || differsAt != nil
        let checked = differsAt.map { $0 - Int64(start) } ?? (aborted ? 0 : Int64(reply.body.count))
        send(
            .compared(
                id, checked: checked, differsAt: differsAt,
                TransferResult(failure: aborted ? .aborted : nil, response: response)))
    }

    private func isRunning(_ id: TransferID) -> Bool { running.contains { $0.id == id } }

    private func end(_ id: TransferID) {
        running.removeAll { $0.id == id }
        trickling.removeValue(forKey: id)
    }

    /// One tick's worth of a slow body; the transfer ends when it is all sent.
    private func trickle(_ id: TransferID) {
        guard var slow = trickling[id], isRunning(id) else { return }
        let size = min(slow.rate, slow.rest.count)
        if size > 0 {
            chunk = slow.rest.prefix(size)
            slow.rest = slow.rest.dropFirst(size)
            trickling[id] = slow
            current = id
            send(.received(id, count: size))
            current = nil
        }
        guard isRunning(id) else { return }
        if stopped.remove(id) != nil || slow.rest.isEmpty {
            let aborted = size == 0 || !slow.rest.isEmpty
            end(id)
            send(.ended(id, TransferResult(failure: aborted ? .aborted : nil, response: slow.response)))
        }
    }

    /// Writes `bytes` into the part file at `offset`, as a crashed server left them.
    func write(_ bytes: [UInt8], at offset: Int) {
        let end = offset + bytes.count
        if part.count < end { part += [UInt8](repeating: 0, count: end - part.count) }
        part.replaceSubrange(offset..<end, with: bytes)
    }

    // MARK: the runner's side

    private func perform(_ action: MachineAction) {
        switch action {
        case .fetch(let id, let kind), .fetchFrom(let id, let kind, _):
            // The scripted origin serves every source; which one was asked is kept.
            if case .fetchFrom(_, _, let url) = action {
                mirrorRequests.append((kind, url))
                mirrorTransfers.insert(id)
            }
            if case .range = kind, hostRefusals > 0 {
                hostRefusals -= 1
                return queue.append(.noHostConnection(id))
            }
            requests.append(Request(id: id, kind: kind))
            running.append((id, kind))
        case .cancel(let id):
            end(id)
            stalled.remove(id)
            if id == current { stopped.insert(id) }
        case .abort(let id):
            stopped.insert(id)
            if stalled.remove(id) != nil {
                end(id)
                queue.append(.ended(id, TransferResult(failure: .aborted, response: nil)))
            }
        case .write(let id, let offset, let count):
            if failNextWrite {
                failNextWrite = false
                return queue.append(.writeFailed(id, FileError(call: "pwrite", path: "file.bin.part", code: EIO)))
            }
            write(Array(chunk.prefix(count)), at: Int(offset))
            queue.append(.wrote(id, count: count))
        case .openPartFile(let request):
            partOpen = true
            if request.current == nil, let existing = existingPart {
                part =
                    Array(content.prefix(Int(existing)))
                    + [UInt8](
                        repeating: 0xAA,
                        count: max(
                            0,
                            Int(existing)
                                - content.count))
                return queue.append(
                    .fileOpened(
                        PartFileInfo(
                            name: request.base, size: existing, allocated: existing,
                            free: free, adopted: existing)))
            }
            queue.append(
                .fileOpened(
                    PartFileInfo(
                        name: request.current ?? request.base, size: Int64(part.count),
                        allocated: Int64(part.count), free: free)))
        case .truncate(let size):
            part = Array(part.prefix(Int(size)))
        case .reserve:
            queue.append(
                diskFullOnReserve
                    ? .fileFailed(FileError(call: "fallocate", path: "file.bin.part", code: ENOSPC)) : .reserved(true))
        case .release: break
        case .measureFreeSpace: queue.append(.freeSpace(free))
        case .checkpoint(let segments, let generation):
            pendingSyncs.append(.synced(segments, generation: generation, final: false))
        case .closeFile(let segments, let generation):
            if let segments, partOpen { queue.append(.synced(segments, generation: generation, final: true)) }
            partOpen = false
        case .verify(let algorithm):
            queue.append(
                .verified(algorithm.map { _ in Digest.sha256(part).map { String(format: "%02x", $0) }.joined() }))
        case .publish(let base):
            partOpen = false
            queue.append(.published(name: base, file: FileStamp(device: 1, inode: 2, size: Int64(part.count))))
        case .deletePartFile:
            part = []
            partOpen = false
        case .schedule(let timer, let delay): timers[timer] = now + delay
        case .cancelTimer(let timer): timers.removeValue(forKey: timer)
        case .saveJournal(let journal): savedJournal = journal
        case .log: break
        // No torrent in the scripted origin's downloads.
        case .torrent: break
        case .finished: finished = true
        }
    }

    // MARK: looking at what happened

    var fetches: [FetchKind] { requests.map(\.kind) }
    var rangeFetches: [(start: Int64, end: Int64?, ifRange: String?)] {
        requests.compactMap { if case .range(let s, let e, let i) = $0.kind { return (s, e, i) } else { return nil } }
    }
    var scheduledDelays: [Double] {
        actions.compactMap { if case .schedule(_, let delay) = $0 { return delay } else { return nil } }
    }
    var errorCode: String? { download.error?.code.rawValue }
    /// Whether the part file holds exactly the origin's bytes.
    var partIsTheFile: Bool { part == content }
    var runningCount: Int { running.count }
    var pendingTimers: Int { timers.count }

    func count(where predicate: (MachineAction) -> Bool) -> Int { actions.filter(predicate).count }
}
