import Foundation

/// The few file-system operations the engine needs beyond `PartFile`, with errno turned into `FileError`.
public enum Files {
    /// Size of the file at `path`, or nil if there is none.
    public static func size(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int64(info.st_size)
    }

    /// Whether two paths name the same file (hard links of one inode).
    public static func sameFile(_ a: String, _ b: String) -> Bool {
        var first = stat()
        var second = stat()
        guard stat(a, &first) == 0, stat(b, &second) == 0 else { return false }
        return first.st_dev == second.st_dev && first.st_ino == second.st_ino
    }

    public static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// Creates `path` and its missing parents.
    public static func makeDirectories(_ path: String) throws(FileError) {
        var built = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            built += "/" + component
            if mkdir(built, 0o755) != 0, errno != EEXIST {
                throw FileError(call: "mkdir", path: built, code: errno)
            }
        }
    }

    /// Removes a file; a missing file is not an error.
    public static func remove(_ path: String) throws(FileError) {
        if unlink(path) != 0, errno != ENOENT { throw FileError(call: "unlink", path: path, code: errno) }
    }

    /// Gives the file at `source` the name `destination` unless that name is taken: link(2) fails with EEXIST
    /// atomically, so an existing file is never replaced. Returns false when the name is taken.
    public static func linkWithoutReplacing(_ source: String, to destination: String) throws(FileError) -> Bool {
        if link(source, destination) == 0 {
            if unlink(source) != 0 { throw FileError(call: "unlink", path: source, code: errno) }
            return true
        }
        switch errno {
        case EEXIST:
            return false
        case EPERM, ENOTSUP, EXDEV, EMLINK:
            // File systems without hard links: rename, after checking the name is still free.
            if exists(destination) { return false }
            guard rename(source, destination) == 0 else {
                throw FileError(call: "rename", path: destination, code: errno)
            }
            return true
        default:
            throw FileError(call: "link", path: destination, code: errno)
        }
    }

    /// Makes a directory's entries (a rename, a new file) durable.
    public static func syncDirectory(_ path: String) throws(FileError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw FileError(call: "open", path: path, code: errno) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw FileError(call: "fsync", path: path, code: errno) }
    }

    /// `path` made absolute against the working directory, without `.` components or trailing slashes.
    public static func absolute(_ path: String) -> String {
        let full = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        return (full as NSString).standardizingPath
    }
}
