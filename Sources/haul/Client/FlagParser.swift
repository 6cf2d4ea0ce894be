import HaulCore

/// The one reader of command lines, for `haul serve` and the client's commands alike, each with its own list of
/// flags: `--name value`, `--name=value`, switches (`--name` alone is on; `--name=0` off, the words of `Switch`),
/// one-letter spellings (`-i FILE`), positional arguments anywhere, `--` ending the options. What each caller makes
/// of the result (and how it words a failure) is its own.
struct FlagParser {
    struct Flag: Sendable {
        let name: String
        let takesValue: Bool
        var short: Character? = nil
        /// Given more than once, every value counts (else `repeats` decides).
        var repeatable = false
    }

    enum Failure: Error, Equatable {
        /// As written: `--name` or `-x`.
        case unknown(String)
        case needsValue(String)
        case notASwitchWord(name: String, value: String)
        case givenTwice(String)
    }

    /// Each flag given, in order (a switch's value as written, `1` when bare), and the positional arguments.
    var flags: [(name: String, value: String)] = []
    var positional: [String] = []

    /// Reads `arguments` against `known`. A flag that is not `repeatable` given again is refused unless `repeats`
    /// allows it (the server lets the last one win, as a later config line would); `checkSwitches` refuses a
    /// switch's value that is none of `Switch`'s words here, for callers that do not check it where they read it.
    init(
        _ arguments: [String], known: [Flag], repeats: (Flag) -> Bool = { _ in false },
        checkSwitches: Bool = true
    ) throws(Failure) {
        var index = 0
        var optionsEnded = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if optionsEnded || argument == "-" || !argument.hasPrefix("-") {
                positional.append(argument)
                continue
            }
            if argument == "--" {
                optionsEnded = true
                continue
            }
            var value: String?
            let flag: Flag
            if argument.hasPrefix("--") {
                var name = String(argument.dropFirst(2))
                if let equals = name.firstIndex(of: "=") {
                    value = String(name[name.index(after: equals)...])
                    name = String(name[..<equals])
                }
                guard let found = known.first(where: { $0.name == name }) else { throw .unknown("--" + name) }
                flag = found
            } else {
                guard argument.count == 2, let found = known.first(where: { $0.short == argument.last! }) else {
                    throw .unknown(argument)
                }
                flag = found
            }
            if !flag.takesValue {
                // A switch's value is one of the documented words: `--wait=2` is a mistake, not "on".
                if checkSwitches, let value, Switch.parse(value) == nil {
                    throw .notASwitchWord(name: flag.name, value: value)
                }
            } else if value == nil {
                guard index < arguments.count else { throw .needsValue(flag.name) }
                value = arguments[index]
                index += 1
            }
            if !flag.repeatable, !repeats(flag), flags.contains(where: { $0.name == flag.name }) {
                throw .givenTwice(flag.name)
            }
            flags.append((flag.name, value ?? "1"))
        }
    }
}
