import FoundationEssentials
import HaulCore

/// A download as aria2's RPC shows it (`tellStatus`, `tellActive`, ...): every number a decimal string, the state
/// in aria2's words, pieces made up from the segments, the file's absolute path under the download root.
enum Aria2Status {
    /// aria2's piece length for HTTP and FTP (`--piece-length`, 1 MiB): the bitfield's unit.
    static let pieceLength: Int64 = 1 << 20

    /// aria2's `status` for a download's state.
    static func status(_ state: DownloadState) -> String {
        switch state {
        case .probing, .downloading, .verifying, .seeding: return "active"
        case .queued: return "waiting"
        case .paused: return "paused"
        case .failed: return "error"
        case .completed: return "complete"
        }
    }

    /// Every key of a status, for `keys` filters and the stored result of a removed download.
    static func json(
        _ snapshot: DownloadSnapshot, gid: String, root: String, completedRoot: String? = nil
    )
        -> [(String, JSONValue)]
    {
        let d = snapshot.download
        let total = d.totalBytes ?? 0
        let running = d.state.isActive
        let uploading = running || d.state == .seeding
        var members: [(String, JSONValue)] = [
            ("gid", .string(gid)),
            ("status", .string(status(d.state))),
            ("totalLength", number(total)),
            ("completedLength", number(d.receivedBytes)),
            ("uploadLength", number(d.torrent?.uploaded ?? 0)),
            ("downloadSpeed", number(running ? Int64(snapshot.speed.rounded()) : 0)),
            ("uploadSpeed", number(uploading ? Int64(d.torrent?.uploadSpeed ?? 0) : 0)),
            ("connections", number(Int64(uploading ? d.torrent?.peers ?? snapshot.activeConnections : 0))),
            ("dir", .string(directory(d, root: root, completedRoot: completedRoot))),
            ("files", .array(files(d, root: root, completedRoot: completedRoot))),
        ]
        if let torrent = d.torrent { members += bittorrent(torrent) }
        let pieces = total > 0 ? (total + pieceLength - 1) / pieceLength : 0
        members.append(("numPieces", number(pieces)))
        members.append(("pieceLength", number(pieceLength)))
        if pieces > 0 { members.append(("bitfield", .string(bitfield(d.segments, total: total)))) }
        // A finished download has both, as aria2's stopped ones do: clients read errorMessage's length.
        switch d.state {
        case .completed:
            members.append(("errorCode", .string("0")))
            members.append(("errorMessage", .string("")))
        case .failed:
            let error = d.error
            members.append(("errorCode", .string(String(errorCode(error?.code)))))
            members.append(("errorMessage", .string(error.map { "\($0.code.rawValue): \($0.message)" } ?? "")))
        default: break
        }
        return members
    }

    /// Only the `keys` asked for (all when none), in aria2's order.
    static func select(_ members: [(String, JSONValue)], keys: [String]?) -> JSONValue {
        guard let keys, !keys.isEmpty else { return .object(members) }
        return .object(members.filter { keys.contains($0.0) })
    }

    /// A torrent's members, as aria2 shows a BitTorrent download: its info-hash, seeders, and its name.
    static func bittorrent(_ torrent: TorrentInfo) -> [(String, JSONValue)] {
        [
            ("infoHash", .string(torrent.infoHash)),
            ("numSeeders", number(Int64(torrent.seeds))),
            ("seeder", .string(torrent.phase == .seeding ? "true" : "false")),
            (
                "bittorrent",
                .object([
                    ("info", .object([("name", .string(torrent.name ?? ""))])),
                    ("mode", .string(torrent.files.count == 1 ? "single" : "multi")),
                ])
            ),
        ]
    }

    /// The download's files: a torrent's each (where it lands in the download's folder), else the one file.
    static func files(_ d: Download, root: String, completedRoot: String? = nil) -> [JSONValue] {
        guard let torrent = d.torrent, !torrent.files.isEmpty else {
            return [file(d, root: root, completedRoot: completedRoot)]
        }
        let folder = directory(d, root: root, completedRoot: completedRoot)
        return torrent.files.enumerated().map { index, file in
            .object([
                ("index", .string(String(index + 1))),
                ("path", .string(join(folder, file.path))),
                ("length", number(file.size)),
                ("completedLength", number(file.done)),
                ("selected", .string(file.wanted ? "true" : "false")),
                ("uris", .array([])),
            ])
        }
    }

    /// `files[0]`: the one file, its sources as `uris` (the one in use first).
    static func file(_ d: Download, root: String, completedRoot: String? = nil) -> JSONValue {
        .object([
            ("index", .string("1")),
            ("path", .string(path(d, root: root, completedRoot: completedRoot))),
            ("length", number(d.totalBytes ?? 0)),
            ("completedLength", number(d.receivedBytes)),
            ("selected", .string("true")),
            ("uris", uris(d)),
        ])
    }

    /// The sources as aria2's `getUris` answers them: the URL `used`, mirrors `waiting`.
    static func uris(_ d: Download) -> JSONValue {
        let sources = [Redact.url(d.url)] + d.mirrors.map { Redact.url($0.url) }
        return .array(
            sources.enumerated().map { index, uri in
                .object([("uri", .string(uri)), ("status", .string(index == 0 ? "used" : "waiting"))])
            })
    }

    /// The absolute path of the file under the root, "" while its name is not known (aria2's answer then).
    /// A moved file's under `completedRoot` (nil: the root).
    static func path(_ d: Download, root: String, completedRoot: String? = nil) -> String {
        guard let relative = d.relativePath ?? d.requestedFilename.map({ join(d.directory, $0) }) else { return "" }
        return join(d.moved ? completedRoot ?? root : root, relative)
    }

