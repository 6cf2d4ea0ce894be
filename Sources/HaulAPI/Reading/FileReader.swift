import FoundationEssentials
import HaulCore
import HaulLoop

/// One reader of an unfinished download's file: answers once the size is known (at once, unless a probe is about
/// to tell it), sends what is on disk from its position, then waits for the next bytes, one read at a time (the
/// next after the kernel took the last). It never sends a byte the download's map does not hold, and never one of
/// another version: when bytes are given up, the connection is cut.
final class FileReader {
    let request: FileStreamRequest
    private let sink: ByteSink
    private var answer: FileAnswer?
    private(set) var position: Int64 = 0
    private var file: OpenFile?
    private var sending = false
    /// The byte this reader last asked the download to fetch first.
    private var wantedAt: Int64?
    private(set) var done = false
    /// The clock's time of the last byte sent (or of the start): a read that waits too long ends.
    private(set) var progressAt: Double
    /// Called once when the read ends, however it ends.
    var onEnd: ((FileReader) -> Void)?

    /// Bytes read from the file at once: one write to the client.
    static let chunk = 256 << 10

    init(_ request: FileStreamRequest, sink: ByteSink, now: Double) {
        self.request = request
        self.sink = sink
        progressAt = now
        sink.onClose = { [weak self] in self?.end() }
        if let answer = request.answer { begin(answer) }
    }

    /// The token this read was made with, nil for the server's.
    var tokenID: String? { request.operations.caller.token?.id }

    private func begin(_ answer: FileAnswer) {
        self.answer = answer
        position = answer.first
        sink.start(status: answer.status, headers: answer.headers + request.headers)
    }

    /// Sends what can be sent now, or finishes, or waits for the next write or change.
    func pump(now: Double) {
        guard !done, !sending else { return }
        guard let view = try? request.operations.readView(request.id) else {
            // Removed, or no longer the caller's to see.
            return answer == nil ? respond(Problem(EngineError.notFound(request.id))) : cut()
        }
        guard let answer else {
            if FilePlan.waitsForSize(view) { return }
            do {
                begin(try request.plan.answer(view))
            } catch {
                return respond(error)
            }
            return pump(now: now)
        }
        // Another version of the file: cut off, not padded.
        guard view.version == answer.version else { return cut() }
        if let last = answer.last, position > last { return finish() }
        guard let readable = view.available.readable(from: position) else {
            if view.download.state == .completed, answer.last == nil { return finish() }
            // Nothing more will come without a client's word (paused, queued, failed): what it had is sent.
            if !view.growing { return cut() }
            if view.download.state == .downloading, wantedAt != position {
                // The asked byte is fetched first: on the next turn, out of the change being told now.
                wantedAt = position
                let (operations, id, offset) = (request.operations, request.id, position)
                operations.onNextTurn { operations.want(id, at: offset) }
            }
            return
        }
        if file == nil { file = try? request.operations.openForReading(request.id) }
        guard let file else { return view.growing ? () : cut() }
        let upTo = min(readable, answer.last ?? .max, position + Int64(FileReader.chunk) - 1)
        let bytes: [UInt8]
        do {
            bytes = try file.read(Int(upTo - position + 1), at: position)
        } catch {
            return cut()
        }
        guard !bytes.isEmpty else { return cut() }
        position += Int64(bytes.count)
        progressAt = now
        sending = true
        sink.write(bytes) { [weak self] in
            guard let self else { return }
            self.sending = false
            self.pump(now: self.progressAt)
        }
    }

    /// The read waited `stall` seconds for bytes (or for its answer) that did not come: it ends with what it sent.
    func checkStall(now: Double, stall: Double) {
        guard !done, !sending else { return }
        guard now - progressAt >= stall else {
            // Still waiting: the byte is asked for again (a download that was not fetching then may be now).
            wantedAt = nil
            return pump(now: progressAt)
        }
        guard answer != nil else {
            return respond(
                Problem(
                    status: 504, slug: "read-timeout", title: "Read timed out",
                    detail: "the download told no size within \(Int(stall)) seconds"))
        }
        cut()
    }

    private func respond(_ problem: Problem) {
        guard !done else { return }
        sink.respond(problem.response(instance: request.path).adding(request.headers))
        end()
    }

    /// Every byte asked for was sent.
    private func finish() {
        guard !done else { return }
        sink.finish()
        end()
    }

    /// Ends the read short: the connection closes.
    func cut() {
        guard !done else { return }
        guard answer != nil else { return respond(Problem(EngineError.notFound(request.id))) }
        sink.cut()
        end()
    }

    private func end() {
        guard !done else { return }
        done = true
        sink.onClose = nil
        file = nil
        onEnd?(self)
    }
}
