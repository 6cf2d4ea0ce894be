/// Names one transfer a download asked for; unique within the process.
public struct TransferID: Hashable, Sendable, CustomStringConvertible {
    public let value: Int
    public init(_ value: Int) { self.value = value }
    public var description: String { "t\(value)" }
}

/// Hears what happens to the transfers it started, on the loop thread.
public protocol FetchDelegate: AnyObject {
    /// The final response's status and headers, before any body byte. Return false to stop the transfer (it then
    /// ends with `.aborted`).
    func transfer(_ id: TransferID, responded response: TransferResponse) -> Bool
    /// A piece of the body, in order; valid only during this call.
    func transfer(_ id: TransferID, received chunk: TransferChunk) -> ChunkDecision
    /// The end: success, failure, or `.aborted` after the delegate asked to stop. Not after `cancel`.
    func transfer(_ id: TransferID, ended result: TransferResult)
    /// Body bytes the fetcher wrote into the file itself, under the transfer's `WriteGrant`: in order with the
    /// chunks, answered as a chunk is (a paused count is offered again).
    func transfer(_ id: TransferID, wrote count: Int) -> ChunkDecision
}

extension FetchDelegate {
    /// A delegate that gives no grant hears of no bytes written for it.
    public func transfer(_ id: TransferID, wrote count: Int) -> ChunkDecision { .abort }
}

/// Runs HTTP transfers: libcurl's multi handle in the server, a script in tests. The first two delegate calls come
/// from inside the fetcher's own callbacks, where none of these methods but `grant` may be called back.
public protocol Fetcher: AnyObject {
    /// Starts `request`; throws when it cannot start (a header that breaks the field grammar, curl refusing the
    /// handle). The delegate is held until the transfer ends or is cancelled.
    func start(_ id: TransferID, _ request: TransferRequest, delegate: FetchDelegate) throws
    /// Stops the transfer at once; its delegate hears nothing more. Unknown ids are ignored.
    func cancel(_ id: TransferID)
    /// Continues a transfer held by `ChunkDecision.pause`; the held bytes may be delivered before this returns.
    func resume(_ id: TransferID)
    /// Whether this fetcher can write a transfer's body into its file itself (`grant`).
    var grantsWrites: Bool { get }
    /// Has the transfer's next body bytes written under `grant` on the fetcher's own thread, each told as `wrote`
    /// (what does not fit comes as chunks); false when it does not take it. Revoked by whoever ends the transfer.
    func grant(_ id: TransferID, _ grant: WriteGrant) -> Bool
}

extension Fetcher {
    public var grantsWrites: Bool { false }
    public func grant(_ id: TransferID, _ grant: WriteGrant) -> Bool { false }
}
