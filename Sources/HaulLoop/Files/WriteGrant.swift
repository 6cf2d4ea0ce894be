import Glibc

/// Leave for a transfer loop to write one transfer's body into a part file itself: the next body byte its delegate
/// has not taken yet goes to offset `base`, each after it to the next offset, none past `end`, until the grant is
/// revoked. Its descriptor is a duplicate of the part file's, so
/// the file may be closed meanwhile; `revoke` waits for a write in progress, so once it returns nothing more is
/// written (the file may then be truncated, renamed or removed).
public final class WriteGrant: @unchecked Sendable {
    private let lock = Lock()
    private var fd: Int32
    public let base: Int64
    /// The last offset it may write (inclusive); lowered by `narrow`.
    private var last: Int64
    /// The index in the body of the byte that goes to `base`: what the delegate had taken when it was granted (set
    /// by the fetcher before its loop sees the grant).
    var firstIndex: Int64 = 0

    init(fd: Int32, base: Int64, end: Int64) {
        self.fd = fd
        self.base = base
        last = end
    }

    deinit { revoke() }

    /// Writes the head of `bytes` that fits, as body bytes from `index` on: how many it wrote, 0 when revoked or
    /// full. A failed write revokes it (the bytes then go the other way, and the engine's own write reports it).
    public func write(_ bytes: UnsafeRawBufferPointer, index: Int64) -> Int {
        lock.withLock {
            let offset = base + index - firstIndex
            guard fd >= 0, index >= firstIndex, offset <= last else { return 0 }
            let count = Int(min(Int64(bytes.count), last - offset + 1))
            var done = 0
            while done < count {
                let written = pwrite(fd, bytes.baseAddress! + done, count - done, off_t(offset) + off_t(done))
                if written < 0 {
                    if errno == EINTR { continue }
                    _ = Glibc.close(fd)
                    fd = -1
                    break
                }
                done += written
            }
            return done
        }
    }

    /// The last offset it may write (inclusive).
    public var end: Int64 { lock.withLock { last } }

    /// Nothing is written past `end` once this returns (a segment split: another connection fetches the rest).
    public func narrow(to end: Int64) {
        lock.withLock { last = min(last, end) }
    }

    /// Nothing more is written once this returns.
    public func revoke() {
        lock.withLock {
            if fd >= 0 { _ = Glibc.close(fd) }
            fd = -1
        }
    }
}

extension PartFile {
    /// A grant to write a transfer's next body byte at `base` and the rest after it, up to `end`.
    public func writeGrant(base: Int64, end: Int64) throws(FileError) -> WriteGrant {
        let copy = try duplicateDescriptor()
        return WriteGrant(fd: copy, base: base, end: end)
    }
}
