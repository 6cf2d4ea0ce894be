import HaulLoop
import Glibc

/// Moving finished files to their category's completed folder (`completed_directory`), off the loop and
/// crash-safe (`FileMove`): the download records that its file is there only once it is, and a restart finishes a
/// move a crash cut short.
extension Engine {
    /// The root the completed folders are under.
    var completedRoot: String { config.completedRoot ?? config.downloadRoot }

    /// The folder a download's file is in now, opened without following links.
    func fileDirectory(of download: Download) throws(FileError) -> ConfinedDirectory {
        guard download.moved else { return try directory(download.directory, create: false) }
        return try ConfinedDirectory(root: completedRoot, relative: download.fileDirectory, create: false)
    }

    /// Starts moving the finished file of `id` to its completed folder, unless it is there or on its way.
    func moveFinishedFile(_ id: String) {
        guard let download = machines[id]?.machine.download, download.state == .completed, !download.moved,
              let target = download.completedDirectory, let name = download.filename,
              !moving.contains(id) else { return }
        // Several nodes: the node that finished it moves it.
        if let cluster, download.node != cluster.node { return }
        // The completed state is stored first: a crash mid-move must not make the download look unfinished.
        persister.save(download)
        moving.insert(id)
        let request = moveRequest(download, name: name, target: target)
        // The engine is held until the move is back (a weak reference's side table would outlive a stop mid-move,
        // which LeakSanitizer reports).
        loop.offload({ FileMove.run(request) }, then: { outcome in self.moved(id, request, outcome) })
    }

    /// Moves the files a crash or a stop left on their way, and removes the markers of moves stored just before a
    /// crash (at start).
    func resumeMoves() {
        for box in machines.values {
            let download = box.machine.download
            guard download.state == .completed, let target = download.completedDirectory,
                  !download.moveSettled, let name = download.filename else { continue }
            if let cluster, download.node != cluster.node { continue }
            if download.moved {
                settle(download.id, moveRequest(download, name: name, target: target))
            } else {
                moveFinishedFile(download.id)
            }
        }
    }

    /// Removes a stored move's marker off the loop, then records that it is gone.
    private func settle(_ id: String, _ request: FileMove.Request) {
        loop.offload({ FileMove.finish(request) }, then: { _ in
            guard let box = self.machines[id], box.machine.download.moved else { return }
            let before = box.machine.download
            box.machine.settleMove()
            self.registry.changed(id, from: before)
            self.changed(id, from: before)
        })
    }

    private func moveRequest(_ download: Download, name: String, target: String) -> FileMove.Request {
        FileMove.Request(sourceRoot: config.downloadRoot, sourceDirectory: download.directory, name: name,
                         targetRoot: completedRoot, targetDirectory: target,
                         identity: download.fileStamp.map { FileIdentity(device: $0.device, inode: $0.inode) },
                         marker: ".haul-move-\(download.id)", candidate: { FileName.candidate(name, $0) },
                         crashAt: config.crashAt)
    }

    private func moved(_ id: String, _ request: FileMove.Request, _ outcome: FileMove.Outcome) {
        moving.remove(id)
        switch outcome {
        case .moved(let name, let identity, let size):
            guard let box = machines[id] else {
                // Removed meanwhile: the file stays where it went.
                return FileMove.finish(request)
            }
            let before = box.machine.download
            box.machine.finishMove(name: name, file: FileStamp(identity, size: size))
            registry.changed(id, from: before)
            changed(id, from: before)
            persister.save(box.machine.download)
            if config.crashAt == "move-stored" { kill(getpid(), SIGKILL) }
            settle(id, request)
            log.info("file moved", ["download.id": id, "file.path": box.machine.download.relativePath ?? name])
            runHook(id)
        case .gone:
            log.warning("the finished file to move is not there any more", ["download.id": id,
                                                                           "file.name": request.name])
            recordMoveFailure(id, "the finished file is not where it was written any more")
            runHook(id)
        case .failed(let error):
            // It stays where it is, complete; the next start tries again. The hook is told where it is.
            log.warning("cannot move the finished file", ["download.id": id, "error": "\(error)"])
            recordMoveFailure(id, "\(error)")
            runHook(id)
        }
    }

    /// Says in the resource why its file did not move (`move_error`), and stores it.
    private func recordMoveFailure(_ id: String, _ reason: String) {
        guard let box = machines[id] else { return }
        let before = box.machine.download
        box.machine.moveFailed(reason)
        registry.changed(id, from: before)
        changed(id, from: before)
        persister.save(box.machine.download)
    }
}
