/// A download's tags: free labels a client files it under (qBittorrent's tags, which Sonarr and Radarr set), kept
/// sorted and without repeats, stored and shown as one comma-separated string (`"hd,tv"`).
public enum DownloadTags {
    /// The most tags one download holds, and the longest tag in bytes.
    public static let maxCount = 64
    public static let maxTagBytes = 128

    /// The tags of a comma-separated list, each trimmed, sorted and without repeats (empty items dropped); nil
    /// when one is too long, holds a control character, or there are too many.
    public static func parse(_ text: String) -> [String]? {
        var tags = Set<String>()
        for item in text.split(separator: ",") {
            let tag = item.trimmingASCIISpaces
            guard !tag.isEmpty else { continue }
            guard tag.utf8.count <= maxTagBytes,
                !tag.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
            else { return nil }
            tags.insert(tag)
        }
        guard tags.count <= maxCount else { return nil }
        return tags.sorted()
    }

    /// How `tags` are stored and shown: nil for none.
    public static func joined(_ tags: [String]) -> String? {
        tags.isEmpty ? nil : tags.joined(separator: ",")
    }

    /// The tags a download holds.
    public static func of(_ download: Download) -> [String] {
        download.tags.map { parse($0) ?? [] } ?? []
    }

    public static let problem =
        "must be comma-separated tags: at most \(maxCount), each at most \(maxTagBytes) bytes without control "
        + "characters"
}

extension Substring {
    fileprivate var trimmingASCIISpaces: String {
        String(drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}
