import Glibc
import HaulLoop

/// Moves finished files to their category's completed folder (`completed_directory`), off the loop and crash-safe
/// (`FileMove`): the download records that its file is there only once it is, a refused move says why
/// (`move_error`), and a restart finishes a move a crash cut short. Confined to the loop thread.
final class FileMover: DownloadObserver {
    unowned let host: FinishingHost
    /// Downloads whose finished file is on its way.
    private(set) var moving: Set<String> = []
    /// Told once a file is where it goes (or stays where it is): its hook may run then.
    var onSettled: ((String) -> Void)?
    /// Completed downloads loaded at start whose move a crash or a stop left unsettled.
    private var unsettledAtStart: [String] = []

    init(host: FinishingHost) { self.host = host }

    func downloadChanged(_ download: Download, from before: Download) {
        guard download.state != before.state, download.state == .completed, download.completedDirectory != nil,
            !download.moved
        else { return }
        move(download.id)
    }

    /// Starts moving the finished file of `id` to its completed folder, unless it is there or on its way.
    func move(_ id: String) {
        guard let download = host.download(id), download.state == .completed, !download.moved,
            let target = download.completedDirectory, let name = download.filename,
            !moving.contains(id), host.isLocal(download)
        else { return }
        // The completed state is stored first: a crash mid-move must not make the download look unfinished.
        host.storeNow(download)
        moving.insert(id)
        let request = moveRequest(download, name: name, target: target)
        // Held until the move is back (a weak reference's side table would outlive a stop mid-move, which
        // LeakSanitizer reports).
        host.loop.offload({ FileMove.run(request) }, then: { outcome in self.moved(id, request, outcome) })
    }

    /// Notes a completed download whose move a crash or a stop left unsettled, for `engineStarted`.
    func downloadLoaded(_ download: Download) {
        if download.state == .completed, download.completedDirectory != nil, !download.moveSettled {
            unsettledAtStart.append(download.id)
        }
    }

    /// Moves the files a crash or a stop left on their way, and removes the markers of moves stored just before a
    /// crash (at start).
    func engineStarted() {
        let unsettled = unsettledAtStart
        unsettledAtStart = []
        for id in unsettled {
            guard let download = host.download(id), let target = download.completedDirectory,
                let name = download.filename, host.isLocal(download)
            else { continue }
            if download.moved {
                settle(download.id, moveRequest(download, name: name, target: target))
            } else {
                move(download.id)
            }
        }
    }

    /// Removes a stored move's marker off the loop, then records that it is gone.
    private func settle(_ id: String, _ request: FileMove.Request) {
        host.loop.offload(
            { FileMove.finish(request) },
            then: { _ in
                guard self.host.download(id)?.moved == true else { return }
                self.host.change(id) { $0.settleMove() }
            })
    }

    private func moveRequest(_ download: Download, name: String, target: String) -> FileMove.Request {
        let config = host.config
        return FileMove.Request(
            sourceRoot: config.downloadRoot, sourceDirectory: download.directory, name: name,
            targetRoot: config.completedFolderRoot, targetDirectory: target,
            identity: download.fileStamp.map { FileIdentity(device: $0.device, inode: $0.inode) },
            marker: ".haul-move-\(download.id)", candidate: { FileName.candidate(name, $0) },
            crashAt: config.crashAt)
    }

    private func moved(_ id: String, _ request: FileMove.Request, _ outcome: FileMove.Outcome) {
        moving.remove(id)
        switch outcome {
        case .moved(let name, let identity, let size):
            guard host.download(id) != nil else {
                // Removed meanwhile: the file stays where it went.
                return FileMove.finish(request)
            }
            host.change(id) { $0.finishMove(name: name, file: FileStamp(identity, size: size)) }
            guard let download = host.download(id) else { return }
            host.storeNow(download)
            if host.config.crashAt == "move-stored" { kill(getpid(), SIGKILL) }
            settle(id, request)
            host.log.info("file moved", ["download.id": id, "file.path": download.relativePath ?? name])
        case .gone:
            host.log.warning(
                "the finished file to move is not there any more",
                [
                    "download.id": id,
                    "file.name": request.name,
                ])
            refused(id, "the finished file is not where it was written any more")
        case .failed(let error):
            // It stays where it is, complete; the next start tries again. The hook is told where it is.
            host.log.warning("cannot move the finished file", ["download.id": id, "error": "\(error)"])
            refused(id, "\(error)")
        }
        onSettled?(id)
    }

    /// Says in the resource why its file did not move (`move_error`), and stores it.
    private func refused(_ id: String, _ reason: String) {
        guard host.download(id) != nil else { return }
        host.change(id) { $0.moveFailed(reason) }
        if let download = host.download(id) { host.storeNow(download) }
    }
}
