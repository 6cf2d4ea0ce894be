import HaulCore

/// One `haul serve` option, declared once: its name (the flag `--name`, the environment's `HAUL_NAME`, the config
/// file's `name` or `name_with_underscores`), the kind and range of its value, its default (parsed as a given value
/// is, so it is written nowhere else), its help, the `PATCH /settings` field that changes it while the server runs,
/// and how it applies (which part of the server's configuration it sets). `haul serve --help`, the config file's
/// keys, validation, `haul serve --check` and README's table derive from `ServerOptions.all`.
struct ServerOption: Sendable {
    enum Kind: Sendable {
        case integer(ClosedRange<Int>)
        case seconds(ClosedRange<Double>)
        /// A byte count (per second for a speed), with k, m, g, t suffixes.
        case bytes(ClosedRange<Int64>)
        /// On or off: `--name` alone is on; the value words are `Switch`'s.
        case toggle
        /// Checked by the row's `apply`.
        case text
        /// Comma-separated (or a config file's list).
        case list
    }

    /// A value as the row gets it: parsed by its kind, with the name its user wrote for messages.
    struct Given {
        let text: String
        /// How its user named it: `--max-active`, `HAUL_MAX_ACTIVE`, `max-active in haul.toml:3`.
        let label: String
        fileprivate(set) var integer = 0
        fileprivate(set) var seconds = 0.0
        fileprivate(set) var bytes: Int64 = 0
        fileprivate(set) var on = false

        var list: [String] { text.split(separator: ",").map { $0.trimmingSpaces() }.filter { !$0.isEmpty } }

        func invalid(_ what: String) -> ServeConfig.Invalid { ServeConfig.Invalid(description: "\(label) \(what)") }
    }

    let name: String
    /// The value's name in the help (`N`, `SECONDS`, `HOST:PORT`); nil for a switch.
    let placeholder: String?
    let kind: Kind
    /// The value it has when none is given, applied as a given one is; nil for none.
    var defaultValue: String?
    /// How the help names the default where it is not a value (`the host name`).
    var defaultShown: String?
    /// One paragraph, as README's table shows it (`backticks` are dropped in `--help`).
    let help: String
    /// The field of `PATCH /settings` that changes it while the server runs (a change is kept over the option).
    var settings: String?
    /// A value a test gives it, and how `--check` then shows the option (nil: as given).
    let sample: String
    var sampleShown: String?
    let apply: @Sendable (Given, inout ServeConfig) throws(ServeConfig.Invalid) -> Void
    /// The option as `--check` shows it, nil for none set.
    let show: @Sendable (ServeConfig) -> String?

    var variable: String { "HAUL_" + name.uppercased().replacing("-", with: "_") }

    /// `text` checked against the kind, then given to `apply`.
    func take(_ text: String, label: String, into config: inout ServeConfig) throws(ServeConfig.Invalid) {
        var given = Given(text: text, label: label)
        switch kind {
        case .integer(let range):
            guard let value = Int(text), range.contains(value) else {
                throw given.invalid("must be an integer from \(range.lowerBound) to \(range.upperBound)")
            }
            given.integer = value
        case .seconds(let range):
            guard let value = Double(text), range.contains(value) else {
                throw given.invalid(
                    "must be seconds from \(Self.number(range.lowerBound)) to "
                        + Self.number(range.upperBound))
            }
            given.seconds = value
        case .bytes(let range):
            guard let value = ByteSize.parse(text), range.contains(value) else {
                throw given.invalid("must be a byte count like 4194304, 4m or 1.5G")
            }
            given.bytes = value
        case .toggle:
            guard let value = Switch.parse(text) else { throw given.invalid("takes \(Switch.words), not '\(text)'") }
            given.on = value
        case .text, .list:
            break
        }
        try apply(given, &config)
    }

    /// `0.1`, `60`: a range's end as the help writes it.
    static func number(_ value: Double) -> String {
        value.rounded() == value ? String(Int(value)) : String(value)
    }

    // MARK: what derives from it

    /// The default as the help says it.
    var defaultText: String {
        if let defaultShown { return defaultShown }
        guard let defaultValue else { return "none" }
        if case .toggle = kind { return Switch.parse(defaultValue) == true ? "on" : "off" }
        return defaultValue
    }

    /// Its entry in `haul serve --help`: the flag, then its help wrapped under it, the variable and default last.
    var usageLines: [String] {
        let flag = "--" + name + (placeholder.map { " " + $0 } ?? "")
        let twin = placeholder == nil ? variable + "=1" : variable
        let changes = settings.map { "; PATCH /settings \($0) changes it" } ?? ""
        let text = (help + " (\(twin), default \(defaultText)\(changes))").replacing("`", with: "")
        var lines: [String] = []
        var line = "  " + flag + String(repeating: " ", count: max(1, 25 - flag.count))
        if flag.count > 22 {
            lines.append("  " + flag)
            line = String(repeating: " ", count: 25)
        }
        for word in text.split(separator: " ") {
            if line.count + word.count + 1 > 114, !line.allSatisfy({ $0 == " " }) {
                lines.append(line)
                line = String(repeating: " ", count: 25)
            }
            line += (line.hasSuffix(" ") ? "" : " ") + word
        }
        lines.append(line)
        return lines
    }

    /// Its row in README's table.
    var markdownRow: String {
        let flag = "`--" + name + (placeholder.map { " " + $0 } ?? "") + "`"
        let twin = "`" + variable + (placeholder == nil ? "=1" : "") + "`"
        let changes = settings.map { " (`PATCH /settings` `\($0)` changes it while the server runs)" } ?? ""
        return "| \(flag) | \(twin) | \(defaultText) | \(help)\(changes) |"
    }
}
