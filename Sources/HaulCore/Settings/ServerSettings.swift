import FoundationEssentials
import Glibc

/// What a client may change while the server runs (`PATCH /settings`). The server's flags give the defaults; a
/// change is kept in the store and wins over them at the next start, until it is set back (null) to its default.
public struct ServerSettings: Sendable, Equatable {
    /// Downloads running at once. Lowering it lets the running ones finish; queued ones wait for a free slot.
    public var maxActive: Int
    /// Bytes per second over all downloads, nil for no limit (outside the schedule's windows).
    public var maxSpeed: Int64?
    /// Connections a download gets when it asks for none.
    public var defaultConnections: Int
    /// Connections to one host over all downloads.
    public var maxConnectionsPerHost: Int
    /// Times of the week with a speed limit of their own, first match wins.
    public var speedSchedule: [SpeedWindow]
    /// The proxy of downloads whose own and whose category's name none; nil for none (direct, or with
    /// `--proxy-from-env` the environment's).
    public var proxy: ProxyChoice?
    /// Whether the operator named `proxy` (a flag, the environment, the config file, or the server's own token
    /// through the API), so that it is let past the address policy; one a scoped token named is held to it.
    public var proxyTrusted = true
    /// When a finished torrent stops seeding, where its download and its category say nothing
    /// (`--bittorrent-seed-ratio`, `--bittorrent-seed-time`).
    public var seeding = SeedLimits()

    public init(
        maxActive: Int, maxSpeed: Int64?, defaultConnections: Int, maxConnectionsPerHost: Int,
        speedSchedule: [SpeedWindow] = [], proxy: ProxyChoice? = nil
    ) {
        self.maxActive = maxActive
        self.maxSpeed = maxSpeed
        self.defaultConnections = defaultConnections
        self.maxConnectionsPerHost = maxConnectionsPerHost
        self.speedSchedule = speedSchedule
        self.proxy = proxy
    }

    /// The limit in force at `time` (local wall-clock time): the first window holding it, else `maxSpeed`.
    public func speedLimit(at time: WeekTime) -> Int64? {
        guard let window = speedSchedule.first(where: { $0.contains(time) }) else { return maxSpeed }
        return window.maxSpeed
    }
}

/// A time of the week: the day (0 Monday ... 6 Sunday) and the minute of the day.
public struct WeekTime: Sendable, Equatable {
    public var day: Int
    public var minute: Int

    public init(day: Int, minute: Int) {
        self.day = day
        self.minute = minute
    }

    /// `date` in the server's time zone (TZ; UTC in the container unless set).
    public init(_ date: Date) {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        localtime_r(&seconds, &parts)
        // tm_wday counts from Sunday.
        day = (Int(parts.tm_wday) + 6) % 7
        minute = Int(parts.tm_hour) * 60 + Int(parts.tm_min)
    }
}

/// A weekly window with its own speed limit: `from` to `to` on `days`; a window whose end is before its start
/// runs past midnight into the next day (22:00-06:00 on Friday covers Saturday's first six hours), and one whose
/// end is its start lasts 24 hours.
public struct SpeedWindow: Sendable, Equatable {
    public static let dayNames = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]

    /// Days the window starts on, 0 Monday ... 6 Sunday.
    public var days: Set<Int>
    /// Minutes since midnight; `to` may be 1440 (midnight at the end of the day).
    public var from: Int
    public var to: Int
    /// Bytes per second in the window, nil for no limit.
    public var maxSpeed: Int64?

    public init(days: Set<Int> = Set(0..<7), from: Int, to: Int, maxSpeed: Int64?) {
        self.days = days
        self.from = from
        self.to = to
        self.maxSpeed = maxSpeed
    }

    public func contains(_ time: WeekTime) -> Bool {
        if from < to { return days.contains(time.day) && time.minute >= from && time.minute < to }
        // Past midnight: the evening of a start day, or the morning after one.
        return (days.contains(time.day) && time.minute >= from)
            || (days.contains((time.day + 6) % 7) && time.minute < to)
    }

    /// "09:30" for 570.
    public static func clock(_ minutes: Int) -> String {
        let hours = minutes / 60, rest = minutes % 60
        return (hours < 10 ? "0" : "") + "\(hours):" + (rest < 10 ? "0" : "") + "\(rest)"
    }

    /// 570 for "09:30"; "24:00" is the end of the day.
    public static func minutes(_ clock: String) -> Int? {
        let parts = clock.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count == 2, parts[1].count == 2,
            let hours = Int(parts[0]), let minutes = Int(parts[1]), hours >= 0, minutes >= 0, minutes < 60,
            hours < 24 || (hours == 24 && minutes == 0)
        else { return nil }
        return hours * 60 + minutes
    }
}

