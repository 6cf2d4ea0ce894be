import Glibc
import HaulLoop

/// Where each piece of an HLS download's output begins: the size of every piece (an init section or a segment,
/// decrypted) in the order written, beside the part file as `name.part.hls` with the playlist's fingerprint.
/// A piece's size is recorded before its first byte is written, so whatever the journal vouches for is covered:
/// a resume at byte L finds the piece L falls in and skips into it. An index that does not cover L, or belongs to
/// another version of the playlist, sends the download back to byte 0: never a splice of two versions.
final class HLSIndex {
    private(set) var fingerprint: String?
    private(set) var sizes: [Int64] = []
    private var directory: ConfinedDirectory?
    private var name: String?
    private var descriptor: Int32 = -1
    /// Begun in memory before the part file had a place (the first request): written when it gets one.
    private var unwritten = false

    static func sidecar(of partFile: String) -> String { partFile + ".hls" }

    deinit { if descriptor >= 0 { close(descriptor) } }

    /// The part file `partFile` in `directory` is open: the index lives beside it. Begun already, it is written
    /// there; else what the file holds is read.
    func attach(_ directory: ConfinedDirectory, partFile: String) {
        self.directory = directory
        name = Self.sidecar(of: partFile)
        if unwritten {
            rewrite()
        } else {
            load()
        }
    }

    /// A new run of the output from byte 0, of the playlist `fingerprint`.
    func begin(_ fingerprint: String) {
        self.fingerprint = fingerprint
        sizes = []
        unwritten = directory == nil
        if directory != nil { rewrite() }
    }

    /// The next piece has `size` bytes.
    func append(_ size: Int64) {
        sizes.append(size)
        if descriptor >= 0 { Files.writeAll(Array("\(size)\n".utf8), to: descriptor) }
    }

    /// The piece byte `offset` falls in, and how far into it; nil unless the index is of `fingerprint` and covers
    /// `offset` (the end of the last piece counts: the next one begins there).
    func locate(_ offset: Int64, fingerprint: String) -> (piece: Int, skip: Int64)? {
        guard self.fingerprint == fingerprint else { return nil }
        var start: Int64 = 0
        for (piece, size) in sizes.enumerated() {
            if offset < start + size { return (piece, offset - start) }
            start += size
        }
        return offset == start ? (sizes.count, 0) : nil
    }

    /// The index is not needed any more (the download finished or was removed).
    func remove() {
        if descriptor >= 0 { close(descriptor) }
        descriptor = -1
        if let directory, let name { try? directory.remove(name) }
    }

    private func rewrite() {
        unwritten = false
        guard let directory, let name, let fingerprint else { return }
        if descriptor >= 0 { close(descriptor) }
        descriptor = -1
        try? directory.remove(name)
        guard let fd = try? directory.openForWriting(name, exclusive: true) else { return }
        descriptor = fd
        var text = "haul-hls 1 \(fingerprint)\n"
        for size in sizes { text += "\(size)\n" }
        Files.writeAll(Array(text.utf8), to: descriptor)
    }

    private func load() {
        guard let directory, let name, let text = directory.readText(name, limit: 8 << 20) else { return }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        // A line cut by a crash mid-write is not a size.
        if text.last != "\n", !lines.isEmpty { lines.removeLast() }
        let header = lines.first?.split(separator: " ")
        guard let header, header.count == 3, header[0] == "haul-hls", header[1] == "1" else { return }
        var loaded: [Int64] = []
        for line in lines.dropFirst() where !line.isEmpty {
            guard let size = Int64(line), size >= 0 else { break }
            loaded.append(size)
        }
        fingerprint = String(header[2])
        sizes = loaded
        if let fd = try? directory.openForWriting(name, exclusive: false) {
            descriptor = fd
            lseek(fd, 0, SEEK_END)
        }
    }
}