    static func directory(_ d: Download, root: String, completedRoot: String? = nil) -> String {
        let folder = d.fileDirectory
        let base = d.moved ? completedRoot ?? root : root
        return folder.isEmpty ? base : join(base, folder)
    }

    private static func join(_ a: String, _ b: String) -> String {
        a.isEmpty ? b : b.isEmpty ? a : a.hasSuffix("/") ? a + b : a + "/" + b
    }

    /// A hex string with one bit per piece, the first piece the top bit of the first digit: set when every byte of
    /// the piece is in the part file.
    static func bitfield(_ segments: [Segment], total: Int64) -> String {
        let pieces = Int((total + pieceLength - 1) / pieceLength)
        var bits = [UInt8](repeating: 0, count: (pieces + 7) / 8)
        // Received ranges, sorted and disjoint (each segment's first `received` bytes).
        let have = segments.filter { $0.received > 0 }.map { ($0.start, $0.start + $0.received) }
            .sorted { $0.0 < $1.0 }
        var index = 0
        for piece in 0..<pieces {
            let first = Int64(piece) * pieceLength
            let end = min(total, first + pieceLength)
            while index < have.count, have[index].1 <= first { index += 1 }
            // The piece is whole when received ranges cover [first, end) without a gap.
            var cursor = first
            var probe = index
            while probe < have.count, have[probe].0 <= cursor, cursor < end {
                cursor = max(cursor, have[probe].1)
                probe += 1
            }
            if cursor >= end { bits[piece / 8] |= 0x80 >> UInt8(piece % 8) }
        }
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bits.count * 2)
        for byte in bits {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// aria2's exit status (its `errorCode`) for a Haul error code: the table in aria2's manual, "EXIT STATUS".
    static func errorCode(_ code: ErrorCode?) -> Int {
        guard let code else { return 1 }
        switch code {
        case .timeout: return 2
        case .http(404), .ftp(550): return 3
        case .connectFailed, .connectionCut, .networkError, .tlsFailed, .blockedAddress, .proxyUnreachable,
            .proxyRefused:
            return 6
        case .rangeMismatch: return 8
        case .diskFull, .insufficientSpace, .fileTooLarge: return 9
        case .writeFailed: return 17
        case .dnsFailed: return 19
        case .badResponse, .sizeMismatch: return 22
        case .tooManyRedirects: return 23
        case .authFailed, .proxyAuthFailed, .loginFailed, .http(401), .http(403), .http(407): return 24
        case .checksumMismatch: return 32
        default:
            let raw = code.rawValue
            if raw.hasPrefix("http_5") { return 29 }
            if raw.hasPrefix("http_") { return 22 }
            if raw.hasPrefix("ftp_") { return 21 }
            return 1
        }
    }

    static func number(_ value: Int64) -> JSONValue { .string(String(value)) }
}

/// aria2's GIDs: 16 hex digits naming a download, stable across restarts. Haul's id holds 75 random bits; its
/// first 64 are the GID, so one is worked out from the other without a table, and a GID is found again by an index
/// rebuilt when one is asked for that it does not know.
final class Aria2GIDs {
    private var index: [String: String] = [:]
    private var indexedCount = -1
    private var indexedAt = -Double.infinity

    static func gid(of id: String) -> String {
        let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz".utf8)
        // The id's characters are its bits five at a time, lowest first (HaulID.random).
        var value: UInt64 = 0
        for (position, byte) in id.utf8.prefix(13).enumerated() {
            guard let digit = alphabet.firstIndex(of: byte) else { continue }
            value |= UInt64(digit) << UInt64(5 * position)
        }
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: max(0, 16 - hex.utf8.count)) + hex
    }

    /// A new id whose GID is `gid` (aria2's `gid` option): its first 64 bits, the rest random.
    static func id(forGID gid: String) -> String? {
        guard isGID(gid), let value = UInt64(gid, radix: 16) else { return nil }
        let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz".utf8)
        var random = SystemRandomNumberGenerator()
        var bits = value
        var id: [UInt8] = []
        for position in 0..<15 {
            var digit = Int(bits & 31)
            bits >>= 5
            // The 13th digit holds the GID's top four bits; its fifth and the last two digits are random.
            if position == 12 { digit |= Int.random(in: 0...1, using: &random) << 4 }
            if position > 12 { digit = Int.random(in: 0...31, using: &random) }
            id.append(alphabet[digit])
        }
        return String(decoding: id, as: UTF8.self)
    }

    static func isGID(_ text: String) -> Bool {
        text.utf8.count == 16
            && text.utf8.allSatisfy {
                ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102)
                    || ($0 >= 65 && $0 <= 70)
            }
    }

    /// The id of `gid` among `ids()`, rebuilding the index when it is not known and the downloads changed (or a
    /// second has passed: another node may have added some), so unknown GIDs cost no walk each.
    func id(of gid: String, count: Int, now: Double, ids: () -> [String]) -> String? {
        let gid = gid.lowercased()
        if let id = index[gid] { return id }
        guard count != indexedCount || now - indexedAt >= 1 else { return nil }
        index.removeAll(keepingCapacity: true)
        for id in ids() { index[Aria2GIDs.gid(of: id)] = id }
        indexedCount = count
        indexedAt = now
        return index[gid]
    }

    func remember(_ id: String) { index[Aria2GIDs.gid(of: id)] = id }
}
