import FoundationEssentials
import HaulLoop

/// What the settings ask of the engine: the store they are kept in, and their being put in force.
protocol SettingsHost: HostServices {
    /// The settings changed (or the speed schedule's window may have): the limits and the queue follow them.
    func settingsApplied()
    /// The speed schedule's window may have changed.
    func speedWindowMayHaveChanged()
}

/// The engine's settings: the flags' (`EngineConfig`), what of them a client may change (`ServerSettings`, from
/// the flags) with a client's changes kept in the store over them, and the timer that follows the speed
/// schedule's windows while it has any.
public final class SettingsInForce {
    unowned var host: SettingsHost!
    /// The flags' settings; `maxActive`, `defaultConnections`, `maxConnectionsPerHost`, `maxSpeed` and the proxy
    /// follow a client's changes.
    private(set) var config: EngineConfig
    /// What the flags set of what a client may change (`PATCH /settings`).
    private(set) var defaults: ServerSettings
    /// A client's changes, kept in the store, over `defaults`.
    private var clientChange = SettingsChange()
    private var scheduleTimer: ClockTimer?
    /// What every download's machine is made with (fixed at start).
    let machine: MachineSettings

    init(config: EngineConfig) {
        self.config = config
        var machine = MachineSettings()
        machine.maxAttempts = config.maxAttempts
        machine.retryBaseDelay = config.retryBaseDelay
        machine.retryMaxDelay = config.retryMaxDelay
        machine.stallTimeout = Double(config.stallTimeout)
        machine.lowestSpeed = config.lowestSpeed
        machine.tickInterval = config.progressInterval
        machine.minSplitSize = config.minSplitSize
        machine.space = config.space
        machine.statusBoard = StatusBoard()
        self.machine = machine
        defaults = ServerSettings(
            maxActive: config.maxActive, maxSpeed: config.maxSpeed,
            defaultConnections: config.defaultConnections,
            maxConnectionsPerHost: config.maxConnectionsPerHost, proxy: config.proxy)
        defaults.seeding = config.bittorrent.seeding
    }

    /// The settings in force: the defaults with a client's changes.
    public var current: ServerSettings { clientChange.applied(to: defaults) }

    /// Puts the stored settings in force (at start, and when another node changed them).
    func load() {
        do {
            try load(throwing: true)
        } catch {
            host.log.warning("cannot read the stored settings", ["error": "\(error)"])
        }
    }

    func load(throwing: Bool) throws {
        guard let stored = try host.store.settings(), let value = try? JSONValue.parse(Array(stored.utf8)),
            case .object(let members) = value
        else { return }
        let (change, errors) = SettingsChange.parse(members, stored: true)
        if !errors.isEmpty { host.log.warning("stored settings partly unreadable", ["error": "\(errors)"]) }
        clientChange = change.kept
        apply()
    }

    /// Changes the settings (a field set to nil goes back to its default), stores them and puts them in force.
    func change(_ change: SettingsChange) throws(EngineError) -> ServerSettings {
        let next = clientChange.merged(with: change).kept
        try EngineError.storing { try host.store.saveSettings(next.json.serialized()) }
        clientChange = next
        apply()
        host.log.info("settings changed", ["settings": current.json.serialized()])
        return current
    }

    private func apply() {
        let settings = current
        config.maxActive = settings.maxActive
        config.defaultConnections = settings.defaultConnections
        config.maxConnectionsPerHost = settings.maxConnectionsPerHost
        config.maxSpeed = settings.maxSpeed
        config.proxy = settings.proxy
        config.proxyTrusted = settings.proxyTrusted
        // The schedule is looked at every half minute while it has windows.
        if settings.speedSchedule.isEmpty {
            stop()
        } else if scheduleTimer == nil {
            scheduleTimer = host.clock.every(30) { [unowned self] in self.host.speedWindowMayHaveChanged() }
        }
        host.settingsApplied()
    }

    /// The speed limit of this moment: the schedule's window that holds it, else the base one (nil: none).
    func speedLimitNow() -> Int64? { current.speedLimit(at: WeekTime(host.clock.wallTime)) }

    func stop() {
        scheduleTimer?.cancel()
        scheduleTimer = nil
    }
}
