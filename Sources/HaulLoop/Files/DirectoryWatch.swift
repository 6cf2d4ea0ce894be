import Glibc

/// Tells, on the loop thread, which files of one directory were written and closed or moved into it (inotify's
/// IN_CLOSE_WRITE and IN_MOVED_TO), and which are still being written (IN_MODIFY): a folder other programs drop
/// files into.
public final class DirectoryWatch {
    public enum Change: Equatable, Sendable {
        /// Written and closed, or moved in whole.
        case ready(String)
        /// Written to (its writer may write more).
        case writing(String)
        /// The kernel's queue overflowed: some changes were lost, the folder should be read again.
        case overflow
    }

    public let path: String
    private let fd: Int32
    private var watch: ReadWatch?
    private let handler: (Change) -> Void

    public init(loop: EventLoop, path: String, _ handler: @escaping (Change) -> Void) throws(FileError) {
        self.path = path
        self.handler = handler
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { throw FileError(call: "inotify_init1", path: path, code: errno) }
        let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MODIFY | IN_ONLYDIR | IN_DONT_FOLLOW)
        guard inotify_add_watch(fd, path, mask) >= 0 else {
            let code = errno
            close(fd)
            throw FileError(call: "inotify_add_watch", path: path, code: code)
        }
        do {
            watch = try ReadWatch(loop: loop, fd: fd) { [unowned self] in self.readEvents() }
        } catch {
            close(fd)
            throw FileError(call: "event_add", path: path, code: EINVAL)
        }
    }

    deinit {
        watch?.cancel()
        close(fd)
    }

    private func readEvents() {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(fd, &buffer, buffer.count)
            guard count > 0 else { return }
            var offset = 0
            // struct inotify_event: wd, mask, cookie, len (4 bytes each), then len bytes of NUL-padded name.
            while offset + 16 <= count {
                func word(_ at: Int) -> UInt32 {
                    UInt32(buffer[at]) | UInt32(buffer[at + 1]) << 8 | UInt32(buffer[at + 2]) << 16
                        | UInt32(buffer[at + 3]) << 24
                }
                let mask = word(offset + 4)
                let length = Int(word(offset + 12))
                let nameBytes = buffer[(offset + 16)..<min(count, offset + 16 + length)].prefix { $0 != 0 }
                offset += 16 + length
                if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                    handler(.overflow)
                    continue
                }
                guard !nameBytes.isEmpty, mask & UInt32(IN_ISDIR) == 0 else { continue }
                let name = String(decoding: nameBytes, as: UTF8.self)
                if mask & UInt32(IN_CLOSE_WRITE | IN_MOVED_TO) != 0 {
                    handler(.ready(name))
                } else if mask & UInt32(IN_MODIFY) != 0 {
                    handler(.writing(name))
                }
            }
        }
    }
}
