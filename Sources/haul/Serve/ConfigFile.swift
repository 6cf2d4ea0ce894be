import Glibc
import HaulCore

/// `haul serve --config FILE`: reads the file (a regular file of at most 1 MiB) and hands its text to
/// `ConfigText`, which knows the formats.
enum ConfigFile {
    typealias Entry = ConfigText.Entry
    typealias Invalid = ConfigText.Invalid

    /// The entries of the file at `path`, or why it cannot be read.
    static func read(_ path: String) throws(Invalid) -> [Entry] {
        // Non-blocking: opening a FIFO for reading would wait for a writer forever, before the check below.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else {
            throw Invalid(
                description: "cannot read the config file \(path): \(String(cString: strerror(errno)))"
                    + (errno == EACCES ? "; it must be readable by uid \(geteuid())" : ""))
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw Invalid(description: "cannot read the config file \(path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw Invalid(
                description: "the config file \(path) is not a regular file (a FIFO, a device or a "
                    + "directory cannot be one)")
        }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = Glibc.read(fd, &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else {
                throw Invalid(description: "cannot read the config file \(path): \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            bytes += buffer[0..<n]
            guard bytes.count <= 1 << 20 else { throw Invalid(description: "the config file \(path) is over 1 MiB") }
        }
        return try ConfigText.entries(bytes, path: path)
    }
}
