import FoundationEssentials
import HaulLoop

/// Turning what a server or a client proposes into a safe file name inside the download directory.
public enum FileName {
    /// A file's name: the part file (`.part`) and a free-name suffix (` (12)`) still fit the 255 bytes a name has.
    public static let maxBytes = 240
    /// A folder's name: the file system's limit.
    public static let maxComponentBytes = 255
    /// The deepest and longest a folder under the download root may be (a category's folder and a download's own
    /// together): well inside PATH_MAX with the root and the file's name added.
    public static let maxDepth = 32
    public static let maxDirectoryBytes = 1024
    private static let reserved: Set<String> = [
        "con", "prn", "aux", "nul", "com1", "com2", "com3", "com4", "com5", "com6", "com7", "com8", "com9",
        "lpt1", "lpt2", "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8", "lpt9",
    ]

    /// A name that is safe as one path component: no separators, NUL or control characters, no invisible format
    /// characters, no leading dots or trailing spaces and dots, not a reserved device name, at most `maxBytes`
    /// (240) bytes. nil when nothing usable is left.
    public static func sanitize(_ proposed: String, maxBytes: Int = FileName.maxBytes) -> String? {
        // A proposed path keeps only its last component.
        let last = proposed.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
        // The common name, printable ASCII without a space or a dot at either end, is kept as it is without walking
        // each scalar's Unicode properties (1.4% of the server's CPU over a list of small files).
        let bytes = last.utf8
        if let first = bytes.first, let end = bytes.last, bytes.count <= maxBytes, first != UInt8(ascii: "."),
            end != UInt8(ascii: "."), bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F && !forbidden.contains($0) })
        {
            let stem = last.split(separator: ".", maxSplits: 1).first.map { $0.lowercased() } ?? ""
            return reserved.contains(stem) ? truncate("_" + last, to: maxBytes) : last
        }
        var name = String(
            String.UnicodeScalarView(
                last.unicodeScalars.filter { scalar in
                    !(scalar.value < 0x20 || scalar.value == 0x7F || (0x80...0x9F).contains(scalar.value))
                        && !"<>:\"|?*".unicodeScalars.contains(scalar) && !isInvisible(scalar)
                }))
        name = name.trimming(while: \.isWhitespace)
        while name.hasPrefix(".") { name.removeFirst() }
        while name.hasSuffix(".") || name.hasSuffix(" ") { name.removeLast() }
        guard !name.isEmpty else { return nil }
        let stem = name.split(separator: ".", maxSplits: 1).first.map { $0.lowercased() } ?? ""
        if reserved.contains(stem) { name = "_" + name }
        return truncate(name, to: maxBytes)
    }

    /// Printable ASCII no file name keeps (Windows refuses them, shells misread them).
    private static let forbidden = Array("<>:\"|?*".utf8)

    /// Format characters (bidi overrides and isolates such as U+202E, zero-width ones, the byte order mark, soft
    /// hyphens) and line and paragraph separators: they change how a name looks without showing themselves, so
    /// `U+202E fdp.exe` reads as "exe.pdf".
    public static func isInvisible(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .format, .lineSeparator, .paragraphSeparator: return true
        default: return false
        }
    }

    /// Shortens to at most `maxBytes` of UTF-8, keeping a short extension. Cut between Unicode scalars, not
    /// characters: one character can be longer than the room left (the fuzzer found a name whose first character
    /// did not fit, which left only the extension, a hidden file name longer than the limit).
    static func truncate(_ name: String, to maxBytes: Int = FileName.maxBytes) -> String {
        guard name.utf8.count > maxBytes else { return name }
        var (stem, ext) = split(name)
        // A "extension" this long is part of the name.
        if ext.utf8.count > 16 { (stem, ext) = (name, "") }
        let room = maxBytes - ext.utf8.count
        var kept = String.UnicodeScalarView()
        var used = 0
        for scalar in stem.unicodeScalars {
            let size = String(scalar).utf8.count
            if used + size > room { break }
            kept.append(scalar)
            used += size
        }
        var result = String(kept)
        // The cut may leave a trailing space or dot, which sanitize removes everywhere else.
        while result.hasSuffix(" ") || result.hasSuffix(".") { result.removeLast() }
        return result + ext
    }

    /// The name a download gets when the client gave none: Content-Disposition's, else the final URL's last path
    /// segment percent-decoded, else its host, else "download".
    public static func derive(contentDisposition: String?, finalURL: String) -> String {
        if let header = contentDisposition, let proposed = ContentDisposition.filename(from: header),
            let safe = sanitize(proposed)
        {
            return safe
        }
        let components = URLComponents(string: finalURL)
        if let path = components?.percentEncodedPath, let segment = path.split(separator: "/").last {
            let decoded = PercentEncoding.decode(segment) ?? String(segment)
            if let safe = sanitize(decoded) { return safe }
        }
        if let host = components?.host, let safe = sanitize(host) { return safe }
        return "download"
    }

    /// `name`, then `name (1).ext`, `name (2).ext`, ...: the n-th candidate for a free name.
    public static func candidate(_ name: String, _ n: Int) -> String {
        guard n > 0 else { return name }
        let (stem, ext) = split(name)
        return "\(stem) (\(n))\(ext)"
    }

    /// Splits `archive.tar.gz` into `archive` and `.tar.gz`, `photo.jpeg` into `photo` and `.jpeg`.
    static func split(_ name: String) -> (stem: String, ext: String) {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count > 1 else { return (name, "") }
        var extCount = 1
        if parts.count > 2, ["tar"].contains(parts[parts.count - 2].lowercased()), parts.last!.count <= 4 {
            extCount = 2
        }
        let stem = parts.dropLast(extCount).joined(separator: ".")
        guard !stem.isEmpty else { return (name, "") }
        return (stem, "." + parts.suffix(extCount).joined(separator: "."))
    }
}
