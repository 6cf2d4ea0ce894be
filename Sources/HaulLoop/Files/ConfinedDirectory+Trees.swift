internal import CSystem
import Glibc

/// Folders of files under a confined directory (a torrent's): named, synced and removed as one, each step relative
/// to a descriptor and never through a link.
extension ConfinedDirectory {
    /// The absolute path of `name` here, for a library that opens paths itself (libtorrent); `root` is the
    /// download root this directory was opened under.
    public func absolute(_ name: String, root: String) -> String {
        let base = root.hasSuffix("/") ? String(root.dropLast()) : root
        return [base, path, name].filter { !$0.isEmpty }.joined(separator: "/")
    }

    /// Makes the directory `name` here (an existing one is kept), not through a link.
    public func makeDirectory(_ name: String) throws(FileError) {
        if mkdirat(fd, name, 0o755) != 0, errno != EEXIST {
            throw FileError(call: "mkdir", path: shown(name), code: errno)
        }
        var info = stat()
        guard fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw FileError(call: "mkdir", path: shown(name), reason: .notADirectory)
        }
    }

    /// Gives `source` (a file or a folder) of `from` the name `destination` here unless that name is taken:
    /// false when it is.
    public func rename(_ source: String, in from: ConfinedDirectory, to destination: String) throws(FileError) -> Bool {
        if haul_rename_noreplace(from.fd, source, fd, destination) == 0 { return true }
        if errno == EEXIST { return false }
        throw FileError(call: "rename", path: shown(destination), code: errno)
    }

    /// The directory `name` here, opened without following a link.
    public func subdirectory(_ name: String) throws(FileError) -> ConfinedDirectory {
        try ConfinedDirectory(parent: self, name: name)
    }

    /// Removes `name` and, for a folder, everything under it; links are removed, never followed. A missing name
    /// is not an error.
    public func removeTree(_ name: String) throws(FileError) {
        var info = stat()
        guard fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
            if errno == ENOENT { return }
            throw FileError(call: "stat", path: shown(name), code: errno)
        }
        if info.st_mode & S_IFMT == S_IFDIR {
            let inner = try subdirectory(name)
            for entry in try inner.entries() { try inner.removeTree(entry) }
            if unlinkat(fd, name, AT_REMOVEDIR) != 0, errno != ENOENT {
                throw FileError(call: "rmdir", path: shown(name), code: errno)
            }
        } else {
            try remove(name)
        }
    }

    /// Writes every regular file under `name` (itself one, or a folder) and the folders out to disk: what a
    /// library wrote through its own descriptors is durable after it.
    public func syncTree(_ name: String) throws(FileError) {
        var info = stat()
        guard fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
            throw FileError(call: "stat", path: shown(name), code: errno)
        }
        switch info.st_mode & S_IFMT {
        case S_IFDIR:
            let inner = try subdirectory(name)
            for entry in try inner.entries() { try inner.syncTree(entry) }
            try inner.sync()
        case S_IFREG:
            let file = openat(fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
            guard file >= 0 else { throw FileError(call: "open", path: shown(name), code: errno) }
            defer { Glibc.close(file) }
            guard fdatasync(file) == 0 else { throw FileError(call: "fdatasync", path: shown(name), code: errno) }
        default:
            break
        }
    }

    /// Replaces the file `name` with `bytes`, durably: written beside it, synced, then renamed over it.
    public func writeFile(_ name: String, _ bytes: [UInt8]) throws(FileError) {
        let temporary = name + ".tmp"
        try remove(temporary)
        let file = try openForWriting(temporary, exclusive: true)
        defer { Glibc.close(file) }
        var written = 0
        while written < bytes.count {
            let n = bytes[written...].withUnsafeBytes { Glibc.write(file, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileError(call: "write", path: shown(temporary), code: errno)
            }
            written += n
        }
        guard fdatasync(file) == 0 else { throw FileError(call: "fdatasync", path: shown(temporary), code: errno) }
        guard renameat(fd, temporary, fd, name) == 0 else {
            throw FileError(call: "rename", path: shown(name), code: errno)
        }
    }

    /// The bytes of the regular file `name` (at most `limit`), never through a link; nil when there is none.
    public func readFile(_ name: String, limit: Int) -> [UInt8]? {
        let file = openat(fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard file >= 0 else { return nil }
        defer { Glibc.close(file) }
        var info = stat()
        guard fstat(file, &info) == 0, info.st_mode & S_IFMT == S_IFREG, Int(info.st_size) <= limit else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var done = 0
        while done < bytes.count {
            let n = bytes[done...].withUnsafeMutableBytes { Glibc.read(file, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return nil }
            done += n
        }
        return bytes
    }

    /// The names in this directory but `.` and `..`.
    public func entries() throws(FileError) -> [String] {
        let copy = dup(fd)
        guard copy >= 0, let stream = fdopendir(copy) else {
            throw FileError(call: "opendir", path: path, code: errno)
        }
        defer { closedir(stream) }
        rewinddir(stream)
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != ".", name != ".." { names.append(name) }
        }
        return names
    }
}
