internal import CSystem
import Glibc

/// A file written at chosen offsets with `pwrite`: the `.part` file a download streams into. It is known by its
/// descriptor, not its name: what is written, sized, hashed and finally named is always the file Haul opened, even if
/// someone renames, removes or replaces the name meanwhile.
public final class PartFile {
    /// The directory holding it, where it is sized, renamed and removed.
    public let directory: ConfinedDirectory
    public let name: String
    /// Relative to the download root, for messages.
    public var path: String { directory.shown(name) }
    private var fd: Int32
    /// The file opened, to tell whether its name still leads to it.
    public let identity: FileIdentity

    /// Opens `name` in `directory` for writing (never through a link, never a file with other hard links or of
    /// another user), creating it if missing (with `exclusive`, failing if it exists).
    public init(directory: ConfinedDirectory, name: String, exclusive: Bool = false) throws(FileError) {
        fd = try directory.openForWriting(name, exclusive: exclusive)
        var info = stat()
        fstat(fd, &info)
        identity = FileIdentity(info)
        self.directory = directory
        self.name = name
    }

    deinit { close() }

    public func close() {
        if fd >= 0 { _ = Glibc.close(fd) }
        fd = -1
    }

    /// Writes the whole chunk at `offset`, retrying short writes.
    public func write(_ chunk: TransferChunk, at offset: Int64) throws(FileError) {
        var done = 0
        while done < chunk.bytes.count {
            let written = pwrite(
                fd, chunk.bytes.baseAddress! + done, chunk.bytes.count - done, off_t(offset) + off_t(done))
            if written < 0 {
                if errno == EINTR { continue }
                throw FileError(call: "pwrite", path: path, code: errno)
            }
            done += written
        }
    }

    /// Up to `count` bytes from `offset` (fewer at the end of the file); nil when the read fails.
    public func read(_ count: Int, at offset: Int64) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = bytes.withUnsafeMutableBytes {
                pread(fd, $0.baseAddress! + done, count - done, off_t(offset) + off_t(done))
            }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { break }
            done += n
        }
        return Array(bytes.prefix(done))
    }

    public func truncate(to size: Int64) throws(FileError) {
        guard ftruncate(fd, off_t(size)) == 0 else { throw FileError(call: "ftruncate", path: path, code: errno) }
    }

    /// Makes the written bytes durable (the data, not necessarily the metadata).
    public func sync() throws(FileError) {
        guard fdatasync(fd) == 0 else { throw FileError(call: "fdatasync", path: path, code: errno) }
    }

    /// The file's size and the bytes of disk it holds, from its descriptor.
    public func usage() throws(FileError) -> (size: Int64, allocated: Int64) {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw FileError(call: "fstat", path: path, code: errno) }
        return (Int64(info.st_size), Int64(info.st_blocks) * 512)
    }

    /// Why this file may no longer be given its final name, or nil: its name must still lead to it, and it must
    /// still have no other hard link (one made to it meanwhile would share the finished file with someone else).
    public func replacedOrShared() -> String? {
        guard directory.identity(name) == identity else { return "was replaced or removed while the download ran" }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return "cannot be examined (\(String(cString: strerror(errno))))" }
        return ConfinedDirectory.foreignReason(info)
    }

    /// Reserves disk blocks for the first `size` bytes without changing the file's size. Returns false when the file
    /// system cannot (the bytes then take space as they are written); a full one throws (`isNoSpace`).
    @discardableResult
    public func reserve(_ size: Int64) throws(FileError) -> Bool {
        guard size > 0 else { return true }
        let code = haul_reserve_space(fd, 0, off_t(size))
        if code == 0 { return true }
        if code == EOPNOTSUPP || code == ENOSYS { return false }
        throw FileError(call: "fallocate", path: path, code: code)
    }

    /// Gives back the blocks of `ranges` (byte offsets, inclusive ends), reserved and never written: what a failed
    /// download must not keep holding. Inside the file's size they become holes; past its end (where ext4 ignores
    /// hole punching) a truncation to the same size drops them. Best effort: a file system that can do neither
    /// keeps them.
    public func release(_ ranges: [(start: Int64, end: Int64)]) {
        guard let size = try? usage().size else { return }
        for range in ranges where range.end >= range.start && range.start < size {
            let end = min(range.end, size - 1)
            _ = haul_release_space(fd, off_t(range.start), off_t(end - range.start + 1))
        }
        _ = ftruncate(fd, off_t(size))
    }

    /// A second descriptor for syncing and hashing on a worker thread: closing or truncating this one on the loop
    /// thread meanwhile is then harmless.
    public func syncHandle() throws(FileError) -> SyncHandle {
        SyncHandle(fd: try duplicateDescriptor(), path: path)
    }

    func duplicateDescriptor() throws(FileError) -> Int32 {
        let copy = dup(fd)
        guard copy >= 0 else { throw FileError(call: "dup", path: path, code: errno) }
        return copy
    }
}

/// A descriptor of a part file to be synced (and hashed) once, off the loop, and closed.
public struct SyncHandle: Sendable {
    let fd: Int32
    let path: String

    /// fdatasync, then close; nil when the data is durable.
    public func syncAndClose() -> FileError? {
        defer { _ = Glibc.close(fd) }
        return fdatasync(fd) == 0 ? nil : FileError(call: "fdatasync", path: path, code: errno)
    }

    /// fdatasync, then the lower-case hex digest of the whole file read through this descriptor (not its name,
    /// which someone may have changed), then close.
    public func syncHashAndClose(_ algorithm: DigestAlgorithm) -> Result<String, FileError> {
        defer { _ = Glibc.close(fd) }
        guard fdatasync(fd) == 0 else { return .failure(FileError(call: "fdatasync", path: path, code: errno)) }
        return Result { () throws(FileError) in try Digest.hex(ofDescriptor: fd, path: path, algorithm: algorithm) }
    }
}
