import FoundationEssentials
import HaulLoop

/// What an HLS download shows of its playlist and progress: the variant taken, the alternate audio named beside
/// it, segments done of the total, and the output's size (exact when byte ranges tell it, else estimated from the
/// segments written so far). Stored with the download as JSON.
public struct HLSInfo: Equatable, Sendable {
    public struct Variant: Equatable, Sendable {
        public var bandwidth: Int64
        public var width: Int?
        public var height: Int?
        public var name: String?
        public var codecs: String?
    }

    public struct Audio: Equatable, Sendable {
        public var name: String
        public var language: String?
        public var group: String
        public var isDefault: Bool
    }

    /// The variant taken (nil for a media playlist given directly) and how many the master playlist offered.
    public var variant: Variant?
    public var variants = 0
    public var audio: [Audio] = []
    public var segmentsTotal = 0
    public var segmentsDone = 0
    /// Seconds of media in the playlist.
    public var duration: Double = 0
    public var encrypted = false
    /// `ts` (MPEG-TS segments) or `mp4` (fMP4 with an init section).
    public var container = "ts"
    /// The output's size: exact (`sizeExact`) from byte ranges, or estimated from what was written.
    public var size: Int64?
    public var sizeExact = false

    public init() {}

    public var json: JSONValue {
        var members: [(String, JSONValue)] = [
            ("segments_done", .number(Double(segmentsDone))),
            ("segments_total", .number(Double(segmentsTotal))),
            ("duration", .number((duration * 1000).rounded() / 1000)),
            ("container", .string(container)),
            ("encrypted", .bool(encrypted)),
            ("variants", .number(Double(variants))),
            ("size", size.map { .number(Double($0)) } ?? .null),
            ("size_estimated", .bool(!sizeExact)),
        ]
        if let variant {
            var shown: [(String, JSONValue)] = [("bandwidth", .number(Double(variant.bandwidth)))]
            if let width = variant.width, let height = variant.height {
                shown.append(("resolution", .string("\(width)x\(height)")))
                shown.append(("height", .number(Double(height))))
            }
            if let name = variant.name { shown.append(("name", .string(name))) }
            if let codecs = variant.codecs { shown.append(("codecs", .string(codecs))) }
            members.append(("variant", .object(shown)))
        } else {
            members.append(("variant", .null))
        }
        members.append(
            (
                "audio",
                .array(
                    audio.map { audio in
                        var shown: [(String, JSONValue)] = [
                            ("name", .string(audio.name)), ("group", .string(audio.group)),
                            ("default", .bool(audio.isDefault)),
                        ]
                        if let language = audio.language { shown.append(("language", .string(language))) }
                        return .object(shown)
                    })
            ))
        return .object(members)
    }

    public init?(json: JSONValue) {
        guard case .object = json else { return nil }
        segmentsDone = Int(json["segments_done"]?.integerValue ?? 0)
        segmentsTotal = Int(json["segments_total"]?.integerValue ?? 0)
        if case .number(let seconds)? = json["duration"] { duration = seconds }
        container = json["container"]?.stringValue ?? "ts"
        encrypted = json["encrypted"]?.boolValue ?? false
        variants = Int(json["variants"]?.integerValue ?? 0)
        size = json["size"]?.integerValue
        sizeExact = !(json["size_estimated"]?.boolValue ?? true)
        if let shown = json["variant"], case .object = shown {
            let resolution = shown["resolution"]?.stringValue?.split(separator: "x").compactMap { Int($0) }
            variant = Variant(
                bandwidth: shown["bandwidth"]?.integerValue ?? 0,
                width: resolution?.count == 2 ? resolution![0] : nil,
                height: resolution?.count == 2 ? resolution![1] : nil, name: shown["name"]?.stringValue,
                codecs: shown["codecs"]?.stringValue)
        }
        if case .array(let items)? = json["audio"] {
            audio = items.compactMap { item in
                guard let name = item["name"]?.stringValue, let group = item["group"]?.stringValue else { return nil }
                return Audio(
                    name: name, language: item["language"]?.stringValue, group: group,
                    isDefault: item["default"]?.boolValue ?? false)
            }
        }
    }
}
