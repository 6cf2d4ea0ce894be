import FoundationEssentials
import Glibc
import HaulLoop

/// The operator's hooks (`on-complete`, `on-failed` in the config file): a program run after a download completes
/// (once its file is in its completed folder) or fails, without a shell, off the loop, a few at once, killed at its
/// timeout. As webhooks' outbox: the hook is marked due with the state that calls for it and stored before it
/// starts, so one a crash kept from running runs after the restart, once. Confined to the loop thread.
final class HookRunner: DownloadObserver {
    unowned let host: FinishingHost
    /// The files on their way to their completed folder: a hook waits for its file.
    private let mover: FileMover
    /// The threads hooks run on (nil without hooks), and the downloads whose hook runs.
    private var pool: CommandPool?
    private var running: Set<String> = []
    /// Downloads loaded at start whose hook a stop or a crash left due.
    private var dueAtStart: [String] = []

    init(host: FinishingHost, mover: FileMover) {
        self.host = host
        self.mover = mover
        mover.onSettled = { [unowned self] id in self.run(id) }
    }

    /// Notes a download whose hook a stop or a crash left due, for `engineStarted`.
    func downloadLoaded(_ download: Download) {
        if download.hookPending { dueAtStart.append(download.id) }
    }

    /// Starts the threads (with hooks configured), and runs the hooks a stop or a crash left due.
    func engineStarted() {
        let due = dueAtStart
        dueAtStart = []
        let hooks = host.config.hooks
        guard !hooks.isEmpty else { return }
        pool = try? CommandPool(concurrency: hooks.concurrency, timeout: hooks.timeout)
        for id in due { run(id) }
    }

    /// The hook of the state it is in is due (or, in a state without one, no longer): marked, and stored with it.
    func downloadWillBeStored(_ download: Download, changedFrom before: Download) {
        guard download.state != before.state,
            (host.config.hooks.command(for: download.state) != nil) != download.hookPending
        else { return }
        host.note(download.id) { $0.markHookPending(!download.hookPending) }
    }

    func downloadChanged(_ download: Download, from before: Download) {
        if download.state != before.state, download.hookPending { run(download.id) }
    }

    /// Runs the due hook of `id`, unless it runs already or waits for its file to reach the completed folder.
    func run(_ id: String) {
        guard let pool, !running.contains(id), !mover.moving.contains(id), let download = host.download(id),
            download.hookPending, let argv = host.config.hooks.command(for: download.state),
            host.isLocal(download)
        else { return }
        // Stored as due before it starts: a crash from here on runs it after the restart.
        host.storeNow(download)
        if host.config.crashAt == "hook-pending" { kill(getpid(), SIGKILL) }
        running.insert(id)
        let state = download.state
        let input = host.resource(of: download)
        pool.run(argv, environment: environment(download), input: input, on: host.loop) { result in
            self.finished(id, state: state, program: argv[0], result)
        }
    }

    private func finished(_ id: String, state: DownloadState, program: String, _ result: CommandPool.Result) {
        running.remove(id)
        var meta = [
            "download.id": id, "hook.event": state == .completed ? "on-complete" : "on-failed",
            "hook.program": program, "hook.status": result.status.map(String.init) ?? "none",
        ]
        if let error = result.error { meta["hook.error"] = error }
        if !result.output.isEmpty {
            meta["hook.output"] = result.output + (result.dropped > 0 ? " [\(result.dropped) more bytes]" : "")
        }
        if result.status == 0 { host.log.info("hook ran", meta) } else { host.log.warning("hook failed", meta) }
        guard let download = host.download(id), download.hookPending, download.state == state else { return }
        let at = host.clock.wallTime
        host.change(id) { $0.hookRan(status: result.status.map(Int.init), error: result.error, at: at) }
    }

    /// What a hook's environment takes from the server's: nothing that could be a secret (PGPASSWORD, a proxy's
    /// credentials, the server's own `HAUL_*` settings, the token among them), only where programs are and how to
    /// speak.
    static let environmentKept: Set<String> = ["PATH", "HOME", "LANG", "LC_ALL", "TZ"]

    /// The server's locale, time zone and program path, and the download's `HAUL_*`.
    private func environment(_ download: Download) -> [String] {
        var environment = ProcessInfo.processInfo.environment.filter { HookRunner.environmentKept.contains($0.key) }
        if environment["PATH"] == nil { environment["PATH"] = "/usr/local/bin:/usr/bin:/bin" }
        let root = download.moved ? host.config.completedFolderRoot : host.config.downloadRoot
        environment["HAUL_ID"] = download.id
        environment["HAUL_STATE"] = download.state.rawValue
        environment["HAUL_URL"] = Redact.url(download.url)
        environment["HAUL_NAME"] = download.filename ?? ""
        environment["HAUL_PATH"] = download.relativePath.map { root + "/" + $0 } ?? ""
        environment["HAUL_SIZE"] = String(download.totalBytes ?? download.receivedBytes)
        environment["HAUL_CATEGORY"] = download.category ?? ""
        environment["HAUL_ERROR"] = download.error?.code.rawValue ?? ""
        environment["HAUL_ERROR_MESSAGE"] = download.error?.message ?? ""
        return environment.map { "\($0.key)=\($0.value)" }.sorted()
    }
}
