import HaulCore

/// A client command line read against its `CommandSpec` by the `FlagParser` every command line goes through.
struct Options {
    private var named: [String: [String]] = [:]
    private(set) var positional: [String] = []
    let spec: CommandSpec

    init(_ arguments: [String], spec: CommandSpec) throws(ClientCommand.Stop) {
        self.spec = spec
        let known = (spec.options + CommandSpec.global).map { option in
            FlagParser.Flag(
                name: option.name, takesValue: option.value != nil, short: option.short,
                repeatable: option.repeatable)
        }
        let parsed: FlagParser
        do {
            // --server and --token may come before the command and after it: the last one counts.
            parsed = try FlagParser(arguments, known: known, repeats: { ["server", "token"].contains($0.name) })
        } catch {
            switch error {
            case .unknown(let written): throw .usage("unknown option \(written)", command: spec)
            case .notASwitchWord(let name, let value):
                throw .usage("--\(name) takes \(Switch.words), not '\(value)'", command: spec)
            case .needsValue(let name):
                throw .usage("--\(name) needs a value (\(spec.option(named: name)?.value ?? "VALUE"))", command: spec)
            case .givenTwice(let name): throw .usage("--\(name) is given twice", command: spec)
            }
        }
        for (name, value) in parsed.flags {
            let isSwitch = spec.option(named: name)?.value == nil
            named[name, default: []].append(isSwitch ? (Switch.parse(value)! ? "1" : "0") : value)
        }
        positional = parsed.positional
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
