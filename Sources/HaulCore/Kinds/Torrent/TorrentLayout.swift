import HaulLoop

/// Whether a torrent's file names may be written under the download root: every path is relative, made of plain
/// names (no `..`, `.`, empty element, backslash or control character), and no two paths differ only by case or
/// Unicode form (on a case-insensitive or normalizing file system they would be one file, and one torrent's file
/// could overwrite another's). A torrent failing any of this is refused before a byte is written.
public enum TorrentLayout {
    public static let maxFiles = TorrentSession.maxFiles
    /// A path element's length in bytes, as file systems allow.
    static let maxElementBytes = 255

    /// What is wrong with the paths, or nil when every one is safe.
    public static func problem(_ files: [TorrentFileEntry]) -> String? {
        guard files.count <= maxFiles else {
            return "the torrent has \(files.count) files, more than \(maxFiles)"
        }
        var seen = Set<String>()
        seen.reserveCapacity(files.count)
        for file in files where !file.pad {
            if let problem = problem(path: file.path) { return problem }
            // Swift's String equality is canonical equivalence: "é" and "e\u{301}" are one key.
            guard seen.insert(file.path.lowercased()).inserted else {
                return "two files of the torrent differ only by case or Unicode form: \(shown(file.path))"
            }
        }
        return nil
    }

    /// What is wrong with one path of the torrent ("name/dir/file", as the .torrent says it).
    static func problem(path: String) -> String? {
        guard !path.hasPrefix("/") else { return "a file name of the torrent is absolute: \(shown(path))" }
        for element in path.split(separator: "/", omittingEmptySubsequences: false) {
            if element.isEmpty || element == "." || element == ".." {
                return "a file name of the torrent leaves its folder or is empty: \(shown(path))"
            }
            if element.utf8.count > maxElementBytes {
                return "a file name of the torrent is longer than \(maxElementBytes) bytes: \(shown(path))"
            }
            if element.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "\\") })
                || element.unicodeScalars.contains(where: FileName.isInvisible)
            {
                return "a file name of the torrent holds a control character or a backslash: \(shown(path))"
            }
        }
        return nil
    }

    private static func shown(_ path: String) -> String {
        let printable = String(String.UnicodeScalarView(path.unicodeScalars.map { $0.value < 0x20 ? "?" : $0 }))
        return printable.count > 200 ? String(printable.prefix(200)) + "..." : printable
    }
}
