/// A part of the server that follows downloads' changes (webhooks, the finishing of files, and the next kinds of
/// download): the engine tells each of its observers, in order, without naming them.
protocol DownloadObserver: AnyObject {
    /// `download` changed from `before`, and is about to be stored: what the observer adds to the store (a webhook's
    /// change) goes in the same write.
    func downloadWillBeStored(_ download: Download, changedFrom before: Download)
    /// `download` changed from `before`, and is stored (or waits for the group commit) and announced.
    func downloadChanged(_ download: Download, from before: Download)
    /// A stored download, as the engine loads it at start (before `engineStarted`): an observer notes the few it has
    /// work for then, so a start with a million stored walks them once, not once per observer.
    func downloadLoaded(_ download: Download)
    /// The engine loaded its downloads and starts: what a restart finds half done goes on.
    func engineStarted() throws
    /// The engine stops: nothing more is started.
    func engineStopping()
}

extension DownloadObserver {
    func downloadWillBeStored(_ download: Download, changedFrom before: Download) {}
    func downloadChanged(_ download: Download, from before: Download) {}
    func downloadLoaded(_ download: Download) {}
    func engineStarted() throws {}
    func engineStopping() {}
}