/// A change of the settings: each field absent (nil) leaves it alone, `.some(nil)` sets it back to the default.
/// A speed of 0 is no limit.
public struct SettingsChange: Sendable, Equatable {
    public var maxActive: Int??
    public var maxSpeed: Int64??
    public var defaultConnections: Int??
    public var maxConnectionsPerHost: Int??
    public var speedSchedule: [SpeedWindow]??
    public var proxy: ProxyChoice??
    /// The server's seeding limits: the share ratio and the seconds.
    public var seedRatio: Double??
    public var seedTime: Int64??
    /// `proxy` was named by a scoped token (never read from a client's body: the engine sets it from the caller).
    public var proxyFromToken = false

    public init() {}

    public var isEmpty: Bool { self == SettingsChange() }

    /// `self` with `other` laid over it: what `other` says wins.
    public func merged(with other: SettingsChange) -> SettingsChange {
        var merged = self
        if let value = other.maxActive { merged.maxActive = value }
        if let value = other.maxSpeed { merged.maxSpeed = value }
        if let value = other.defaultConnections { merged.defaultConnections = value }
        if let value = other.maxConnectionsPerHost { merged.maxConnectionsPerHost = value }
        if let value = other.speedSchedule { merged.speedSchedule = value }
        if let value = other.seedRatio { merged.seedRatio = value }
        if let value = other.seedTime { merged.seedTime = value }
        if let value = other.proxy {
            merged.proxy = value
            merged.proxyFromToken = other.proxyFromToken
        }
        return merged
    }

    /// The settings that result from this change of `defaults`, only the fields set to a value counting.
    public func applied(to defaults: ServerSettings) -> ServerSettings {
        var settings = defaults
        if let value = maxActive ?? nil { settings.maxActive = value }
        if let value = maxSpeed ?? nil { settings.maxSpeed = value == 0 ? nil : value }
        if let value = defaultConnections ?? nil { settings.defaultConnections = value }
        if let value = maxConnectionsPerHost ?? nil { settings.maxConnectionsPerHost = value }
        if let value = speedSchedule ?? nil { settings.speedSchedule = value }
        if let value = seedRatio ?? nil { settings.seeding.ratio = value }
        if let value = seedTime ?? nil { settings.seeding.seconds = value }
        if let value = proxy ?? nil {
            settings.proxy = value
            settings.proxyTrusted = !proxyFromToken
        }
        return settings
    }

    /// Only what differs from the defaults: what the store keeps (a field set back to its default is dropped).
    public var kept: SettingsChange {
        var kept = SettingsChange()
        if let value = maxActive ?? nil { kept.maxActive = .some(value) }
        if let value = maxSpeed ?? nil { kept.maxSpeed = .some(value) }
        if let value = defaultConnections ?? nil { kept.defaultConnections = .some(value) }
        if let value = maxConnectionsPerHost ?? nil { kept.maxConnectionsPerHost = .some(value) }
        if let value = speedSchedule ?? nil { kept.speedSchedule = .some(value) }
        if let value = seedRatio ?? nil { kept.seedRatio = .some(value) }
        if let value = seedTime ?? nil { kept.seedTime = .some(value) }
        if let value = proxy ?? nil {
            kept.proxy = .some(value)
            kept.proxyFromToken = proxyFromToken
        }
        return kept
    }
}
