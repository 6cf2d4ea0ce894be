import FoundationEssentials
import HaulLoop

/// The rows of the kinds of download beyond a single file: what a URL is (`kind`), an HLS master playlist's
/// variant, and a torrent's files and seeding.
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
        DownloadOption(
            name: "seed_ratio", kind: .decimal(0...10_000),
            otherwise: "the category's, else --bittorrent-seed-ratio", column: "seed_ratio",
            apply: { option, value, request, problems in
                guard case .number(let ratio) = value, ratio >= 0, ratio <= 10_000 else {
                    return problems.append((option.name, "must be a number from 0 to 10000"))
                }
                request.seedRatio = ratio
            },
            carry: { request, download in download.seedRatio = request.seedRatio },
            show: { $0.seedRatio.map { .number($0) } ?? .null },
            storage: DownloadColumn(name: "seed_ratio", write: { $0.seedRatio.map { .real($0) } ?? .null }) { d, v in
                d.seedRatio = v.double
            },
            flag: .init(
                name: "seed-ratio", placeholder: "RATIO",
                help: "a torrent seeds until it uploaded RATIO times its size (0: no ratio limit)"),
            aria2: ["seed-ratio"]),
        DownloadOption(
            name: "seed_time", kind: .integer(0...315_360_000),
            otherwise: "the category's, else --bittorrent-seed-time", column: "seed_time",
            apply: { option, value, request, problems in
                request.seedTime = checkedInteger(value, option, &problems)
            },
            carry: { request, download in download.seedTime = request.seedTime },
            show: { JSONValue($0.seedTime) },
            storage: DownloadColumn(name: "seed_time", write: { integer($0.seedTime) }) { d, v in d.seedTime = v.int },
            flag: .init(
                name: "seed-time", placeholder: "SECONDS",
                help: "a torrent seeds at most SECONDS after it completes (0: no time limit)")),
        DownloadOption(
            name: "upload_limit", kind: .bytes(0...maxBytes), otherwise: "none (0 is none)", column: "upload_limit",
            apply: { option, value, request, problems in
                request.uploadLimit = checkedInteger(value, option, &problems).flatMap { $0 == 0 ? nil : $0 }
            },
            carry: { request, download in download.uploadLimit = request.uploadLimit },
            show: { JSONValue($0.uploadLimit) },
            storage: DownloadColumn(name: "upload_limit", write: { integer($0.uploadLimit) }) { d, v in
                d.uploadLimit = v.int
            },
            flag: .init(name: "upload-limit", placeholder: "SIZE", help: "a torrent's upload, bytes per second"),
            aria2: ["max-upload-limit"]),
        DownloadOption(
            name: "tags", kind: .text, otherwise: "none", patchable: true, column: "tags",
            apply: { option, value, request, problems in
                guard let text = checkedString(value, option, &problems) else { return }
                guard let tags = DownloadTags.parse(text) else {
                    return problems.append((option.name, DownloadTags.problem))
                }
                request.tags = DownloadTags.joined(tags)
            },
            carry: { request, download in download.tags = request.tags },
            show: { JSONValue($0.tags) },
            storage: DownloadColumn(name: "tags", write: { text($0.tags) }) { d, v in d.tags = v.string },
            flag: .init(name: "tags", placeholder: "LIST", help: "labels to file it under, comma-separated (hd,tv)")),
    ]
}
