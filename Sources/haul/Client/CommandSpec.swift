/// What a client command takes, and the help `haul COMMAND --help` prints from it: the parser accepts exactly
/// the options listed here, so nothing is accepted without being documented.
struct CommandSpec {
    struct Option {
        let name: String
        /// The value's placeholder, or nil for a switch.
        let value: String?
        let help: String
        /// A one-letter spelling (`-i`), if any.
        var short: Character? = nil
        var repeatable = false
    }

    let name: String
    /// What follows the name: `URL...`, `ID...`, `[ID]`.
    let arguments: String
    let summary: String
    let details: String
    let options: [Option]

    /// Options every client command takes, before or after its name.
    static let global: [Option] = [
        Option(
            name: "server", value: "URL",
            help: "the server (HAUL_SERVER; else the address in HAUL_LISTEN; else http://127.0.0.1:8080)"),
        Option(name: "token", value: "TOKEN", help: "the bearer token (HAUL_TOKEN)"),
        Option(name: "help", value: nil, help: "this help", short: "h"),
    ]

    func option(named name: String) -> Option? {
        (options + CommandSpec.global).first { $0.name == name }
    }

    func option(short: Character) -> Option? {
        (options + CommandSpec.global).first { $0.short == short }
    }

    /// `haul COMMAND --help`.
    var help: String {
        var text = "usage: haul \(name)\(arguments.isEmpty ? "" : " " + arguments) [options]\n\n\(summary)\n"
        if !details.isEmpty { text += "\n" + CommandSpec.wrap(details, indent: 0) + "\n" }
        text += "\noptions:\n"
        for option in options + CommandSpec.global {
            var spelling = (option.short.map { "-\($0), " } ?? "") + "--" + option.name
            if let value = option.value { spelling += " " + value }
            text += CommandSpec.entry(spelling, option.help)
        }
        return text
    }

    /// `text` in lines of at most 116 characters, each after `indent` spaces.
    static func wrap(_ text: String, indent: Int) -> String {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty, indent + line.count + 1 + word.count > 116 {
                lines.append(String(repeating: " ", count: indent) + line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty { lines.append(String(repeating: " ", count: indent) + line) }
        return lines.joined(separator: "\n")
    }

    /// One option's lines: the spelling in a column of 28, the help wrapped at 116.
    static func entry(_ spelling: String, _ help: String) -> String {
        var lines: [String] = []
        var line = "  " + spelling
        if line.count >= 29 {
            lines.append(line)
            line = ""
        }
        for word in help.split(separator: " ") {
            if line.count < 30 {
                line += String(repeating: " ", count: 30 - line.count) + word
            } else if line.count + 1 + word.count > 116 {
                lines.append(line)
                line = String(repeating: " ", count: 30) + word
            } else {
                line += " " + word
            }
        }
        lines.append(line)
        return lines.joined(separator: "\n") + "\n"
    }
}
