import FoundationEssentials
import HaulLoop

/// A problem with one field of a request: its name (`headers.Cookie`) and what is wrong.
public typealias FieldProblem = (field: String, message: String)

/// One per-download option, declared once: its JSON name and type, how a value given for it is checked and set on a
/// new download, where its value comes from when a request gives none, what the download takes from the request,
/// whether PATCH may change it, its store column (written and read here), how the resource shows it back, its flag
/// on `haul add`, and the names aria2's clients send it under. Request validation, the PATCH allow-list, the
/// resource, the store, the CLI's flags and help read this table; a test checks every row against openapi.yaml,
/// `haul add --help` and the store, and another walks each row from a request to the resource.
public struct DownloadOption: Sendable {
    public enum Kind: Sendable, Equatable {
        /// A JSON integer in the range.
        case integer(ClosedRange<Int64>)
        /// Bytes (per second): a JSON integer in the range; the CLI takes 500k, 1.5M.
        case bytes(ClosedRange<Int64>)
        /// A JSON number (a fraction allowed) in the range.
        case decimal(ClosedRange<Double>)
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
        /// The value names a file whose text is the option's (`--cookies cookies.txt`).
        public var readsFile = false
    }

    public let name: String
    public let kind: Kind
    /// Where the value comes from when the request gives none.
    public let otherwise: String
    /// `PATCH /downloads/{id}` may change it.
    public var patchable = false
    /// The `downloads` column it is stored in.
    public let column: String
    /// Checks a value a request gives for it and sets it on the new download; what is wrong goes to `problems`.
    public let apply:
        @Sendable (
            _ option: Key, _ value: JSONValue, _ request: inout NewDownload,
            _ problems: inout [FieldProblem]
        ) -> Void
    /// What the new download takes from its request as given; nil where the engine works the value out (from the
    /// category and the settings) or the download is made with it.
    public var carry: (@Sendable (NewDownload, inout Download) -> Void)?
    /// How the resource shows it back under `name`; nil for a secret (headers: cookies, tokens) or a choice made
    /// once (a folder, starting paused).
    public var show: (@Sendable (Download) -> JSONValue)?
    /// Its column, written with the download and read back; nil when another column holds it (`start_paused` is
    /// the state).
    var storage: DownloadColumn?
    public var flag: Flag?
    /// aria2's option names for it (`max-download-limit`, `split`, `out`), for the aria2-compatible front.
    public var aria2: [String] = []

    /// Whether the resource shows it back.
    public var shown: Bool { show != nil }

    /// What `apply` needs of its row: its name and range, cheap to hand over (a row is many strings and closures,
    /// each retained when the row is copied, and every request applies every row).
    public struct Key: Sendable {
        public let name: String
        public let range: ClosedRange<Int64>?
    }

    public var key: Key { Key(name: name, range: range) }

    /// The integer range of an integer or bytes option.
    public var range: ClosedRange<Int64>? {
        switch kind {
        case .integer(let range), .bytes(let range): return range
        default: return nil
        }
    }
}
