import HaulCore
import HaulLoop

/// A reply whose body goes out as it is read: the transport's side of a reader of an unfinished file. The answer
/// may wait (for the size a probe is about to tell): `start` or `respond` comes once, then the body.
public protocol ByteSink: AnyObject {
    /// Sends the status and headers; the body follows with `write`.
    func start(status: Int, headers: [(name: String, value: String)])
    /// Answers in full instead (a problem found once the size was known).
    func respond(_ response: HTTPResponse)
    /// Queues `bytes`; `drained` runs once they have been handed to the kernel (the next read waits for it).
    func write(_ bytes: [UInt8], drained: @escaping () -> Void)
    /// Ends the body after what is queued: every byte promised was sent.
    func finish()
    /// Closes the connection at once: a body shorter than its Content-Length (or a chunked one without its last
    /// chunk) reaches the client as cut off, never as a whole file.
    func cut()
    /// Set by the readers: called once when the client disconnects.
    var onClose: (() -> Void)? { get set }
}

/// A read of a download's file that the transport hands to `API.attach(_:for:)`: what was asked, and the answer
/// once it can be given.
public struct FileStreamRequest {
    /// Headers every answer carries besides the file's (CORS).
    public internal(set) var headers: [(name: String, value: String)]
    let id: String
    /// Done for the caller who asked: a revoked token, or a download it no longer sees, ends the read.
    let operations: Operations
    let plan: FilePlan
    /// The answer, when it could be given at once; else the reader gives it once the size is known.
    let answer: FileAnswer?
    /// The path asked, a problem's `instance`.
    let path: String
}
