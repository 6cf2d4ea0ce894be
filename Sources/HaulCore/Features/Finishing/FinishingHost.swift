import HaulLoop

/// What the parts that finish a download's file (its move to the completed folder, the operator's hook) ask of the
/// engine: the downloads as their machines hold them, a change of a machine announced as any other, a write that
/// may not wait, and the loop to hand work off the thread on.
protocol FinishingHost: HostServices {
    func download(_ id: String) -> Download?
    /// Whether this node is the one to act on `download`: alone always; among several, the one that ran it.
    func isLocal(_ download: Download) -> Bool
    /// Changes the machine of `id` with `body`, then indexes, stores and announces it as any change.
    func change(_ id: String, _ body: (inout DownloadMachine) -> Void)
    /// Changes the machine of `id` inside the announcement of a change (a note it is stored with).
    func note(_ id: String, _ body: (inout DownloadMachine) -> Void)
    /// Stores `download` now: what must be on disk before what follows.
    func storeNow(_ download: Download)
    /// The download as the API shows it (a hook's standard input).
    func resource(of download: Download) -> [UInt8]
}

extension EngineConfig {
    /// The root the completed folders are under: `--completed-root`, else the download root.
    var completedFolderRoot: String { completedRoot ?? downloadRoot }
}
