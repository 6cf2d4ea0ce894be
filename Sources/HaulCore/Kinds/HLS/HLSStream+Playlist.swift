import FoundationEssentials
import HaulLoop

/// Reading the playlist: a master's variant chosen, the media playlist's pieces listed and fingerprinted, and the
/// answer the runner hears.
extension HLSStream {
    func playlistRead(_ body: [UInt8], url: String) {
        playlistsRead += 1
        do throws(PlaylistError) {
            switch try HLSParser.parse(body, url: url) {
            case .master(let variants, let renditions):
                guard playlistsRead == 1 else {
                    throw .invalid("the variant's playlist is a master playlist again; one level is followed")
                }
                let chosen = try HLSVariantChoice.choose(variants, by: wanted)
                info.variants = variants.count
                info.variant = HLSInfo.Variant(
                    bandwidth: chosen.bandwidth, width: chosen.width, height: chosen.height, name: chosen.name,
                    codecs: chosen.codecs)
                info.audio = renditions.filter {
                    $0.type == "AUDIO" && ($0.group == chosen.audio || chosen.audio == nil)
                }
                .map { HLSInfo.Audio(name: $0.name, language: $0.language, group: $0.group, isDefault: $0.isDefault) }
                playlistURL = chosen.uri
                pendingPlaylist = chosen.uri
                pumpSoon()
            case .media(let playlist):
                guard playlist.endList else {
                    throw PlaylistError(
                        "playlist_live",
                        "the playlist is live (no EXT-X-ENDLIST): Haul downloads video on demand, not live streams")
                }
                planned(playlist)
            }
        } catch {
            fail(refusal(error.code, error.message, retryable: false))
        }
    }

    func planned(_ playlist: HLSMediaPlaylist) {
        media = playlist
        var lastMap: Int?
        for (n, segment) in playlist.segments.enumerated() {
            if let map = segment.map, map != lastMap { pieces.append(.map(map)) }
            lastMap = segment.map
            pieces.append(.segment(n))
        }
        info.segmentsTotal = playlist.segments.count
        info.duration = playlist.duration
        info.encrypted = !playlist.keys.isEmpty
        info.container = playlist.maps.isEmpty ? "ts" : "mp4"
        if let exact = playlist.exactBytes {
            info.size = exact
            info.sizeExact = true
        }
        var identity = playlistURL + "\n"
        for segment in playlist.segments {
            identity += segment.uri
            if let range = segment.range { identity += " \(range.offset)+\(range.length)" }
            if let key = segment.key { identity += " key " + playlist.keys[key].uri }
            if let map = segment.map { identity += " map " + playlist.maps[map].uri }
            identity += "\n"
        }
        fingerprint = "\"hls-\(Digest.hex(Array(Digest.sha256(Array(identity.utf8)).prefix(16))))\""
        answer()
    }

    /// The response the runner hears: from the start (200), or from where it asked (206) when the playlist is the
    /// version it asked for and the index says where that byte lies.
    func answer() {
        var headers: [(name: String, value: String)] = [
            ("content-type", info.container == "mp4" ? "video/mp4" : "video/mp2t"),
            ("etag", fingerprint),
            ("accept-ranges", "bytes"),
            ("content-disposition", "attachment; filename=\"\(outputName())\""),
        ]
        let start = template.range?.start ?? 0
        var status = 200
        if template.method == .head {
            response = TransferResponse(
                status: 200, headers: headers, effectiveURL: firstAnswer?.effectiveURL ?? template.url)
            return pumpSoon()
        }
        if start > 0, template.ifRange == fingerprint, let place = index.locate(start, fingerprint: fingerprint) {
            status = 206
            headers.append(("content-range", "bytes \(start)-\(start)/*"))
            nextFetch = place.piece
            nextDeliver = place.piece
            offset = place.skip
            writtenBefore = start - place.skip
        } else {
            index.begin(fingerprint)
        }
        // Resumed: what the output holds already counts.
        for case .segment(let n) in pieces.prefix(nextDeliver) {
            info.segmentsDone += 1
            secondsDone += media?.segments[n].duration ?? 0
        }
        response = TransferResponse(
            status: status, headers: headers, effectiveURL: firstAnswer?.effectiveURL ?? template.url)
        observer?.playlistProgress(info)
        pumpSoon()
    }

    /// The playlist's own name with the container's extension: `index.m3u8` becomes `index.ts`.
    func outputName() -> String {
        let path = URLComponents(string: template.url)?.path ?? ""
        var stem = path.split(separator: "/").last.map(String.init) ?? "video"
        if let dot = stem.lastIndex(of: "."), dot != stem.startIndex { stem = String(stem[..<dot]) }
        let safe = stem.filter { $0 != "\"" && $0 != "\\" && !$0.isNewline }
        return (safe.isEmpty ? "video" : safe) + "." + info.container
    }

    func range(of piece: Int) -> HLSByteRange? {
        guard let media else { return nil }
        switch pieces[piece] {
        case .map(let map): return media.maps[map].range
        case .segment(let n): return media.segments[n].range
        }
    }
}
