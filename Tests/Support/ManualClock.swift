import Foundation
import HaulLoop

/// A clock that moves only when a test says so: timers fire in order as `advance` passes their time, so code that
/// waits (retries, coalescing, heartbeats) is tested without sleeping.
public final class ManualClock: Clock {
    public private(set) var now: Double = 0
    /// The wall time when `now` was 0 (the clock's creation, unless a test sets another); it moves with `now`.
    public var wallStart = Date()
    public var wallTime: Date { wallStart.addingTimeInterval(now) }
    private var timers: [(at: Double, order: Int, timer: Pending)] = []
    private var order = 0

    public init() {}

    public func after(_ seconds: Double, _ action: @escaping () -> Void) -> ClockTimer {
        let timer = Pending(action: action)
        order += 1
        timers.append((now + max(0, seconds), order, timer))
        return timer
    }

    /// Moves time on by `seconds`, firing every timer that falls due on the way, earliest first (timers they set
    /// fire too when due in time).
    public func advance(_ seconds: Double) {
        let end = now + seconds
        while let next = timers.filter({ !$0.timer.cancelled && $0.at <= end })
            .min(by: { ($0.at, $0.order) < ($1.at, $1.order) })
        {
            timers.removeAll { $0.timer === next.timer }
            now = max(now, next.at)
            next.timer.fire()
        }
        timers.removeAll { $0.timer.cancelled }
        now = end
    }

    /// Moves time on by `seconds` without firing anything: what a process stopped with SIGSTOP sees when it is
    /// woken, every timer overdue and none run yet.
    public func jump(_ seconds: Double) {
        now += seconds
    }

    /// Fires the one earliest timer due now, if any: a loop turn, where `advance` runs every turn that falls in
    /// its time. False when none is due.
    @discardableResult
    public func fireNext() -> Bool {
        guard
            let next = timers.filter({ !$0.timer.cancelled && $0.at <= now })
                .min(by: { ($0.at, $0.order) < ($1.at, $1.order) })
        else { return false }
        timers.removeAll { $0.timer === next.timer }
        next.timer.fire()
        return true
    }

    /// Timers waiting.
    public var pending: Int { timers.filter { !$0.timer.cancelled }.count }

    private final class Pending: ClockTimer {
        private var action: (() -> Void)?
        var cancelled: Bool { action == nil }

        init(action: @escaping () -> Void) { self.action = action }

        func fire() {
            let action = self.action
            self.action = nil
            action?()
        }

        func cancel() { action = nil }
    }
}

/// A fetcher whose transfers never answer: downloads it runs stay probing, for tests of everything around them.
public final class SilentFetcher: Fetcher {
    public private(set) var started: [(TransferID, TransferRequest)] = []
    public private(set) var cancelled: [TransferID] = []

    public init() {}

    public func start(_ id: TransferID, _ request: TransferRequest, delegate: FetchDelegate) throws {
        started.append((id, request))
    }

    public func cancel(_ id: TransferID) { cancelled.append(id) }

    public func resume(_ id: TransferID) {}
}

/// A fetcher that serves one body from memory and moves only when the test pumps it: each `pump` hands every
/// running transfer its next chunk (headers first), honouring `.pause` until `resume`, so what the engine does with
/// the bytes (speed limits, writes) is seen step by step against a manual clock.
public final class ScriptedFetcher: Fetcher {
    private struct Running {
        let request: TransferRequest
        weak var delegate: FetchDelegate?
        var responded = false
        var offset: Int
        var end: Int
        var paused = false
    }

    private let body: [UInt8]
    private let chunkSize: Int
    private var running: [TransferID: Running] = [:]
    public private(set) var requests: [TransferRequest] = []

    public init(body: [UInt8], chunkSize: Int = 16 * 1024) {
        self.body = body
        self.chunkSize = chunkSize
    }

    public func start(_ id: TransferID, _ request: TransferRequest, delegate: FetchDelegate) throws {
        requests.append(request)
        let start = Int(request.range?.start ?? 0)
        let end = request.range?.end.map { Int($0) + 1 } ?? body.count
        running[id] = Running(
            request: request, delegate: delegate, offset: start,
            end: request.method == .head
                ? start : min(end, body.count))
    }

    public func cancel(_ id: TransferID) { running.removeValue(forKey: id) }

    public func resume(_ id: TransferID) { running[id]?.paused = false }

    /// Transfers not yet ended.
    public var count: Int { running.count }

    /// Gives each running transfer (in id order) its headers or its next chunk, or ends it.
    public func pump() {
        for id in running.keys.sorted(by: { $0.value < $1.value }) {
            guard var transfer = running[id], let delegate = transfer.delegate, !transfer.paused else { continue }
            let total = body.count
            let ranged = transfer.request.range != nil
            var headers: [(name: String, value: String)] = [
                ("content-length", String(transfer.end - transfer.offset)),
                ("accept-ranges", "bytes"), ("etag", "\"s1\""),
            ]
            if ranged { headers.append(("content-range", "bytes \(transfer.offset)-\(transfer.end - 1)/\(total)")) }
            if transfer.request.method == .head { headers[0] = ("content-length", String(total)) }
            let response = TransferResponse(
                status: ranged ? 206 : 200, headers: headers,
                effectiveURL: transfer.request.url)
            if !transfer.responded {
                transfer.responded = true
                running[id] = transfer
                if !delegate.transfer(id, responded: response) { end(id, .aborted, response) }
                continue
            }
            guard transfer.offset < transfer.end else {
                end(id, nil, response)
                continue
            }
            let size = min(chunkSize, transfer.end - transfer.offset)
            let decision = body[transfer.offset..<transfer.offset + size].withUnsafeBytes {
                delegate.transfer(id, received: TransferChunk(bytes: $0))
            }
            switch decision {
            case .consumed:
                transfer.offset += size
                running[id] = transfer
            case .pause:
                transfer.paused = true
                running[id] = transfer
            case .abort:
                end(id, .aborted, response)
            }
        }
    }

    private func end(_ id: TransferID, _ failure: TransferFailure?, _ response: TransferResponse) {
        guard let transfer = running.removeValue(forKey: id) else { return }
        transfer.delegate?.transfer(id, ended: TransferResult(failure: failure, response: response))
    }
}
