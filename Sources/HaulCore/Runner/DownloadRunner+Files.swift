import FoundationEssentials
import Glibc
import HaulLoop

/// The runner's part file: opened or adopted under a free name, checkpointed, closed, verified and published.
extension DownloadRunner {
    // MARK: the part file

    /// Opens the part file under the download's name, or chooses and reserves a free name. A part file that is not
    /// Haul's own (other hard links, another owner) is never written: its name is passed over.
    func openPartFile(_ request: PartFileRequest) {
        guard let download = host.download(id) else { return }
        do throws(FileError) {
            let directory = try host.directory(download.directory, create: true)
            var passedOver: String?
            if let name = request.current {
                do {
                    let existing = try PartFile(directory: directory, name: name + ".part")
                    return try opened(existing, name: name, adopted: nil, passedOver: nil)
                } catch  where error.isForeign {
                    passedOver = "\(error)"
                }
            }
            for n in 0..<10_000 {
                let name = FileName.candidate(request.base, n)
                if directory.exists(name) { continue }
                if let size = directory.size(name + ".part"),
                    !host.isClaimed(directory: download.directory, name: name, except: id)
                {
                    // A part file nobody journals: adopted (the machine's resume plan decides what to keep).
                    guard let adopted = try? PartFile(directory: directory, name: name + ".part") else { continue }
                    return try opened(adopted, name: name, adopted: size, passedOver: passedOver)
                }
                do {
                    // O_EXCL: two downloads of the same name never share a part file.
                    let created = try PartFile(directory: directory, name: name + ".part", exclusive: true)
                    return try opened(created, name: name, adopted: nil, passedOver: passedOver)
                } catch  where error.code == EEXIST {
                    continue
                }
            }
            throw FileError(call: "open", path: directory.shown(request.base), code: EEXIST)
        } catch {
            queue.append(.fileFailed(error))
        }
    }

    private func opened(_ opened: PartFile, name: String, adopted: Int64?, passedOver: String?) throws(FileError) {
        file = opened
        if host.download(id)?.kind.isPlaylist == true { playlistIndex.attach(opened.directory, partFile: opened.name) }
        let usage = try opened.usage()
        queue.append(
            .fileOpened(
                PartFileInfo(
                    name: name, size: usage.size, allocated: usage.allocated,
                    free: try opened.directory.freeBytes(), adopted: adopted,
                    passedOver: passedOver, allowance: host.quotaAllowance(for: id))))
    }

    /// fdatasync off the loop; the machine then journals what the sync covered.
    func checkpoint(_ segments: [Segment], generation: Int) {
        guard let file else { return queue.append(.syncFailed(FileError(call: "fdatasync", path: "", code: EBADF))) }
        let handle: SyncHandle
        do {
            handle = try file.syncHandle()
        } catch {
            return queue.append(.syncFailed(error))
        }
        host.loop.offload(
            { handle.syncAndClose() },
            then: { error in
                self.deliver(error.map { .syncFailed($0) } ?? .synced(segments, generation: generation, final: false))
            })
    }

    /// Closes the part file; syncs it first (blocking: it covers at most one checkpoint interval of data) when the
    /// machine wants what it holds journaled.
    func closeFile(syncing segments: [Segment]?, generation: Int) {
        guard let file else { return }
        if let segments, (try? file.sync()) != nil {
            queue.append(.synced(segments, generation: generation, final: true))
        }
        file.close()
        self.file = nil
    }

    /// Syncs and (for a checksum) hashes the file through its descriptor off the loop.
    func verify(_ algorithm: DigestAlgorithm?) {
        guard let file else { return queue.append(.fileFailed(FileError(call: "fdatasync", path: "", code: EBADF))) }
        let handle: SyncHandle
        do {
            handle = try file.syncHandle()
        } catch {
            return queue.append(.fileFailed(error))
        }
        host.loop.offload(
            { () -> Result<String?, FileError> in
                guard let algorithm else { return handle.syncAndClose().map { .failure($0) } ?? .success(nil) }
                return handle.syncHashAndClose(algorithm).map { $0 }
            },
            then: { result in
                switch result {
                case .success(let digest): self.deliver(.verified(digest))
                case .failure(let error): self.deliver(.fileFailed(error))
                }
            })
    }

    /// Gives the part file its final name: only the file written (not one put in its place, nor one someone else
    /// holds a link to), of the size expected, under the first free name, never replacing anything.
    func publish(_ base: String) {
        guard let file, let download = host.download(id) else {
            return queue.append(.publishFailed(DownloadError(.writeFailed, "the part file is not open")))
        }
        if let why = file.replacedOrShared() {
            return queue.append(
                .publishFailed(
                    DownloadError(
                        .writeFailed,
                        "the part file \(file.path) \(why); "
                            + "nothing was given the final name")))
        }
        do {
            let size = try file.usage().size
            guard size == download.totalBytes ?? size else {
                return queue.append(
                    .publishFailed(
                        DownloadError(
                            .sizeMismatch,
                            "the part file holds \(size) bytes, "
                                + "expected \(download.totalBytes ?? 0)")))
            }
            let directory = file.directory
            for n in 0..<10_000 {
                let name = FileName.candidate(base, n)
                if directory.identity(name) == file.identity {
                    // A crash between link and unlink left both names on this file: finish the unlink.
                    try directory.remove(file.name)
                } else if !(try directory.link(file.name, to: name)) {
                    continue
                }
                let stamp = FileStamp(file.identity, size: size)
                if download.kind.isPlaylist { playlistIndex.remove() }
                file.close()
                self.file = nil
                try directory.sync()
                if download.kind.isPlaylist, let argv = host.config.hooks.remux {
                    return remux(argv, name: name, stamp: stamp, in: directory, of: download)
                }
                return queue.append(.published(name: name, file: stamp))
            }
            queue.append(.publishFailed(DownloadError(.writeFailed, "no free file name for \(base)")))
        } catch {
            queue.append(.publishFailed(DownloadError.file(error)))
        }
    }

    /// A crash after the file got its name and before `completed` was recorded leaves the journal complete and the
    /// finished file in place, the part file gone or (between link and unlink) a second name of it. Only a file that
    /// is Haul's own counts: one planted under that name is not this download's.
    func finishedBeforeACrash() -> String? {
        guard let download = host.download(id), let base = download.filename, let total = download.totalBytes,
            download.durableBytes == total,
            let directory = try? host.directory(download.directory, create: false)
        else { return nil }
        let part = base + ".part"
        if let partFile = directory.status(part) {
            guard partFile.st_nlink == 2, partFile.st_uid == geteuid(), Int64(partFile.st_size) == total,
                let name = directory.otherName(of: part, among: { FileName.candidate(base, $0) })
            else {
                return nil
            }
            try? directory.remove(part)
            return name
        }
        guard directory.size(base) == total, directory.foreignReason(base) == nil else { return nil }
        return base
    }
}
