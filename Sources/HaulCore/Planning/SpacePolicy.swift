/// How much of the disk downloads may take: whatever a file needs must fit in the free space minus a reserve kept
/// for everything else on the machine, and no file may pass `maxFileSize`. An origin that announces a terabyte then
/// fails its own download with `insufficient_space` before a block is reserved, instead of filling the disk and
/// failing every other download too. A pure function of the figures, so it is tested as a table.
public struct SpacePolicy: Sendable, Equatable {
    /// Bytes always left free (`--min-free-space`).
    public var minFreeSpace: Int64
    /// The largest file, nil for no limit (`--max-file-size`).
    public var maxFileSize: Int64?

    public init(minFreeSpace: Int64 = 1 << 30, maxFileSize: Int64? = nil) {
        self.minFreeSpace = minFreeSpace
        self.maxFileSize = maxFileSize
    }

    /// Why a file of `total` bytes cannot be written, or nil when it can: `needed` more bytes of disk must fit in
    /// `free` less the reserve.
    public func refusal(total: Int64, needed: Int64, free: Int64) -> DownloadError? {
        if let maxFileSize, total > maxFileSize {
            return DownloadError(
                .fileTooLarge,
                "the file is \(SpacePolicy.bytes(total)), more than the "
                    + "\(SpacePolicy.bytes(maxFileSize)) this server accepts (--max-file-size)")
        }
        guard needed > 0, needed > free - minFreeSpace else { return nil }
        return DownloadError(
            .insufficientSpace,
            "the file needs \(SpacePolicy.bytes(needed)) more; "
                + "\(SpacePolicy.bytes(max(0, free))) are free and \(SpacePolicy.bytes(minFreeSpace)) are kept free "
                + "(--min-free-space)")
    }

    /// Why writing must stop while a file of unknown or unreserved size grows: it passed `maxFileSize`, or the free
    /// space fell under the reserve. nil while it may go on.
    public func refusalWhileWriting(written: Int64, free: Int64) -> DownloadError? {
        if let maxFileSize, written > maxFileSize {
            return DownloadError(
                .fileTooLarge,
                "the body ran past \(SpacePolicy.bytes(maxFileSize)), the largest "
                    + "file this server accepts (--max-file-size)")
        }
        guard free < minFreeSpace else { return nil }
        return DownloadError(
            .insufficientSpace,
            "only \(SpacePolicy.bytes(max(0, free))) are free, less than the "
                + "\(SpacePolicy.bytes(minFreeSpace)) kept free (--min-free-space)")
    }

    /// `1073741824` as "1.0 GiB (1073741824 bytes)": readable, and exact for whoever compares.
    static func bytes(_ count: Int64) -> String {
        let units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
        guard count >= 1024 else { return "\(count) bytes" }
        var value = Double(count)
        var unit = -1
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10) \(units[unit]) (\(count) bytes)"
    }
}

/// The free space of the download root's file system, and what of it new downloads may take.
public struct DiskSpace: Sendable, Equatable {
    public var free: Int64
    public var total: Int64
    /// Kept free for the rest of the machine (`--min-free-space`).
    public var reserved: Int64
    /// What downloads may still write: the free space less the reserve.
    public var usable: Int64 { max(0, free - reserved) }

    public init(free: Int64, total: Int64, reserved: Int64) {
        self.free = free
        self.total = total
        self.reserved = reserved
    }
}
