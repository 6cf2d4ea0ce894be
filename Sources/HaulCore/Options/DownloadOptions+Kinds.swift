import FoundationEssentials
import HaulLoop

/// The rows of the kinds of download beyond a single file: what a URL is (`kind`), an HLS master playlist's
/// variant, and a torrent's files.
extension DownloadOptions {
    static let kinds: [DownloadOption] = [
        DownloadOption(
            name: "kind", kind: .text, otherwise: "auto: hls for a .m3u8 URL or a playlist's answer, else file",
            column: "kind",
            apply: { option, value, request, problems in
                guard let text = checkedString(value, option, &problems) else { return }
                guard let kind = DownloadKind(rawValue: text) else {
                    return problems.append((option.name, "must be auto, file, hls or torrent"))
                }
                request.kind = kind
            },
            carry: { request, download in
                download.kind =
                    DownloadKind.isMagnet(request.url) || request.torrent != nil
                    ? .torrent
                    : request.kind == .auto && DownloadKind.pathNamesPlaylist(request.url) ? .hls : request.kind
            },
            show: { .string($0.kind.shown) },
            storage: DownloadColumn(name: "kind", write: { .text($0.kind.rawValue) }) { d, v in
                d.kind = v.string.flatMap(DownloadKind.init(rawValue:)) ?? .auto
            },
            flag: .init(
                name: "kind", placeholder: "auto|file|hls|torrent",
                help: "what the URL is (auto: a .m3u8 is HLS, a magnet: BitTorrent)")),
        DownloadOption(
            name: "variant", kind: .text, otherwise: "best", column: "variant",
            apply: { option, value, request, problems in
                guard let text = checkedString(value, option, &problems) else { return }
                guard HLSVariantChoice.isValid(text) else {
                    return problems.append(
                        (option.name, "must be best, worst, a height (720), a bandwidth (2500k) or a variant's name"))
                }
                request.variant = text
            },
            carry: { request, download in download.variant = request.variant },
            show: { JSONValue($0.variant) },
            storage: DownloadColumn(name: "variant", write: { text($0.variant) }) { d, v in d.variant = v.string },
            flag: .init(
                name: "variant", placeholder: "CHOICE",
                help: "an HLS master playlist's variant: best, worst, 720, 2500k or a name")),
        DownloadOption(
            name: "files", kind: .text, otherwise: "every file of a torrent", column: "files",
            apply: { option, value, request, problems in
                guard let text = checkedString(value, option, &problems) else { return }
                guard TorrentSelection(text) != nil else {
                    return problems.append(
                        (
                            option.name,
                            "must be a torrent's file numbers (from 1: 1,3,5-7) or globs (*.mkv), comma-separated, "
                                + "at most 4096 bytes without control characters"
                        ))
                }
                request.files = text
            },
            carry: { request, download in download.files = request.files },
            show: { JSONValue($0.files) },
            storage: DownloadColumn(name: "files", write: { text($0.files) }) { d, v in d.files = v.string },
            flag: .init(
                name: "files", placeholder: "LIST",
                help: "a torrent's files to fetch: numbers from 1 (1,3,5-7) or globs (*.mkv), comma-separated"),
            aria2: ["select-file"]),
    ]
}
