import HaulCore
import HaulLoop

/// The server's options in aria2's names, one row each: what `getGlobalOption` shows, and whether
/// `changeGlobalOption` may change it (through the settings) or why not (it is a server flag, set at start). A
/// known aria2 option without a row is one Haul has no equivalent for: changing it is refused with its name, where
/// answering "OK" and doing nothing would leave AriaNg's settings page lying to its user.
enum Aria2GlobalOptions {
    /// What a row reads its value from.
    struct Source: Sendable {
        let settings: ServerSettings
        let config: EngineConfig
        /// The caller's download folder (a token's root, else the download root), absolute.
        let root: String
    }

    struct Row: Sendable {
        let name: String
        let value: @Sendable (Source) -> String
        /// The settings member a new value sets (checked here), nil when it cannot change while the server runs.
        var change: (@Sendable (String) throws(Aria2Options.Refusal) -> (String, JSONValue))?
        /// Why it cannot change, for a row without `change`: the flag it is.
        var fixed: String?
    }

    static let rows: [Row] = [
        Row(name: "dir", value: { $0.root }, fixed: "the download root (--download-dir) or the token's root"),
        Row(
            name: "max-concurrent-downloads", value: { String($0.settings.maxActive) },
            change: { text throws(Aria2Options.Refusal) in
                ("max_active", .number(Double(try number("max-concurrent-downloads", text, in: 1...1000))))
            }),
        Row(
            name: "max-overall-download-limit", value: { String($0.settings.maxSpeed ?? 0) },
            change: { text throws(Aria2Options.Refusal) in
                let bytes = try size("max-overall-download-limit", text)
                return ("max_speed", bytes == 0 ? .null : .number(Double(bytes)))
            }),
        Row(
            name: "split", value: { String($0.settings.defaultConnections) },
            change: { text throws(Aria2Options.Refusal) in
                ("default_connections", .number(Double(try number("split", text, in: 1...32))))
            }),
        Row(
            name: "max-connection-per-server", value: { String($0.settings.maxConnectionsPerHost) },
            change: { text throws(Aria2Options.Refusal) in
                (
                    "max_connections_per_host",
                    .number(Double(try number("max-connection-per-server", text, in: 1...1024)))
                )
            }),
        Row(
            name: "all-proxy", value: { $0.settings.proxy?.shown ?? "" },
            change: { text in ("proxy", text.isEmpty ? .null : .string(text)) }),
        Row(name: "no-proxy", value: { $0.config.noProxy.curlList }, fixed: "--no-proxy"),
        Row(name: "min-split-size", value: { String($0.config.minSplitSize) }, fixed: "--min-split-size"),
        Row(name: "max-tries", value: { String($0.config.maxAttempts) }, fixed: "--max-attempts"),
        Row(name: "retry-wait", value: { String(Int($0.config.retryBaseDelay.rounded())) }, fixed: "--retry-wait"),
        Row(
            name: "connect-timeout", value: { String(Int($0.config.connectTimeout.rounded())) },
            fixed: "Haul's connect timeout"),
        Row(name: "timeout", value: { String($0.config.stallTimeout) }, fixed: "--stall-timeout"),
        Row(name: "lowest-speed-limit", value: { String($0.config.lowestSpeed) }, fixed: "--lowest-speed"),
        Row(name: "user-agent", value: { $0.config.userAgent }, fixed: "--user-agent"),
        Row(name: "max-overall-upload-limit", value: { _ in "0" }, fixed: "Haul uploads nothing"),
        Row(
            name: "check-certificate", value: { _ in "true" },
            fixed: "always on; a download's own insecure turns "
                + "it off for that download"),
        Row(name: "continue", value: { _ in "true" }, fixed: "Haul always resumes"),
        Row(name: "allow-overwrite", value: { _ in "false" }, fixed: "Haul never overwrites a file"),
        Row(name: "auto-file-renaming", value: { _ in "true" }, fixed: "a taken name always gets \" (1)\""),
        Row(name: "file-allocation", value: { _ in "falloc" }, fixed: "files of 1 MiB and more are reserved"),
        Row(
            name: "max-download-result", value: { _ in String(Aria2Session.maxRemoved) },
            fixed: "Haul keeps every finished download until it is removed"),
    ]

    static let byName: [String: Row] = Dictionary(uniqueKeysWithValues: rows.map { ($0.name, $0) })

    /// Every row's value: `getGlobalOption`.
    static func json(_ source: Source) -> JSONValue {
        .object(rows.map { ($0.name, .string($0.value(source))) })
    }

    /// The settings members `changeGlobalOption`'s options set; the first option that cannot change refuses them
    /// all (nothing is applied), naming it.
    static func settingsMembers(
        _ options: [(String, JSONValue)]
    ) throws(Aria2Options.Refusal)
        -> [(String, JSONValue)]
    {
        var members: [(String, JSONValue)] = []
        for (name, value) in options {
            if Aria2Options.isRefused(name) {
                throw Aria2Options.Refusal(message: "option \(name) is not allowed through the RPC")
            }
            guard let row = byName[name] else { throw Aria2Options.unsupported(name) }
            guard let change = row.change else {
                throw Aria2Options.Refusal(
                    message: "option \(name) cannot be changed while Haul runs: it is "
                        + (row.fixed ?? "fixed"))
            }
            guard let text = Aria2Options.text(value) else {
                throw Aria2Options.Refusal(message: "option \(name) must be a string")
            }
            members.append(try change(text))
        }
        return members
    }

    private static func number(
        _ name: String, _ text: String, in range: ClosedRange<Int>
    )
        throws(Aria2Options.Refusal) -> Int
    {
        guard let number = Int(text), range.contains(number) else {
            throw Aria2Options.Refusal(
                message: "option \(name) must be a number from \(range.lowerBound) to "
                    + "\(range.upperBound): \(text)")
        }
        return number
    }

    private static func size(_ name: String, _ text: String) throws(Aria2Options.Refusal) -> Int64 {
        guard let bytes = Aria2Options.bytes(text) else {
            throw Aria2Options.Refusal(message: "option \(name) must be a number of bytes (1M, 500K): \(text)")
        }
        return bytes
    }
}
