/// One per-download option, declared once: its JSON name and type, where its value comes from when a request
/// gives none, whether PATCH may change it, its store column, whether the resource shows it back, its flag on
/// `haul add`, and the names aria2's clients send it under. Request validation, the PATCH allow-list, the CLI's
/// flags and help read this table; a test checks every row against openapi.yaml, `haul add --help` and the store.
public struct DownloadOption: Sendable {
    public enum Kind: Sendable, Equatable {
        /// A JSON integer in the range.
        case integer(ClosedRange<Int64>)
        /// Bytes (per second): a JSON integer in the range; the CLI takes 500k, 1.5M.
        case bytes(ClosedRange<Int64>)
        case boolean
        /// A JSON string, checked by its own rule (a name, a folder, a digest).
        case text
        /// A JSON object of header names to values; the CLI takes 'Name: value', repeatable.
        case headers
    }

    /// How `haul add` spells it.
    public struct Flag: Sendable {
        public let name: String
        /// The value's placeholder; nil for a switch (on: the JSON `true`).
        public let placeholder: String?
        public let help: String
        /// Given for one URL only (a name, a digest): refused with several.
        public var oneURL = false
        public var repeatable = false
    }

    public let name: String
    public let kind: Kind
    /// Where the value comes from when the request gives none.
    public let otherwise: String
    /// `PATCH /downloads/{id}` may change it.
    public var patchable = false
    /// The `downloads` column it is stored in.
    public let column: String
    /// The resource shows it back under `name`; a secret one (headers: cookies, tokens) never is.
    public var shown = true
    public var flag: Flag?
    /// aria2's option names for it (`max-download-limit`, `split`, `out`), for the aria2-compatible front.
    public var aria2: [String] = []

    /// The integer range of an integer or bytes option.
    public var range: ClosedRange<Int64>? {
        switch kind {
        case .integer(let range), .bytes(let range): return range
        default: return nil
        }
    }
}

public enum DownloadOptions {
    /// The largest size or speed accepted: 1 PiB.
    public static let maxBytes = Int64(1) << 50

    public static let all: [DownloadOption] = [
        DownloadOption(name: "filename", kind: .text, otherwise: "from the server's answer",
                       column: "requested_filename",
                       flag: .init(name: "filename", placeholder: "NAME", help: "the file's name (one URL only)",
                                   oneURL: true),
                       aria2: ["out"]),
        DownloadOption(name: "directory", kind: .text, otherwise: "the category's folder, else the download root",
                       column: "directory", shown: false,
                       flag: .init(name: "directory", placeholder: "DIR",
                                   help: "a folder under the download root (or the category's)"),
                       aria2: ["dir"]),
        DownloadOption(name: "category", kind: .text, otherwise: "none", column: "category",
                       flag: .init(name: "category", placeholder: "NAME",
                                   help: "a category made with 'haul category put': its folder and defaults apply")),
        DownloadOption(name: "connections", kind: .integer(1...32), otherwise: "the category's, else --connections",
                       patchable: true, column: "connections",
                       flag: .init(name: "connections", placeholder: "N", help: "connections per download, 1-32"),
                       aria2: ["split", "max-connection-per-server"]),
        DownloadOption(name: "priority", kind: .integer(-1000...1000), otherwise: "the category's, else 0",
                       patchable: true, column: "priority",
                       flag: .init(name: "priority", placeholder: "N",
                                   help: "higher starts first, -1000 to 1000 (default the category's, else 0)")),
        DownloadOption(name: "max_speed", kind: .bytes(0...maxBytes), otherwise: "none (0 is none)",
                       patchable: true, column: "max_speed",
                       flag: .init(name: "max-speed", placeholder: "SIZE", help: "bytes per second, like 500k or 1.5M"),
                       aria2: ["max-download-limit"]),
        DownloadOption(name: "checksum", kind: .text, otherwise: "none", column: "checksum",
                       flag: .init(name: "checksum", placeholder: "ALGO:HEX",
                                   help: "sha256:, sha1: or md5: digest to verify (one URL only)", oneURL: true),
                       aria2: ["checksum"]),
        DownloadOption(name: "headers", kind: .headers, otherwise: "none", column: "headers", shown: false,
                       flag: .init(name: "header", placeholder: "'Name: value'",
                                   help: "a header sent to the origin (repeatable)", repeatable: true),
                       aria2: ["header"]),
        DownloadOption(name: "start_paused", kind: .boolean, otherwise: "false", column: "state", shown: false,
                       flag: .init(name: "paused", placeholder: nil, help: "add them paused"),
                       aria2: ["pause"]),
        DownloadOption(name: "insecure", kind: .boolean, otherwise: "false", column: "insecure",
                       flag: .init(name: "insecure", placeholder: nil,
                                   help: "do not verify the origin's TLS certificate")),
        DownloadOption(name: "size", kind: .bytes(0...maxBytes), otherwise: "unknown until the probe",
                       column: "expected_bytes", shown: false),
    ]

    /// Every option's JSON name.
    public static let names: Set<String> = Set(all.map(\.name))

    /// What PATCH may change besides the state.
    public static let patchable: Set<String> = Set(all.filter(\.patchable).map(\.name))

    /// The integer ranges, read once: every request checks them.
    private static let ranges: [String: ClosedRange<Int64>] = Dictionary(
        uniqueKeysWithValues: all.compactMap { option in option.range.map { (option.name, $0) } })

    /// The integer range of option `name` (a row of this table: a misspelt name is a programming error).
    public static func range(_ name: String) -> ClosedRange<Int64> {
        guard let range = ranges[name] else { preconditionFailure("no integer option \(name)") }
        return range
    }
}
