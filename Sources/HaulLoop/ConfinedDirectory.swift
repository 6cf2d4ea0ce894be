import Foundation

/// A directory inside the download root, opened one component at a time with `O_NOFOLLOW`, and every file operation
/// in it made relative to its descriptor (`openat`, `linkat`, `unlinkat`, `fstatat` without following links). A
/// symbolic link planted anywhere under the root, to a directory or in place of a file, is therefore never followed:
/// nothing Haul writes can land outside the root.
public final class ConfinedDirectory {
    /// For messages only; operations go through `fd`.
    public let path: String
    private let fd: Int32

    /// Opens `root/relative`, creating missing directories when `create` is set. `relative` must already be
    /// validated; `.` and `..` are refused here too.
    public init(root: String, relative: String, create: Bool) throws(FileError) {
        var current = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard current >= 0 else { throw FileError(call: "open", path: root, code: errno) }
        var built = root
        for component in relative.split(separator: "/") {
            let name = String(component)
            built += "/" + name
            guard name != ".", name != ".." else {
                Glibc.close(current)
                throw FileError(call: "open", path: built, code: EACCES)
            }
            if create, mkdirat(current, name, 0o755) != 0, errno != EEXIST {
                let code = errno
                Glibc.close(current)
                throw FileError(call: "mkdir", path: built, code: code)
            }
            let next = openat(current, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            let code = errno
            Glibc.close(current)
            // A symbolic link gives ELOOP (or ENOTDIR): refused, never followed.
            guard next >= 0 else { throw FileError(call: "open", path: built, code: code == ENOTDIR ? ELOOP : code) }
            current = next
        }
        fd = current
        path = built
    }

    deinit { Glibc.close(fd) }

    /// Opens `name` here for writing without following a link, creating it if missing (with `exclusive`, failing
    /// with EEXIST if it exists).
    public func openForWriting(_ name: String, exclusive: Bool) throws(FileError) -> Int32 {
        var flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC
        if exclusive { flags |= O_EXCL }
        let file = openat(fd, name, flags, 0o644)
        guard file >= 0 else { throw FileError(call: "open", path: path + "/" + name, code: errno) }
        return file
    }

    private func status(_ name: String) -> stat? {
        var info = stat()
        return fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 ? info : nil
    }

    /// Whether anything (a file, a directory, a link) has this name.
    public func exists(_ name: String) -> Bool { status(name) != nil }

    /// The size of the regular file `name`; nil if there is none (a link is not one).
    public func size(_ name: String) -> Int64? {
        guard let info = status(name), info.st_mode & S_IFMT == S_IFREG else { return nil }
        return Int64(info.st_size)
    }

    /// Whether two names are hard links of one file.
    public func sameFile(_ a: String, _ b: String) -> Bool {
        guard let first = status(a), let second = status(b) else { return false }
        return first.st_dev == second.st_dev && first.st_ino == second.st_ino
    }

    /// Removes the file `name`; a missing file is not an error.
    public func remove(_ name: String) throws(FileError) {
        if unlinkat(fd, name, 0) != 0, errno != ENOENT {
            throw FileError(call: "unlink", path: path + "/" + name, code: errno)
        }
    }

    /// Gives the file `source` the name `destination` unless that name is taken (by anything, a link included):
    /// linkat fails with EEXIST atomically, so nothing is ever replaced. Returns false when the name is taken.
    public func link(_ source: String, to destination: String) throws(FileError) -> Bool {
        if linkat(fd, source, fd, destination, 0) == 0 {
            try remove(source)
            return true
        }
        switch errno {
        case EEXIST:
            return false
        case EPERM, ENOTSUP, EXDEV, EMLINK:
            // File systems without hard links: rename, after checking the name is still free.
            if exists(destination) { return false }
            guard renameat(fd, source, fd, destination) == 0 else {
                throw FileError(call: "rename", path: path + "/" + destination, code: errno)
            }
            return true
        default:
            throw FileError(call: "link", path: path + "/" + destination, code: errno)
        }
    }

    /// Makes the directory's entries (a new name, a removal) durable.
    public func sync() throws(FileError) {
        guard fsync(fd) == 0 else { throw FileError(call: "fsync", path: path, code: errno) }
    }
}
