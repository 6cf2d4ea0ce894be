import Glibc

/// Setting up the server's own directories (given by the administrator); everything under the download root goes
/// through `ConfinedDirectory`.
public enum Files {
    /// Creates `path` and its missing parents; the last component gets `mode` (parents 0755).
    public static func makeDirectories(_ path: String, mode: mode_t = 0o755) throws(FileError) {
        var built = path.hasPrefix("/") ? "" : "."
        let components = path.split(separator: "/")
        for (index, component) in components.enumerated() {
            built += "/" + component
            if mkdir(built, index == components.count - 1 ? mode : 0o755) != 0, errno != EEXIST {
                throw FileError(call: "mkdir", path: built, code: errno)
            }
        }
    }

    /// Makes `path` (a directory of the server's own) reachable by its owner only: the data directory holds the
    /// database, and with it the Authorization and Cookie headers and URL passwords clients gave. Tightens a
    /// directory made earlier with a wider mode, when this user owns it.
    public static func makePrivateDirectory(_ path: String) throws(FileError) {
        try makeDirectories(path, mode: 0o700)
        try restrict(path, to: 0o700)
    }

    /// Creates `path` as an empty file only its owner can read and write, or takes group and other permissions
    /// from an existing one. SQLite gives its -wal and -shm files the database file's mode, so creating the
    /// database this way before SQLite opens it keeps all three private.
    public static func makePrivateFile(_ path: String) throws(FileError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw FileError(call: "open", path: path, code: errno) }
        Glibc.close(fd)
        try restrict(path, to: 0o600)
    }

    /// Drops the permission bits of `path` beyond `mode` (a file of an earlier version may be 0644), if it exists
    /// and this user owns it.
    public static func restrict(_ path: String, to mode: mode_t) throws(FileError) {
        var info = stat()
        guard lstat(path, &info) == 0, info.st_uid == geteuid(), info.st_mode & 0o777 & ~mode != 0 else { return }
        guard chmod(path, info.st_mode & 0o777 & mode) == 0 else {
            throw FileError(call: "chmod", path: path, code: errno)
        }
    }

    /// Why this process (its effective user and groups) cannot use `path` with `access` (`W_OK | X_OK` to create
    /// files in a directory, `R_OK | W_OK` to open a file for writing), or nil when it can. A path that does not exist
    /// answers nil: creating it tells its own error.
    public static func accessProblem(_ path: String, _ access: Int32) -> Int32? {
        guard faccessat(AT_FDCWD, path, access, AT_EACCESS) != 0 else { return nil }
        return errno == ENOENT ? nil : errno
    }

    /// The user and group that own `path`, or nil when it cannot be read.
    public static func owner(_ path: String) -> (uid: uid_t, gid: gid_t)? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return (info.st_uid, info.st_gid)
    }

    /// `path` made absolute against the working directory, without `.` components or trailing slashes.
    /// Lexical, as the administrator wrote it: `..` takes off the component before it, symbolic links stay.
    public static func absolute(_ path: String) -> String {
        let full = path.hasPrefix("/") ? path : workingDirectory() + "/" + path
        var components: [Substring] = []
        for component in full.split(separator: "/") {
            switch component {
            case ".": continue
            case "..": _ = components.popLast()
            default: components.append(component)
            }
        }
        return "/" + components.joined(separator: "/")
    }

    private static func workingDirectory() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return "." }
        return String(cString: buffer)
    }

    /// Writes all of `bytes` to `fd` (standard output or error), going on after a signal interrupts a write.
    /// Writes every byte of `bytes` to `fd`; false when it cannot (a pipe whose reader has gone).
    public static func writeFully(_ bytes: [UInt8], to fd: Int32) -> Bool {
        bytes.withUnsafeBufferPointer { bytes in
            var offset = 0
            while offset < bytes.count {
                let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return false }
                offset += n
            }
            return true
        }
    }

    public static func writeAll(_ bytes: some Collection<UInt8>, to fd: Int32) {
        Array(bytes).withUnsafeBufferPointer { bytes in
            var offset = 0
            while offset < bytes.count {
                let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }
                offset += n
            }
        }
    }
}
