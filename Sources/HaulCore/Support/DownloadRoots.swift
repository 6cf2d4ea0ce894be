import HaulLoop

/// The folders downloads are under, opened without following links: the download root (`--download-dir`) and the
/// completed root the completed folders are in (`--completed-root`, else the download root), with the space kept
/// free on the disk.
struct DownloadRoots {
    let root: String
    let completedRoot: String
    let space: SpacePolicy

    init(_ config: EngineConfig) {
        root = config.downloadRoot
        completedRoot = config.completedFolderRoot
        space = config.space
    }

    /// The directory `relative` to the download root.
    func directory(_ relative: String, create: Bool) throws(FileError) -> ConfinedDirectory {
        try ConfinedDirectory(root: root, relative: relative, create: create)
    }

    /// The folder a download's file is in now (its completed folder once moved there).
    func fileDirectory(of download: Download) throws(FileError) -> ConfinedDirectory {
        guard download.moved else { return try directory(download.directory, create: false) }
        return try ConfinedDirectory(root: completedRoot, relative: download.fileDirectory, create: false)
    }

    /// The finished file of `download`, opened for reading, only while it is still the file Haul wrote (`sameNode`:
    /// its device numbers mean what they meant where it was written).
    func openFinished(_ download: Download, sameNode: Bool) throws(EngineError) -> OpenFile {
        // A seeding torrent's files are complete and named.
        guard download.state == .completed || download.state == .seeding, let name = download.filename else {
            throw .conflict("the download is \(download.state.rawValue), not completed: it has no file yet")
        }
        let file: OpenFile
        do {
            file = try fileDirectory(of: download).openForReading(name)
        } catch {
            if error.isMissing { throw .gone("the file \(download.relativePath ?? name) is not there any more") }
            throw .conflict("the file cannot be served: \(error)")
        }
        // The name holds another file now (replaced, or truncated or grown in place): not this download's.
        if let stamp = download.fileStamp, !stamp.matches(file, sameNode: sameNode) {
            throw .conflict(
                "the file \(download.relativePath ?? name) is no longer the one this download wrote (it "
                    + "was replaced or changed since it completed)")
        }
        return file
    }

    /// The disk under the download root as downloads see it: nil when the root cannot be read.
    func diskSpace() -> DiskSpace? {
        guard let root = try? directory("", create: false), let free = try? root.freeBytes(),
            let total = try? root.totalBytes()
        else { return nil }
        return DiskSpace(free: free, total: total, reserved: space.minFreeSpace)
    }

    /// Why a file of `size` bytes cannot be stored under the root now, or nil when it can.
    func spaceRefusal(for size: Int64) -> DownloadError? {
        guard let free = try? directory("", create: false).freeBytes() else { return nil }
        return space.refusal(total: size, needed: size, free: free)
    }
}
