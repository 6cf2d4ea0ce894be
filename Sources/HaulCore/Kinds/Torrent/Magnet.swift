import HaulLoop

/// Magnet links: what one must hold to be fetched (an info-hash), and the one made for a .torrent file.
public enum Magnet {
    /// What is wrong with `text` as a magnet link, or nil: at most 8 KiB, no spaces or control characters, and an
    /// `xt` naming a BitTorrent info-hash (`urn:btih:` with 40 hex digits or 32 base32 ones, or `urn:btmh:1220`
    /// with 64 hex digits).
    public static func problem(_ text: String) -> String? {
        guard text.utf8.count <= 8192, !text.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F }) else {
            return "must be a magnet link of at most 8192 bytes without spaces, control or non-ASCII characters"
        }
        guard text.lowercased().hasPrefix("magnet:?") else { return "must be a magnet link (magnet:?xt=urn:btih:...)" }
        let query = text.dropFirst("magnet:?".count)
        let hashes = query.split(separator: "&").compactMap { pair -> String? in
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased().hasPrefix("xt") else { return nil }
            return PercentEncoding.decode(parts[1]).map { $0.lowercased() }
        }
        guard hashes.contains(where: isInfoHash) else {
            return "must name an info-hash: xt=urn:btih: with 40 hex or 32 base32 digits, or xt=urn:btmh:1220 and 64 "
                + "hex digits"
        }
        return nil
    }

    private static func isInfoHash(_ urn: String) -> Bool {
        if urn.hasPrefix("urn:btih:") {
            let hash = urn.dropFirst(9)
            if hash.count == 40 { return hash.utf8.allSatisfy { PercentEncoding.hexValue($0) != nil } }
            // Base32: letters and the digits 2 to 7.
            if hash.count == 32 {
                return hash.utf8.allSatisfy { (0x61...0x7A).contains($0) || (0x32...0x37).contains($0) }
            }
            return false
        }
        if urn.hasPrefix("urn:btmh:1220") {
            let hash = urn.dropFirst(13)
            return hash.count == 64 && hash.utf8.allSatisfy { PercentEncoding.hexValue($0) != nil }
        }
        return false
    }

    /// The magnet link of a torrent: its info-hash (v1, else v2) and its name.
    public static func link(infoHash: String, name: String) -> String {
        let xt = infoHash.count == 64 ? "urn:btmh:1220" + infoHash : "urn:btih:" + infoHash
        return "magnet:?xt=" + xt + "&dn=" + PercentEncoding.encode(name)
    }

    /// The name a magnet link gives (`dn`), if any.
    public static func displayName(_ link: String) -> String? {
        guard let query = link.split(separator: "?", maxSplits: 1).last else { return nil }
        for pair in query.split(separator: "&") where pair.hasPrefix("dn=") {
            return PercentEncoding.decode(String(pair.dropFirst(3).map { $0 == "+" ? " " : $0 }))
        }
        return nil
    }
}
