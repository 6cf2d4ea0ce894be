internal import CSystem
import Glibc

/// A directory inside the download root, opened one component at a time with `O_NOFOLLOW`, and every file operation
/// in it made relative to its descriptor (`openat`, `linkat`, `unlinkat`, `fstatat` without following links). A
/// symbolic link planted anywhere under the root, to a directory or in place of a file, is therefore never followed:
/// nothing Haul writes can land outside the root. Immutable (a path and a descriptor, closed when the last
/// reference goes), so a worker thread may use it for a blocking step (a torrent's folder synced and named).
public final class ConfinedDirectory: @unchecked Sendable {
    /// Relative to the download root ("" for the root), for messages only; operations go through `fd`.
    public let path: String
    let fd: Int32

    /// Opens `root/relative`, creating missing directories when `create` is set. `relative` must already be
    /// validated; `.` and `..` are refused here too.
    public init(root: String, relative: String, create: Bool) throws(FileError) {
        var current = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard current >= 0 else { throw FileError(call: "open", path: "", code: errno) }
        var built = ""
        for component in relative.split(separator: "/") {
            let name = String(component)
            built += built.isEmpty ? name : "/" + name
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
            guard next >= 0 else {
                let code = errno
                // Refused, never followed; what it is decides the message.
                var info = stat()
                let kind = fstatat(current, name, &info, AT_SYMLINK_NOFOLLOW) == 0 ? info.st_mode & S_IFMT : 0
                Glibc.close(current)
                switch kind {
                case S_IFLNK: throw FileError(call: "open", path: built, reason: .symbolicLink)
                case 0, S_IFDIR: throw FileError(call: "open", path: built, code: code)
                default: throw FileError(call: "open", path: built, reason: .notADirectory)
                }
            }
            Glibc.close(current)
            current = next
        }
        fd = current
        path = built
    }

