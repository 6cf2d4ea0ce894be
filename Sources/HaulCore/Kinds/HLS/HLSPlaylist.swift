import FoundationEssentials
import HaulLoop

/// Why a playlist cannot be downloaded: a stable code (`playlist_invalid`, `playlist_live`,
/// `playlist_unsupported`, `variant_not_found`) and a message for people.
public struct PlaylistError: Error, Equatable, Sendable {
    public var code: String
    public var message: String

    public init(_ code: String, _ message: String) {
        self.code = code
        self.message = message
    }

    static func invalid(_ message: String) -> PlaylistError { PlaylistError("playlist_invalid", message) }
}

/// `EXT-X-BYTERANGE`: `length` bytes from `offset` of the resource.
public struct HLSByteRange: Equatable, Sendable {
    public var length: Int64
    public var offset: Int64
}

/// An `EXT-X-KEY` in force for the segments after it. Only AES-128 (or none) is followed.
public struct HLSKey: Equatable, Sendable {
    public var uri: String
    /// The IV given, else nil: the segment's media sequence number then is the IV.
    public var iv: [UInt8]?
}

/// An `EXT-X-MAP`: the initialization section fMP4 segments need before them.
public struct HLSMap: Equatable, Sendable {
    public var uri: String
    public var range: HLSByteRange?
}

public struct HLSMediaSegment: Equatable, Sendable {
    public var uri: String
    public var duration: Double
    public var range: HLSByteRange?
    /// Index into the playlist's keys; nil when the segment is not encrypted.
    public var key: Int?
    /// Index into the playlist's maps; nil when none applies.
    public var map: Int?
    public var sequence: Int64
    public var discontinuity = false
}

/// A media playlist: the segments of one rendition, in order.
public struct HLSMediaPlaylist: Equatable, Sendable {
    public var segments: [HLSMediaSegment] = []
    public var keys: [HLSKey] = []
    public var maps: [HLSMap] = []
    public var endList = false
    public var playlistType: String?

    /// Whether every segment names its bytes exactly (`EXT-X-BYTERANGE`) and none is encrypted: then the output's
    /// size is known before a segment is fetched.
    public var exactBytes: Int64? {
        guard segments.allSatisfy({ $0.range != nil && $0.key == nil }) else { return nil }
        var total = segments.reduce(Int64(0)) { $0 + $1.range!.length }
        var mapsSeen = Set<Int>()
        for segment in segments {
            guard let map = segment.map, mapsSeen.insert(map).inserted else { continue }
            guard let range = maps[map].range else { return nil }
            total += range.length
        }
        return total
    }

    public var duration: Double { segments.reduce(0) { $0 + $1.duration } }
}

/// A variant (`EXT-X-STREAM-INF`) of a master playlist.
public struct HLSVariant: Equatable, Sendable {
    public var uri: String
    public var bandwidth: Int64
    public var averageBandwidth: Int64?
    public var width: Int?
    public var height: Int?
    public var codecs: String?
    /// `NAME` (not in RFC 8216 for variants, but servers write it), else the `VIDEO` group.
    public var name: String?
    /// The `AUDIO` group its alternate audio renditions are in.
    public var audio: String?
}

/// An alternate rendition (`EXT-X-MEDIA`).
public struct HLSRendition: Equatable, Sendable {
    public var type: String
    public var group: String
    public var name: String
    public var language: String?
    public var uri: String?
    public var isDefault = false
}

public enum HLSPlaylist: Equatable, Sendable {
    case master(variants: [HLSVariant], renditions: [HLSRendition])
    case media(HLSMediaPlaylist)
}

/// Reading playlists (RFC 8216), relative URIs resolved against the playlist's own URL. What Haul will not follow
/// is refused here, by name: URIs other than http and https (`file:`, `data:`), more segments than `maxSegments`,
/// SAMPLE-AES and key formats other than `identity` (DRM).
public enum HLSParser {
    public static let maxSegments = 100_000
    /// A playlist's body may not be longer.
    public static let maxBytes = 16 << 20

    /// Whether `bytes` begin as a playlist does.
    public static func looksLikePlaylist(_ bytes: some Collection<UInt8>) -> Bool {
        var body = bytes.drop { $0 == 0xEF || $0 == 0xBB || $0 == 0xBF || $0 == 0x20 || $0 == 0x0D || $0 == 0x0A }
        let tag = Array("#EXTM3U".utf8)
        guard body.count >= tag.count else { return false }
        body = body.prefix(tag.count)
        return Array(body) == tag
    }

