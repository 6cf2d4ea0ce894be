import FoundationEssentials
import HaulLoop

/// What the server's own parts in front of the engine read and arrange, that no client's request names: the
/// engine's clock and flags, its changes as they happen, the running downloads' progress, the figures of
/// `/status` and `/metrics`, whether the store answers, and work for the loop's next turn.
extension Operations {
    /// The engine's time (the loop's, or a test's manual clock): what the API's timers keep too.
    public var clock: Clock { engine.clock }

    /// The flags' settings, with a client's changes to the settings in force.
    public var config: EngineConfig { engine.config }

    /// What the flags set of what a client may change.
    public var defaultSettings: ServerSettings { engine.defaultSettings }

    /// `listener` is told of every change and asked how a download is shown to the operator's programs.
    public func listen(_ listener: EngineListener) { engine.listener = listener }

    /// How many downloads the server holds.
    public var count: Int { engine.count }

    /// The download `id` if there is one the caller sees, else nil.
    public func snapshot(_ id: String) -> DownloadSnapshot? { try? get(id) }

    /// Ids of the downloads holding a slot (probing, downloading, verifying).
    public var runningIDs: [String] { engine.runningIDs }

    /// Bytes received so far by `id` (the hot counter, without building a snapshot).
    public func receivedBytes(_ id: String) -> Int64? { engine.receivedBytes(id) }

    /// Runs `work` on the loop's next turn, after what waits now: how a bulk change goes a slice at a time.
    public func onNextTurn(_ work: @escaping () -> Void) { engine.onNextTurn(work) }

    /// The speed limit over all downloads now (the schedule's window's, this node's share), nil for none.
    public var currentSpeedLimit: Int64? { engine.currentSpeedLimit }

    /// Body bytes written to part files since this process started.
    public var bytesReceived: Int64 { engine.bytesReceived }

    /// The disk under the download root as downloads see it: nil when the root cannot be read.
    public func diskSpace() -> DiskSpace? { engine.roots.diskSpace() }

    /// This node's name when it shares the store with other nodes.
    public var node: String? { engine.node }

    /// The nodes alive, this one included: the limits are shared out among them.
    public var nodeShare: Int { engine.nodeShare }

    /// Webhook deliveries by state (asked of the store at most every 10 s); nil when the store cannot say.
    public func webhookDeliveryCounts() -> [WebhookDelivery.State: Int]? { engine.webhooks.deliveryCounts() }

    /// Why the store cannot be used now, or nil when it answers (`/readyz`).
    public func storeProblem() -> String? { engine.storeProblem() }
}
