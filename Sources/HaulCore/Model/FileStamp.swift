import HaulLoop

/// Which file a finished download's name held when it was given: device, inode and size, recorded at completion.
/// The file route serves a name only while it still holds that file: one replaced by another regular file (a new
/// inode), truncated or grown is not the download any more.
public struct FileStamp: Sendable, Equatable {
    public var device: UInt64
    public var inode: UInt64
    public var size: Int64

    public init(device: UInt64, inode: UInt64, size: Int64) {
        self.device = device
        self.inode = inode
        self.size = size
    }

    public init(_ identity: FileIdentity, size: Int64) {
        self.init(device: identity.device, inode: identity.inode, size: size)
    }

    /// Whether `file` is the one recorded. Another node sees a shared directory through a device number of its
    /// own (NFS): there the inode and size decide.
    public func matches(_ file: OpenFile, sameNode: Bool) -> Bool {
        file.identity.inode == inode && file.size == size && (!sameNode || file.identity.device == device)
    }

    /// As stored: `device:inode:size`.
    var text: String { "\(device):\(inode):\(size)" }

    init?(text: String) {
        let parts = text.split(separator: ":")
        guard parts.count == 3, let device = UInt64(parts[0]), let inode = UInt64(parts[1]),
            let size = Int64(parts[2])
        else { return nil }
        self.init(device: device, inode: inode, size: size)
    }
}