    public static func parse(_ bytes: [UInt8], url: String) throws(PlaylistError) -> HLSPlaylist {
        guard looksLikePlaylist(bytes) else { throw .invalid("the answer is not an HLS playlist (no #EXTM3U)") }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw .invalid("the playlist is not UTF-8 text")
        }
        var lines: [Substring] = []
        for line in text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }) {
            let trimmed = line.trimmingSpaces()
            if !trimmed.isEmpty { lines.append(Substring(trimmed)) }
        }
        if lines.contains(where: { $0.hasPrefix("#EXT-X-STREAM-INF") }) {
            return try master(lines, url: url)
        }
        return .media(try media(lines, url: url))
    }

    // MARK: master

    private static func master(_ lines: [Substring], url: String) throws(PlaylistError) -> HLSPlaylist {
        var variants: [HLSVariant] = []
        var renditions: [HLSRendition] = []
        var pending: [String: String]?
        for line in lines {
            if line.hasPrefix("#EXT-X-STREAM-INF:") {
                pending = attributes(line.dropFirst("#EXT-X-STREAM-INF:".count))
            } else if line.hasPrefix("#EXT-X-MEDIA:") {
                let a = attributes(line.dropFirst("#EXT-X-MEDIA:".count))
                guard let type = a["TYPE"], let group = a["GROUP-ID"], let name = a["NAME"] else {
                    throw .invalid("an EXT-X-MEDIA lacks TYPE, GROUP-ID or NAME")
                }
                renditions.append(
                    HLSRendition(
                        type: type, group: group, name: name, language: a["LANGUAGE"],
                        uri: try a["URI"].map { (uri) throws(PlaylistError) in try resolve(uri, against: url) },
                        isDefault: a["DEFAULT"] == "YES"))
            } else if !line.hasPrefix("#"), let a = pending {
                pending = nil
                guard let bandwidth = a["BANDWIDTH"].flatMap({ Int64($0) }), bandwidth >= 0 else {
                    throw .invalid("an EXT-X-STREAM-INF lacks a BANDWIDTH")
                }
                var variant = HLSVariant(
                    uri: try resolve(String(line), against: url), bandwidth: bandwidth,
                    averageBandwidth: a["AVERAGE-BANDWIDTH"].flatMap { Int64($0) }, codecs: a["CODECS"],
                    name: a["NAME"] ?? a["VIDEO"], audio: a["AUDIO"])
                if let resolution = a["RESOLUTION"] {
                    let parts = resolution.lowercased().split(separator: "x")
                    if parts.count == 2 {
                        variant.width = Int(parts[0])
                        variant.height = Int(parts[1])
                    }
                }
                variants.append(variant)
                guard variants.count <= maxSegments else {
                    throw .invalid("the master playlist lists too many variants")
                }
            }
        }
        guard !variants.isEmpty else { throw .invalid("the master playlist names no variant") }
        return .master(variants: variants, renditions: renditions)
    }

    // MARK: media

    private static func media(_ lines: [Substring], url: String) throws(PlaylistError) -> HLSMediaPlaylist {
        var playlist = HLSMediaPlaylist()
        var sequence: Int64 = 0
        var duration: Double?
        var range: HLSByteRange?
        var discontinuity = false
        var key: Int?
        var map: Int?
        var lastEnd: [String: Int64] = [:]
        var mapLastEnd: [String: Int64] = [:]
        for line in lines {
            if line.hasPrefix("#EXT-X-MEDIA-SEQUENCE:") {
                guard let value = Int64(line.dropFirst("#EXT-X-MEDIA-SEQUENCE:".count)), value >= 0 else {
                    throw .invalid("EXT-X-MEDIA-SEQUENCE is not a number")
                }
                sequence = value
            } else if line.hasPrefix("#EXTINF:") {
                let value = line.dropFirst("#EXTINF:".count).prefix { $0 != "," }
                guard let seconds = Double(value), seconds >= 0, seconds.isFinite else {
                    throw .invalid("an EXTINF has no duration")
                }
                duration = seconds
            } else if line.hasPrefix("#EXT-X-BYTERANGE:") {
                range = try byteRange(line.dropFirst("#EXT-X-BYTERANGE:".count), after: nil)
            } else if line == "#EXT-X-DISCONTINUITY" {
                discontinuity = true
            } else if line == "#EXT-X-ENDLIST" {
                playlist.endList = true
            } else if line.hasPrefix("#EXT-X-PLAYLIST-TYPE:") {
                playlist.playlistType = String(line.dropFirst("#EXT-X-PLAYLIST-TYPE:".count))
            } else if line.hasPrefix("#EXT-X-KEY:") {
                key = try keyTag(attributes(line.dropFirst("#EXT-X-KEY:".count)), url: url, into: &playlist)
            } else if line.hasPrefix("#EXT-X-MAP:") {
                let a = attributes(line.dropFirst("#EXT-X-MAP:".count))
                guard let uri = a["URI"] else { throw .invalid("an EXT-X-MAP has no URI") }
                let resolved = try resolve(uri, against: url)
                var mapRange: HLSByteRange?
                if let text = a["BYTERANGE"] {
                    mapRange = try byteRange(Substring(text), after: mapLastEnd[resolved])
                    mapLastEnd[resolved] = mapRange!.offset + mapRange!.length
                }
                playlist.maps.append(HLSMap(uri: resolved, range: mapRange))
                map = playlist.maps.count - 1
            } else if !line.hasPrefix("#") {
                guard let seconds = duration else { throw .invalid("a segment URI without an EXTINF before it") }
                let uri = try resolve(String(line), against: url)
                if var given = range {
                    if given.offset < 0 {
                        guard let end = lastEnd[uri] else {
                            throw .invalid("an EXT-X-BYTERANGE without an offset follows no range of the same URI")
                        }
                        given.offset = end
                    }
                    lastEnd[uri] = given.offset + given.length
                    range = given
                }
                playlist.segments.append(
                    HLSMediaSegment(
                        uri: uri, duration: seconds, range: range, key: key, map: map, sequence: sequence,
                        discontinuity: discontinuity))
                guard playlist.segments.count <= maxSegments else {
                    throw .invalid("the playlist has more than \(maxSegments) segments")
                }
                sequence += 1
                duration = nil
                range = nil
                discontinuity = false
            }
        }
        guard !playlist.segments.isEmpty else { throw .invalid("the playlist names no segment") }
        return playlist
    }

    private static func keyTag(
        _ a: [String: String], url: String, into playlist: inout HLSMediaPlaylist
    ) throws(PlaylistError) -> Int? {
        let method = a["METHOD"] ?? ""
        if method == "NONE" { return nil }
        if let format = a["KEYFORMAT"], format != "identity" {
            throw PlaylistError(
                "playlist_unsupported", "the playlist's key format \(format) is DRM, which Haul does not decrypt")
        }
        guard method == "AES-128" else {
            throw PlaylistError(
                "playlist_unsupported",
                "the playlist's encryption \(method.isEmpty ? "(none named)" : method) is not AES-128, "
                    + "which is the only method Haul decrypts")
        }
        guard let uri = a["URI"] else { throw .invalid("an AES-128 EXT-X-KEY has no URI") }
        var iv: [UInt8]?
        if let text = a["IV"] {
            guard let bytes = hexBytes(text), bytes.count == 16 else {
                throw .invalid("an EXT-X-KEY's IV is not 128 bits")
            }
            iv = bytes
        }
        playlist.keys.append(HLSKey(uri: try resolve(uri, against: url), iv: iv))
        return playlist.keys.count - 1
    }

    /// `length[@offset]`; a missing offset is -1 (the previous range's end of the same URI) unless `after` is given.
    private static func byteRange(_ text: Substring, after: Int64?) throws(PlaylistError) -> HLSByteRange {
        let parts = text.split(separator: "@", maxSplits: 1)
        guard let length = parts.first.flatMap({ Int64($0) }), length > 0 else {
            throw .invalid("an EXT-X-BYTERANGE is not length[@offset]")
        }
        if parts.count == 2 {
            guard let offset = Int64(parts[1]), offset >= 0 else {
                throw .invalid("an EXT-X-BYTERANGE's offset is bad")
            }
            return HLSByteRange(length: length, offset: offset)
        }
        return HLSByteRange(length: length, offset: after ?? -1)
    }

    private static func hexBytes(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count > 2, digits.count % 2 == 0, digits[0] == UInt8(ascii: "0"),
            digits[1] | 0x20 == UInt8(ascii: "x")
        else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 2, to: digits.count, by: 2) {
            guard let high = PercentEncoding.hexValue(digits[index]),
                let low = PercentEncoding.hexValue(digits[index + 1])
            else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    /// `uri` resolved against `base`: only http and https are followed.
    static func resolve(_ uri: String, against base: String) throws(PlaylistError) -> String {
        guard let resolved = URL(string: uri, relativeTo: URL(string: base))?.absoluteString,
            let scheme = resolved.split(separator: ":", maxSplits: 1).first?.lowercased()
        else { throw .invalid("the playlist names a URI that cannot be read: \(Redact.url(uri))") }
        guard scheme == "http" || scheme == "https" else {
            throw .invalid("the playlist names a \(scheme): URI; only http and https are followed")
        }
        return resolved
    }

    /// An attribute list (`NAME=value,NAME="quoted, value"`), names as written.
    static func attributes(_ text: Substring) -> [String: String] {
        var result: [String: String] = [:]
        var rest = text[...]
        while !rest.isEmpty {
            guard let equals = rest.firstIndex(of: "=") else { break }
            let name = String(rest[..<equals]).trimmingSpaces()
            rest = rest[rest.index(after: equals)...]
            var value: Substring
            if rest.first == "\"" {
                let body = rest.dropFirst()
                let close = body.firstIndex(of: "\"") ?? body.endIndex
                value = body[..<close]
                rest = close == body.endIndex ? body[close...] : body[body.index(after: close)...]
                if let comma = rest.firstIndex(of: ",") { rest = rest[rest.index(after: comma)...] } else { rest = "" }
            } else {
                let comma = rest.firstIndex(of: ",") ?? rest.endIndex
                value = rest[..<comma]
                rest = comma == rest.endIndex ? "" : rest[rest.index(after: comma)...]
            }
            result[String(name)] = String(value)
        }
        return result
    }
}
