import Glibc
import HaulLoop

/// The shapes of rows: a number, a duration, a size, a switch, a text or a list, each setting one field of the
/// server's configuration; a row whose value needs more than its kind checks (an address, a URL) says so itself.
extension ServerOptions {
    typealias Apply = @Sendable (ServerOption.Given, inout ServeConfig) throws(ServeConfig.Invalid) -> Void
    typealias Show = @Sendable (ServeConfig) -> String?

    static func integer(
        _ name: String, _ range: ClosedRange<Int>, _ placeholder: String = "N", default value: String,
        help: String, settings: String? = nil, sample: String,
        _ field: WritableKeyPath<ServeConfig, Int> & Sendable
    ) -> ServerOption {
        ServerOption(
            name: name, placeholder: placeholder, kind: .integer(range), defaultValue: value, help: help,
            settings: settings, sample: sample, apply: { given, config in config[keyPath: field] = given.integer },
            show: { String($0[keyPath: field]) })
    }

    static func seconds(
        _ name: String, _ range: ClosedRange<Double>, default value: String, help: String,
        sample: String, _ field: WritableKeyPath<ServeConfig, Double> & Sendable
    ) -> ServerOption {
        ServerOption(
            name: name, placeholder: "SECONDS", kind: .seconds(range), defaultValue: value, help: help,
            sample: sample, apply: { given, config in config[keyPath: field] = given.seconds },
            show: { ServerOption.number($0[keyPath: field]) })
    }

    static func bytes(
        _ name: String, _ range: ClosedRange<Int64>, default value: String, shown: String? = nil,
        help: String, settings: String? = nil, sample: String, sampleShown: String,
        _ field: WritableKeyPath<ServeConfig, Int64> & Sendable
    ) -> ServerOption {
        ServerOption(
            name: name, placeholder: "BYTES", kind: .bytes(range), defaultValue: value, defaultShown: shown,
            help: help, settings: settings, sample: sample, sampleShown: sampleShown,
            apply: { given, config in config[keyPath: field] = given.bytes },
            show: { String($0[keyPath: field]) })
    }

    /// A size where 0 is none.
    static func bytes(
        _ name: String, _ range: ClosedRange<Int64>, default value: String, shown: String? = nil,
        help: String, settings: String? = nil, sample: String, sampleShown: String,
        none field: WritableKeyPath<ServeConfig, Int64?> & Sendable
    ) -> ServerOption {
        ServerOption(
            name: name, placeholder: "BYTES", kind: .bytes(range), defaultValue: value, defaultShown: shown,
            help: help, settings: settings, sample: sample, sampleShown: sampleShown,
            apply: { given, config in config[keyPath: field] = given.bytes == 0 ? nil : given.bytes },
            show: { String($0[keyPath: field] ?? 0) })
    }

    static func toggle(
        _ name: String, help: String, _ field: WritableKeyPath<ServeConfig, Bool> & Sendable
    )
        -> ServerOption
    {
        ServerOption(
            name: name, placeholder: nil, kind: .toggle, defaultValue: "off", help: help, sample: "on",
            sampleShown: "on", apply: { given, config in config[keyPath: field] = given.on },
            show: { $0[keyPath: field] ? "on" : "off" })
    }

    static func text(
        _ name: String, _ placeholder: String, default value: String? = nil, shown: String? = nil,
        help: String, settings: String? = nil, sample: String, sampleShown: String? = nil,
        apply: @escaping Apply, show: @escaping Show
    ) -> ServerOption {
        ServerOption(
            name: name, placeholder: placeholder, kind: .text, defaultValue: value, defaultShown: shown,
            help: help, settings: settings, sample: sample, sampleShown: sampleShown, apply: apply, show: show)
    }

    /// A further address the server listens on (`HOST:PORT`), off unless given.
    static func address(
        _ name: String, help: String, sample: String,
        _ field: WritableKeyPath<ServeConfig, ListenAddress?> & Sendable
    ) -> ServerOption {
        text(name, "HOST:PORT", help: help, sample: sample) { given, config throws(ServeConfig.Invalid) in
            guard let address = ListenAddress(given.text) else {
                throw given.invalid("must be HOST:PORT, got '\(given.text)'")
            }
            config[keyPath: field] = address
        } show: {
            $0[keyPath: field].map { "\($0.host):\($0.port)" }
        }
    }

    static func list(
        _ name: String, _ placeholder: String, shown: String? = nil, help: String, sample: String,
        apply: @escaping Apply, show: @escaping Show
    ) -> ServerOption {
        ServerOption(
            name: name, placeholder: placeholder, kind: .list, defaultShown: shown,
            help: "comma-separated " + help, sample: sample, apply: apply, show: show)
    }

    /// A file the server reads (it must be readable at start), kept by its absolute path.
    static func readable(
        _ name: String, help: String, _ field: WritableKeyPath<ServeConfig, String?> & Sendable
    )
        -> ServerOption
    {
        ServerOption(
            name: name, placeholder: "PATH", kind: .text, help: help, sample: "/dev/null",
            apply: { given, config throws(ServeConfig.Invalid) in
                guard Glibc.access(given.text, R_OK) == 0 else {
                    throw given.invalid("cannot be read: \(given.text)")
                }
                config[keyPath: field] = Files.absolute(given.text)
            }, show: { $0[keyPath: field] })
    }
}
