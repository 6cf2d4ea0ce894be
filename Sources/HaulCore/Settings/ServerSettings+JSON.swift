/// Settings as the API shows them and the store keeps them: snake_case JSON, speeds in bytes per second (0 for
/// none), times as "HH:MM", days as "mon" ... "sun".
extension ServerSettings {
    public var json: JSONValue {
        .object([
            ("max_active", JSONValue(maxActive)),
            ("max_speed", JSONValue(maxSpeed ?? 0)),
            ("default_connections", JSONValue(defaultConnections)),
            ("max_connections_per_host", JSONValue(maxConnectionsPerHost)),
            ("speed_schedule", .array(speedSchedule.map(\.json))),
            ("proxy", .string(proxy?.shown ?? "none")),
            ("seed_ratio", .number(seeding.ratio)),
            ("seed_time", JSONValue(seeding.seconds)),
        ])
    }
}

extension SpeedWindow {
    public var json: JSONValue {
        .object([
            ("days", .array(days.sorted().map { .string(SpeedWindow.dayNames[$0]) })),
            ("from", .string(SpeedWindow.clock(from))),
            ("to", .string(SpeedWindow.clock(to))),
            ("max_speed", JSONValue(maxSpeed ?? 0)),
        ])
    }

    /// A window from its JSON, or what is wrong with it (field names relative to it).
    static func parse(_ value: JSONValue) -> (window: SpeedWindow?, errors: [(field: String, message: String)]) {
        guard case .object(let members) = value else { return (nil, [("", "must be an object")]) }
        var errors: [(field: String, message: String)] = []
        for (name, _) in members where !["days", "from", "to", "max_speed"].contains(name) {
            errors.append((name, "unknown field"))
        }
        var days = Set(0..<7)
        if let given = value["days"] {
            if case .array(let names) = given, !names.isEmpty, names.count <= 7,
                case let indices = names.compactMap({ $0.stringValue.flatMap(SpeedWindow.dayNames.firstIndex) }),
                indices.count == names.count
            {
                days = Set(indices)
            } else {
                errors.append(("days", "must be a list of mon, tue, wed, thu, fri, sat, sun"))
            }
        }
        // A time given but not one of the day says so in the user's words ("25:00 is not a time of day").
        func time(_ field: String, latest: String) -> Int? {
            let text = value[field]?.stringValue
            let minutes = text.flatMap(SpeedWindow.minutes)
            guard let minutes, field == "to" || minutes < 1440 else {
                errors.append(
                    (
                        field,
                        text.map { "'\($0)' is not a time of day: HH:MM from 00:00 to \(latest)" }
                            ?? "is required, as HH:MM from 00:00 to \(latest)"
                    ))
                return nil
            }
            return minutes
        }
        let from = time("from", latest: "23:59")
        let to = time("to", latest: "24:00")
        var speed: Int64?
        if let number = value["max_speed"]?.integerValue, (0...(Int64(1) << 50)).contains(number) {
            speed = number == 0 ? nil : number
        } else {
            errors.append(("max_speed", "is required: bytes per second, 0 for no limit"))
        }
        guard errors.isEmpty, let from, let to else { return (nil, errors) }
        return (SpeedWindow(days: days, from: from, to: to, maxSpeed: speed), [])
    }
}

extension SettingsChange {
    /// The most windows a schedule holds.
    public static let maxWindows = 50

    /// The stored settings' mark of a proxy a scoped token named; no client's body may carry it.
    static let storedProxyFromToken = "proxy_named_by_token"

    /// A PATCH body's change (null sets a field back to its default), or what is wrong with it. `stored`: the
    /// store's own copy, which also says who named the proxy.
    public static func parse(
        _ members: [(String, JSONValue)], stored: Bool = false
    )
        -> (change: SettingsChange, errors: [(field: String, message: String)])
    {
        var change = SettingsChange()
        var errors: [(field: String, message: String)] = []
        func integer(_ value: JSONValue, _ field: String, _ range: ClosedRange<Int64>) -> Int64?? {
            if value.isNull { return .some(nil) }
            guard let number = value.integerValue, range.contains(number) else {
                errors.append(
                    (
                        field,
                        "must be an integer from \(range.lowerBound) to \(range.upperBound), or null "
                            + "for the default"
                    ))
                return nil
            }
            return .some(number)
        }
        for (name, value) in members {
            switch name {
            case "max_active":
                change.maxActive = integer(value, name, 1...1000).map { $0.map(Int.init) }
            case "max_speed":
                change.maxSpeed = integer(value, name, 0...(Int64(1) << 50))
            case "default_connections":
                change.defaultConnections = integer(value, name, 1...32).map { $0.map(Int.init) }
            case "max_connections_per_host":
                change.maxConnectionsPerHost = integer(value, name, 1...1024).map { $0.map(Int.init) }
            case "speed_schedule":
                if value.isNull {
                    change.speedSchedule = .some(nil)
                } else if case .array(let elements) = value, elements.count <= maxWindows {
                    var windows: [SpeedWindow] = []
                    for (index, element) in elements.enumerated() {
                        let (window, problems) = SpeedWindow.parse(element)
                        if let window { windows.append(window) }
                        errors += problems.map {
                            (
                                "speed_schedule[\(index)]" + ($0.field.isEmpty ? "" : "." + $0.field),
                                $0.message
                            )
                        }
                    }
                    change.speedSchedule = .some(windows)
                } else {
                    errors.append((name, "must be a list of at most \(maxWindows) windows, or null for none"))
                }
            case "proxy":
                if value.isNull {
                    change.proxy = .some(nil)
                } else if let text = value.stringValue {
                    switch ProxyChoice.parse(text) {
                    case .success(let choice): change.proxy = .some(choice)
                    case .failure(let problem): errors.append((name, problem.message))
                    }
                } else {
                    errors.append((name, "must be a proxy URL or \"none\", or null for the default"))
                }
            case "seed_ratio":
                if value.isNull {
                    change.seedRatio = .some(nil)
                } else if case .number(let ratio) = value, ratio >= 0, ratio <= 10_000 {
                    change.seedRatio = .some(ratio)
                } else {
                    errors.append((name, "must be a number from 0 to 10000, or null for the default"))
                }
            case "seed_time":
                change.seedTime = integer(value, name, 0...315_360_000)
            case storedProxyFromToken where stored:
                change.proxyFromToken = value == .bool(true)
            default:
                errors.append((name, "unknown field"))
            }
        }
        return (change, errors)
    }

    /// What the store keeps: the fields that differ from the defaults, as JSON.
    public var json: JSONValue {
        var members: [(String, JSONValue)] = []
        if let value = maxActive ?? nil { members.append(("max_active", JSONValue(value))) }
        if let value = maxSpeed ?? nil { members.append(("max_speed", JSONValue(value))) }
        if let value = defaultConnections ?? nil { members.append(("default_connections", JSONValue(value))) }
        if let value = maxConnectionsPerHost ?? nil { members.append(("max_connections_per_host", JSONValue(value))) }
        if let value = speedSchedule ?? nil { members.append(("speed_schedule", .array(value.map(\.json)))) }
        if let value = seedRatio ?? nil { members.append(("seed_ratio", .number(value))) }
        if let value = seedTime ?? nil { members.append(("seed_time", JSONValue(value))) }
        // As stored: the password with it, as a download's is.
        if let value = proxy ?? nil {
            members.append(("proxy", .string(value.stored)))
            if proxyFromToken { members.append((SettingsChange.storedProxyFromToken, .bool(true))) }
        }
        return .object(members)
    }
}