    /// The directory `name` in `parent`, opened without following a link.
    init(parent: ConfinedDirectory, name: String) throws(FileError) {
        guard !name.isEmpty, name != ".", name != "..", !name.contains("/") else {
            throw FileError(call: "open", path: parent.shown(name), code: EACCES)
        }
        let next = openat(parent.fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard next >= 0 else {
            if errno == ELOOP { throw FileError(call: "open", path: parent.shown(name), reason: .symbolicLink) }
            throw FileError(call: "open", path: parent.shown(name), code: errno)
        }
        fd = next
        path = parent.shown(name)
    }

    /// `name` in this directory, relative to the root, for messages.
    public func shown(_ name: String) -> String { path.isEmpty ? name : path + "/" + name }

    deinit { Glibc.close(fd) }

    /// Opens `name` here for reading and writing without following a link, creating it if missing (with
    /// `exclusive`, failing with EEXIST if it exists). A file that was already there is taken only if it is a
    /// regular file of this user with no other hard link: a link planted in its place would otherwise have Haul
    /// write into a file outside the root (or another user's).
    public func openForWriting(_ name: String, exclusive: Bool) throws(FileError) -> Int32 {
        var flags = O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC
        if exclusive { flags |= O_EXCL }
        let file = openat(fd, name, flags, 0o644)
        guard file >= 0 else {
            let code = errno
            if code == ELOOP { throw FileError(call: "open", path: shown(name), reason: .symbolicLink) }
            throw FileError(call: "open", path: shown(name), code: code)
        }
        var info = stat()
        guard fstat(file, &info) == 0 else {
            let code = errno
            Glibc.close(file)
            throw FileError(call: "fstat", path: shown(name), code: code)
        }
        if let why = ConfinedDirectory.foreignReason(info) {
            Glibc.close(file)
            throw FileError(call: "open", path: shown(name), reason: .foreign(why))
        }
        return file
    }

    /// Opens the finished file `name` for reading, never through a link, and only if it is still the file Haul
    /// wrote (a regular file of this user with no other name): what stands there now may have been planted.
    public func openForReading(_ name: String) throws(FileError) -> OpenFile {
        let file = openat(fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard file >= 0 else {
            let code = errno
            if code == ELOOP { throw FileError(call: "open", path: shown(name), reason: .symbolicLink) }
            throw FileError(call: "open", path: shown(name), code: code)
        }
        let opened = OpenFile(descriptor: file)
        var info = stat()
        guard fstat(file, &info) == 0 else { throw FileError(call: "fstat", path: shown(name), code: errno) }
        if let why = ConfinedDirectory.foreignReason(info) {
            throw FileError(call: "open", path: shown(name), reason: .foreign(why))
        }
        opened.size = Int64(info.st_size)
        opened.modified = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
        opened.identity = FileIdentity(info)
        return opened
    }

    /// Why a file is not one Haul may write or name, or nil when it may: a regular file of this user, with
    /// exactly one name.
    public static func foreignReason(_ info: stat) -> String? {
        if info.st_mode & S_IFMT != S_IFREG { return "is not a regular file" }
        if info.st_nlink > 1 { return "has \(info.st_nlink) hard links" }
        if info.st_uid != geteuid() { return "belongs to another user (uid \(info.st_uid))" }
        return nil
    }

    /// Why the file `name` here is not Haul's to take (see `foreignReason`), nil when it is or when there is none.
    public func foreignReason(_ name: String) -> String? {
        status(name).flatMap(ConfinedDirectory.foreignReason)
    }

    /// Bytes an unprivileged user may still write on this directory's file system.
    public func freeBytes() throws(FileError) -> Int64 {
        var info = statvfs()
        guard fstatvfs(fd, &info) == 0 else { throw FileError(call: "statvfs", path: path, code: errno) }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    /// The size of the file system holding this directory, in bytes.
    public func totalBytes() throws(FileError) -> Int64 {
        var info = statvfs()
        guard fstatvfs(fd, &info) == 0 else { throw FileError(call: "statvfs", path: path, code: errno) }
        return Int64(info.f_blocks) * Int64(info.f_frsize)
    }

    /// The device and inode of `name`, without following a link.
    public func identity(_ name: String) -> FileIdentity? {
        status(name).map(FileIdentity.init)
    }

    /// The first of the names `candidate(0)`, `candidate(1)`, ... (up to the first free one) that is another name
    /// of the file `name`, if any.
    public func otherName(of name: String, among candidate: (Int) -> String) -> String? {
        guard let identity = identity(name) else { return nil }
        for n in 0..<10_000 {
            let other = candidate(n)
            guard let found = self.identity(other) else { return nil }
            if found == identity, other != name { return other }
        }
        return nil
    }

    /// What `name` is (without following a link), nil if nothing has that name.
    public func status(_ name: String) -> stat? {
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

    /// Removes the file `name`; a missing file is not an error.
    public func remove(_ name: String) throws(FileError) {
        if unlinkat(fd, name, 0) != 0, errno != ENOENT {
            throw FileError(call: "unlink", path: shown(name), code: errno)
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
            // File systems without hard links: a rename that refuses to replace (renameat2's RENAME_NOREPLACE).
            if haul_rename_noreplace(fd, source, fd, destination) == 0 { return true }
            if errno == EEXIST { return false }
            throw FileError(call: "rename", path: shown(destination), code: errno)
        default:
            throw FileError(call: "link", path: shown(destination), code: errno)
        }
    }

    /// Gives the file `source` of this directory the name `destination` in `other` too, keeping `source`: true when
    /// linked, false when the name is taken, nil when the two are on different file systems (or hard links are not
    /// possible there).
    public func linkKeeping(
        _ source: String, in other: ConfinedDirectory, as destination: String
    ) throws(FileError)
        -> Bool?
    {
        if linkat(fd, source, other.fd, destination, 0) == 0 { return true }
        switch errno {
        case EEXIST: return false
        case EXDEV, EPERM, ENOTSUP, EMLINK: return nil
        default: throw FileError(call: "link", path: other.shown(destination), code: errno)
        }
    }

    /// Copies the regular file `source` of this directory to a new file `destination` in `other` (made with
    /// O_EXCL) and makes its bytes durable (fdatasync). `halfway` runs once half of it is written.
    public func copy(
        _ source: String, to other: ConfinedDirectory, as destination: String,
        halfway: () -> Void = {}
    ) throws(FileError) -> Int64 {
        let input = openat(fd, source, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard input >= 0 else { throw FileError(call: "open", path: shown(source), code: errno) }
        defer { Glibc.close(input) }
        var info = stat()
        guard fstat(input, &info) == 0 else { throw FileError(call: "fstat", path: shown(source), code: errno) }
        let size = Int64(info.st_size)
        let output = try other.openForWriting(destination, exclusive: true)
        defer { Glibc.close(output) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var copied: Int64 = 0
        var halved = false
        while true {
            let count = read(input, &buffer, buffer.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw FileError(call: "read", path: shown(source), code: errno)
            }
            if count == 0 { break }
            var written = 0
            while written < count {
                let n = buffer[written..<count].withUnsafeBytes { write(output, $0.baseAddress, $0.count) }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw FileError(call: "write", path: other.shown(destination), code: errno)
                }
                written += n
            }
            copied += Int64(count)
            if !halved, copied * 2 >= size {
                halved = true
                halfway()
            }
        }
        guard fdatasync(output) == 0 else {
            throw FileError(call: "fdatasync", path: other.shown(destination), code: errno)
        }
        return copied
    }

    /// Puts `text` in the small file `name` (a marker), whole or not at all: written under a temporary name, then
    /// renamed over it.
    public func writeText(_ text: String, to name: String) throws(FileError) {
        let temporary = name + ".tmp"
        try remove(temporary)
        let file = try openForWriting(temporary, exclusive: true)
        Files.writeAll(Array(text.utf8), to: file)
        Glibc.close(file)
        guard renameat(fd, temporary, fd, name) == 0 else {
            throw FileError(call: "rename", path: shown(name), code: errno)
        }
    }

    /// What the small regular file `name` holds (never read through a link), or nil when there is none.
    public func readText(_ name: String, limit: Int = 4096) -> String? {
        let file = openat(fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard file >= 0 else { return nil }
        defer { Glibc.close(file) }
        var buffer = [UInt8](repeating: 0, count: limit)
        let count = read(file, &buffer, limit)
        guard count >= 0 else { return nil }
        return String(decoding: buffer.prefix(count), as: UTF8.self)
    }

    /// Makes the directory's entries (a new name, a removal) durable.
    public func sync() throws(FileError) {
        guard fsync(fd) == 0 else { throw FileError(call: "fsync", path: path, code: errno) }
    }
}

/// Which file a name or a descriptor is: two equal identities are one file.
public struct FileIdentity: Equatable, Sendable {
    public let device: UInt64
    public let inode: UInt64

    init(_ info: stat) {
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }

    public init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }
}

/// A file open for reading, closed when released unless its descriptor was handed on (to libevent, which sends
/// it with sendfile and closes it).
public final class OpenFile: @unchecked Sendable {
    private var descriptor: Int32
    public internal(set) var size: Int64 = 0
    /// Seconds since 1970.
    public internal(set) var modified: Double = 0
    public internal(set) var identity = FileIdentity(device: 0, inode: 0)

    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Up to `count` bytes at `offset` (fewer at the end of the file), read without moving a file position: what a
    /// reader of an unfinished download takes, range by range, from the part file.
    public func read(_ count: Int, at offset: Int64) throws(FileError) -> [UInt8] {
        guard descriptor >= 0 else { throw FileError(call: "pread", path: "", code: EBADF) }
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let n = bytes.withUnsafeMutableBytes { buffer in
                pread(descriptor, buffer.baseAddress! + filled, count - filled, off_t(offset) + off_t(filled))
            }
            if n < 0, errno == EINTR { continue }
            guard n >= 0 else { throw FileError(call: "pread", path: "", code: errno) }
            if n == 0 { break }
            filled += n
        }
        bytes.removeLast(count - filled)
        return bytes
    }

    /// The descriptor, now the caller's to close; -1 once taken.
    func take() -> Int32 {
        defer { descriptor = -1 }
        return descriptor
    }

    deinit {
        if descriptor >= 0 { Glibc.close(descriptor) }
    }
}
