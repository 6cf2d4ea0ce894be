import HaulCore

/// A client command line read against its `CommandSpec`: `--name value`, `--name=value`, switches (`--name`,
/// `--name=0` for off, the words of `Switch`), one-letter spellings (`-i FILE`), positional arguments in any order,
/// `--` ending options.
struct Options {
    private var named: [String: [String]] = [:]
    private(set) var positional: [String] = []
    let spec: CommandSpec

    init(_ arguments: [String], spec: CommandSpec) throws(ClientCommand.Stop) {
        self.spec = spec
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
            let option: CommandSpec.Option
            if argument.hasPrefix("--") {
                var name = String(argument.dropFirst(2))
                if let equals = name.firstIndex(of: "=") {
                    value = String(name[name.index(after: equals)...])
                    name = String(name[..<equals])
                }
                guard let found = spec.option(named: name) else {
                    throw ClientCommand.Stop.usage("unknown option --\(name)", command: spec)
                }
                option = found
            } else {
                guard argument.count == 2, let found = spec.option(short: argument.last!) else {
                    throw ClientCommand.Stop.usage("unknown option \(argument)", command: spec)
                }
                option = found
            }
            if option.value == nil {
                // A switch's value is one of the documented words: `--wait=2` is a mistake, not "on".
                if let value, Switch.parse(value) == nil {
                    throw ClientCommand.Stop.usage("--\(option.name) takes \(Switch.words), not '\(value)'",
                                                   command: spec)
                }
                named[option.name, default: []].append(value.map { Switch.parse($0)! ? "1" : "0" } ?? "1")
                continue
            }
            if value == nil {
                guard index < arguments.count else {
                    throw ClientCommand.Stop.usage("--\(option.name) needs a value (\(option.value!))", command: spec)
                }
                value = arguments[index]
                index += 1
            }
            if !option.repeatable, named[option.name] != nil, option.name != "server", option.name != "token" {
                throw ClientCommand.Stop.usage("--\(option.name) is given twice", command: spec)
            }
            named[option.name, default: []].append(value!)
        }
    }

    func flag(_ name: String) -> Bool { named[name].map { $0.last != "0" } ?? false }

    /// The last value given (for --server and --token, which may come before and after the command).
    func value(_ name: String) -> String? { named[name]?.last }

    func values(_ name: String) -> [String] { named[name] ?? [] }

    func positionals(_ count: ClosedRange<Int>, _ message: String) throws(ClientCommand.Stop) -> [String] {
        guard count.contains(positional.count) else { throw ClientCommand.Stop.usage(message, command: spec) }
        return positional
    }
}
