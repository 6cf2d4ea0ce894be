import FoundationEssentials
import HaulLoop

/// What a BitTorrent download shows of its swarm and files: the info-hash, what it is doing (fetching the
/// metadata, checking, downloading, seeding), peers and seeds, what it uploaded and the ratio, and each file with
/// its progress. Stored with the download as JSON.
public struct TorrentInfo: Equatable, Sendable {
    public struct File: Equatable, Sendable {
        /// As on disk, under the torrent's folder (the torrent's name first).
        public var path: String
        public var size: Int64
        /// Verified bytes.
        public var done: Int64
        public var wanted: Bool
    }

    public enum Phase: String, Sendable {
        case metadata, checking, downloading, seeding, finished
    }

    /// Hex, v1 (40 digits) or v2 (64).
    public var infoHash: String
    public var name: String?
    public var phase = Phase.metadata
    public var peers = 0
    public var seeds = 0
    public var uploadSpeed: Double = 0
    /// Payload bytes uploaded and downloaded over the download's life.
    public var uploaded: Int64 = 0
    public var downloaded: Int64 = 0
    /// Seconds spent seeding (every wanted piece in), over restarts.
    public var seedingTime: Int64 = 0
    public var pieces = 0
    public var piecesDone = 0
    public var pieceLength: Int64 = 0
    public var files: [File] = []
    /// With one file fetched: its path under the staging folder's `data/`, and its verified bytes as ranges of its
    /// offsets (what a reader of the unfinished torrent may read). Not stored: the next progress says them again.
    public var readablePath: String?
    public var readable: [ByteRange] = []

    /// Why a torrent fetching several files cannot be read while it downloads.
    public static let severalFiles =
        "a torrent's file can be read while it downloads when the torrent fetches one file (choose it with "
        + "files); this one fetches several: read them once they are complete"

    public init(infoHash: String) { self.infoHash = infoHash }

    /// What a .torrent file says before the torrent starts: its name, pieces and files (those `selection` wants).
    init(meta: TorrentMeta, selection: TorrentSelection?) {
        infoHash = meta.infoHash
        name = meta.name
        pieces = meta.pieces
        pieceLength = meta.pieceLength
        files = meta.files.filter { !$0.pad }.enumerated().map { index, file in
            File(
                path: file.path, size: file.size, done: 0,
                wanted: selection?.wants(number: index + 1, path: file.path) ?? true)
        }
    }

    /// Uploaded over the wanted size (what a swarm counts as a share).
    public var ratio: Double {
        let wanted = files.filter(\.wanted).reduce(Int64(0)) { $0 + $1.size }
        return wanted > 0 ? Double(uploaded) / Double(wanted) : 0
    }

    public var json: JSONValue {
        .object([
            ("info_hash", .string(infoHash)),
            ("name", name.map(JSONValue.string) ?? .null),
            ("phase", .string(phase.rawValue)),
            ("peers", .number(Double(peers))),
            ("seeds", .number(Double(seeds))),
            ("upload_speed", .number(uploadSpeed.rounded())),
            ("uploaded", .number(Double(uploaded))),
            ("downloaded", .number(Double(downloaded))),
            ("ratio", .number((ratio * 1000).rounded() / 1000)),
            ("seeding_time", .number(Double(seedingTime))),
            ("pieces", .number(Double(pieces))),
            ("pieces_done", .number(Double(piecesDone))),
            ("piece_length", .number(Double(pieceLength))),
            (
                "files",
                .array(
                    files.enumerated().map { index, file in
                        .object([
                            ("index", .number(Double(index + 1))), ("path", .string(file.path)),
                            ("size", .number(Double(file.size))), ("done", .number(Double(file.done))),
                            ("wanted", .bool(file.wanted)),
                        ])
                    })
            ),
        ])
    }

    public init?(json: JSONValue) {
        guard case .object = json, let hash = json["info_hash"]?.stringValue else { return nil }
        infoHash = hash
        name = json["name"]?.stringValue
        phase = json["phase"]?.stringValue.flatMap(Phase.init(rawValue:)) ?? .metadata
        peers = Int(json["peers"]?.integerValue ?? 0)
        seeds = Int(json["seeds"]?.integerValue ?? 0)
        uploaded = json["uploaded"]?.integerValue ?? 0
        downloaded = json["downloaded"]?.integerValue ?? 0
        seedingTime = json["seeding_time"]?.integerValue ?? 0
        pieces = Int(json["pieces"]?.integerValue ?? 0)
        piecesDone = Int(json["pieces_done"]?.integerValue ?? 0)
        pieceLength = json["piece_length"]?.integerValue ?? 0
        if case .array(let items)? = json["files"] {
            files = items.compactMap { item in
                guard let path = item["path"]?.stringValue else { return nil }
                return File(
                    path: path, size: item["size"]?.integerValue ?? 0, done: item["done"]?.integerValue ?? 0,
                    wanted: item["wanted"]?.boolValue ?? true)
            }
        }
    }
}
