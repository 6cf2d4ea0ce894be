import HaulLoop

/// Which variant of a master playlist a download takes, from its `variant` option: `best` (the default: the
/// highest bandwidth), `worst`, a height (`720`, `720p`: the best variant that tall or less, else the shortest), a
/// bandwidth ceiling (`2500k`, `4M`, or bits per second above 10000: the best variant within it, else the
/// thinnest), or a variant's NAME.
public enum HLSVariantChoice {
    public static func choose(_ variants: [HLSVariant], by wanted: String?) throws(PlaylistError) -> HLSVariant {
        precondition(!variants.isEmpty)
        let byBandwidth = variants.sorted { ($0.bandwidth, $0.height ?? 0) < ($1.bandwidth, $1.height ?? 0) }
        let text = (wanted ?? "best").trimmingSpaces()
        switch text.lowercased() {
        case "", "best": return byBandwidth.last!
        case "worst": return byBandwidth.first!
        default: break
        }
        if let height = height(text) {
            let fitting = byBandwidth.filter { ($0.height ?? .max) <= height }
            if let best = fitting.last(where: { $0.height == fitting.compactMap(\.height).max() }) { return best }
            return variants.min { ($0.height ?? .max, $0.bandwidth) < ($1.height ?? .max, $1.bandwidth) }!
        }
        if let ceiling = bandwidth(text) {
            return byBandwidth.last { $0.bandwidth <= ceiling } ?? byBandwidth.first!
        }
        if let named = byBandwidth.last(where: { $0.name.map { ASCII.equalsIgnoringCase($0, text) } ?? false }) {
            return named
        }
        let names = variants.compactMap(\.name)
        throw PlaylistError(
            "variant_not_found",
            "no variant is named \(text)"
                + (names.isEmpty ? "" : " (the playlist names \(names.joined(separator: ", ")))")
                + "; give best, worst, a height such as 720, or a bandwidth such as 2500k")
    }

    /// `720` or `720p`: a height in pixels (at most 10000).
    static func height(_ text: String) -> Int? {
        let digits = text.lowercased().hasSuffix("p") ? String(text.dropLast()) : text
        guard let value = Int(digits), value > 0, value <= 10000 else { return nil }
        return value
    }

    /// `2500k`, `4M`, `4.5m`, or bits per second above 10000.
    static func bandwidth(_ text: String) -> Int64? {
        let lower = text.lowercased()
        let multiplier: Double = lower.hasSuffix("k") ? 1e3 : lower.hasSuffix("m") ? 1e6 : 1
        let number = multiplier == 1 ? lower : String(lower.dropLast())
        guard let value = Double(number), value > 0, value.isFinite else { return nil }
        let bits = value * multiplier
        // (4K is a resolution, not 4000 bits per second.)
        guard bits > 10000, bits < 1e15 else { return nil }
        return Int64(bits)
    }

    /// Whether `text` is a choice this takes (for validating the option before a playlist is seen).
    public static func isValid(_ text: String) -> Bool {
        // As openapi.yaml says: at most 200 code points, no control character, not only spaces.
        text.unicodeScalars.count <= 200 && text.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F }
            && text.unicodeScalars.contains { $0.value > 0x20 }
    }
}
