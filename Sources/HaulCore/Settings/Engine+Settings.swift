import FoundationEssentials
import HaulLoop

/// The server settings in force, the speed schedule, and shutting down.
extension Engine {
    /// Puts the stored settings in force (at start, and when another node changed them).
    func loadSettings() {
        do {
            try loadSettings(throwing: true)
        } catch {
            log.warning("cannot read the stored settings", ["error": "\(error)"])
        }
    }

    func loadSettings(throwing: Bool) throws {
        guard let stored = try store.settings(), let value = try? JSONValue.parse(Array(stored.utf8)),
              case .object(let members) = value else { return }
        let (change, errors) = SettingsChange.parse(members, stored: true)
        if !errors.isEmpty { log.warning("stored settings partly unreadable", ["error": "\(errors)"]) }
        settingsChange = change.kept
        applySettings()
    }

    /// The settings in force: the defaults with a client's changes.
    public var currentSettings: ServerSettings { settingsChange.applied(to: defaultSettings) }

    /// The speed limit over all downloads now, the schedule's window's or the base one (nil: none).
    public var currentSpeedLimit: Int64? { globalBucket.map { Int64($0.rate) } }

    /// Changes the settings (a field set to nil goes back to its default), stores them and puts them in force.
    public func changeSettings(_ change: SettingsChange) throws(EngineError) -> ServerSettings {
        let next = settingsChange.merged(with: change).kept
        do {
            try store.saveSettings(next.json.serialized())
        } catch {
            throw .storage("\(error)")
        }
        settingsChange = next
        applySettings()
        log.info("settings changed", ["settings": currentSettings.json.serialized()])
        return currentSettings
    }

    private func applySettings() {
        let settings = currentSettings
        config.maxActive = settings.maxActive
        config.defaultConnections = settings.defaultConnections
        config.maxConnectionsPerHost = settings.maxConnectionsPerHost
        config.maxSpeed = settings.maxSpeed
        config.proxy = settings.proxy
        config.proxyTrusted = settings.proxyTrusted
        updateSpeedLimit()
        // The schedule is looked at every half minute while it has windows.
        if settings.speedSchedule.isEmpty {
            scheduleTimer?.cancel()
            scheduleTimer = nil
        } else if scheduleTimer == nil {
            scheduleTimer = clock.every(30) { [unowned self] in self.updateSpeedLimit() }
        }
        schedule()
    }

    /// Puts the limit of this moment in force: the window of the schedule that holds it, else the base one.
    func updateSpeedLimit() {
        // Several nodes: each takes an even share of the cluster's limit.
        let limit = currentSettings.speedLimit(at: WeekTime(clock.wallTime)).map { max(1, $0 / Int64(nodeShare)) }
        updateCategoryLimits()
        guard limit != currentSpeedLimit else { return }
        if let limit, globalBucket != nil {
            globalBucket?.rate = Double(limit)
        } else {
            globalBucket = limit.map { TokenBucket(rate: Double($0)) }
        }
        log.info("speed limit now", ["speed.limit": limit.map(String.init) ?? "none"])
    }

    /// Stops every transfer and checkpoints it (fdatasync, then the journal); they resume on the next start.
    public func shutdown() {
        // No new claims while the running downloads stop.
        cluster?.stopping = true
        scheduleTimer?.cancel()
        tick?.cancel()
        for runner in Array(runners.values) { runner.deliver(.stop(keepFile: true)) }
        runners.removeAll()
        // Closing the multi ends every transfer; what was deferred has nothing left to do.
        deferTimer?.cancel()
        deferTimer = nil
        deferred.removeAll()
        refill?.cancel()
        refill = nil
        persister.stop()
        webhooks.stop()
        cluster?.leave()
        multi?.close()
    }
}
