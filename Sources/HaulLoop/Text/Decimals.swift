/// Numbers with a fixed count of decimals, as `%.Nf` prints them but for halves, which go away from zero.
/// `String(format:)` lives in the half of Foundation the server does not link, and cost a tenth of an API request
/// where it was used.
public enum Decimals {
    /// `value` rounded to `places` decimals: `format(0.4123, places: 3)` is "0.412", `format(12.5, places: 2)`
    /// "12.50", `format(7, places: 0)` "7".
    public static func format(_ value: Double, places: Int) -> String {
        guard value.isFinite else { return value.isNaN ? "nan" : value < 0 ? "-inf" : "inf" }
        var scale = 1
        for _ in 0..<max(0, places) { scale *= 10 }
        let scaled = (abs(value) * Double(scale)).rounded()
        // Beyond what an Int holds the decimals say nothing anyway.
        guard scaled < 9.0e18 else { return String(value) }
        let units = Int(scaled)
        var text = (value < 0 && units != 0 ? "-" : "") + String(units / scale)
        if places > 0 {
            let fraction = String(units % scale)
            text += "." + String(repeating: "0", count: places - fraction.count) + fraction
        }
        return text
    }
}
