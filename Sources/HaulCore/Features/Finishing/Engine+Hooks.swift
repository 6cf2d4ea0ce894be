import FoundationEssentials
import Glibc
import HaulLoop

/// The operator's hooks (`on-complete`, `on-failed` in the config file): a program run after a download completes
/// (once its file is in its completed folder) or fails, without a shell, off the loop, a few at once, killed at its
/// timeout. As webhooks' outbox: the hook is marked due with the state that calls for it and stored before it
/// starts, so one a crash kept from running runs after the restart, once.
extension Engine {
    /// Runs the due hook of `id`, unless it runs already or waits for its file to reach the completed folder.
    func runHook(_ id: String) {
        guard let box = machines[id], let pool = hookPool, !hooksRunning.contains(id), !moving.contains(id) else {
            return
        }
        let download = box.machine.download
        guard download.hookPending, let argv = config.hooks.command(for: download.state),
              let snapshot = snapshot(id) else { return }
        if let cluster, download.node != cluster.node { return }
        // Stored as due before it starts: a crash from here on runs it after the restart.
        persister.save(download)
        if config.crashAt == "hook-pending" { kill(getpid(), SIGKILL) }
        hooksRunning.insert(id)
        let state = download.state
        let input = resource(of: snapshot.download).serializedBytes()
        pool.run(argv, environment: hookEnvironment(download), input: input, on: loop) { result in
            self.hookFinished(id, state: state, program: argv[0], result)
        }
    }

    /// Runs the hooks a stop or a crash left due (at start, after the moves are under way).
    func resumeHooks() {
        guard hookPool != nil else { return }
        for box in machines.values where box.machine.download.hookPending { runHook(box.machine.download.id) }
    }

    private func hookFinished(_ id: String, state: DownloadState, program: String, _ result: CommandPool.Result) {
        hooksRunning.remove(id)
        var meta = ["download.id": id, "hook.event": state == .completed ? "on-complete" : "on-failed",
                    "hook.program": program, "hook.status": result.status.map(String.init) ?? "none"]
        if let error = result.error { meta["hook.error"] = error }
        if !result.output.isEmpty {
            meta["hook.output"] = result.output + (result.dropped > 0 ? " [\(result.dropped) more bytes]" : "")
        }
        if result.status == 0 { log.info("hook ran", meta) } else { log.warning("hook failed", meta) }
        guard let box = machines[id], box.machine.download.hookPending, box.machine.download.state == state else {
            return
        }
        let before = box.machine.download
        box.machine.hookRan(status: result.status.map(Int.init), error: result.error, at: clock.wallTime)
        registry.changed(id, from: before)
        changed(id, from: before)
    }

    /// What a hook's environment takes from the server's: nothing that could be a secret (PGPASSWORD, a proxy's
    /// credentials, the server's own `HAUL_*` settings, the token among them), only where programs are and how to
    /// speak.
    static let hookEnvironmentKept: Set<String> = ["PATH", "HOME", "LANG", "LC_ALL", "TZ"]

    /// The server's locale, time zone and program path, and the download's `HAUL_*`.
    private func hookEnvironment(_ download: Download) -> [String] {
        var environment = ProcessInfo.processInfo.environment.filter { Engine.hookEnvironmentKept.contains($0.key) }
        if environment["PATH"] == nil { environment["PATH"] = "/usr/local/bin:/usr/bin:/bin" }
        let root = download.moved ? completedRoot : config.downloadRoot
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
