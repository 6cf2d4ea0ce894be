internal import CSystem
import Foundation

/// A file written at chosen offsets with `pwrite`: the `.part` file a download streams into.
public final class PartFile {
    /// The directory holding it, where it is sized, renamed and removed.
    public let directory: ConfinedDirectory
    public let name: String
    public var path: String { directory.path + "/" + name }
    private var fd: Int32

    /// Opens `name` in `directory` for writing (never through a link), creating it if missing (with `exclusive`,
    /// failing if it exists).
    public init(directory: ConfinedDirectory, name: String, exclusive: Bool = false) throws(FileError) {
        fd = try directory.openForWriting(name, exclusive: exclusive)
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
            let written = pwrite(fd, chunk.bytes.baseAddress! + done, chunk.bytes.count - done, off_t(offset) + off_t(done))
            if written < 0 {
                if errno == EINTR { continue }
                throw FileError(call: "pwrite", path: path, code: errno)
            }
            done += written
        }
    }

    public func truncate(to size: Int64) throws(FileError) {
        guard ftruncate(fd, off_t(size)) == 0 else { throw FileError(call: "ftruncate", path: path, code: errno) }
    }

    /// Makes the written bytes durable (the data, not necessarily the metadata).
    public func sync() throws(FileError) {
        guard fdatasync(fd) == 0 else { throw FileError(call: "fdatasync", path: path, code: errno) }
    }

    /// Reserves disk blocks for the first `size` bytes without changing the file's size. A file system that
    /// cannot do this is not an error; a full one is (`isNoSpace`).
    public func reserve(_ size: Int64) throws(FileError) {
        guard size > 0 else { return }
        let code = haul_reserve_space(fd, 0, off_t(size))
        if code == 0 || code == EOPNOTSUPP || code == ENOSYS { return }
        throw FileError(call: "fallocate", path: path, code: code)
    }

    /// A second descriptor for syncing on a worker thread: closing or truncating this one on the loop thread
    /// meanwhile is then harmless.
    public func syncHandle() throws(FileError) -> SyncHandle {
        let copy = dup(fd)
        guard copy >= 0 else { throw FileError(call: "dup", path: path, code: errno) }
        return SyncHandle(fd: copy, path: path)
    }
}

/// A failed file-system call, with the path and errno it failed on.
public struct FileError: Error, CustomStringConvertible, Sendable {
    public let call: String
    public let path: String
    public let code: Int32

    public init(call: String, path: String, code: Int32) {
        self.call = call
        self.path = path
        self.code = code
    }

    public var isNoSpace: Bool { code == ENOSPC || code == EDQUOT }
    public var description: String {
        code == ELOOP ? "\(path) is a symbolic link, and Haul follows none inside the download root"
            : "\(call) \(path): \(String(cString: strerror(code)))"
    }
}

/// A descriptor to be synced once, off the loop, and closed.
public struct SyncHandle: Sendable {
    let fd: Int32
    let path: String

    /// fdatasync, then close; nil when the data is durable.
    public func syncAndClose() -> FileError? {
        defer { _ = Glibc.close(fd) }
        return fdatasync(fd) == 0 ? nil : FileError(call: "fdatasync", path: path, code: errno)
    }
}
