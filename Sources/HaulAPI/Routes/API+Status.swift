import FoundationEssentials
import HaulCore
import HaulLoop

/// Settings, stats and Prometheus metrics.
extension API {
    /// The settings in force, the speed limit of this moment (the schedule's), the time zone the schedule is read
    /// in, and the defaults the flags gave.
    func settings() -> HTTPResponse {
        guard case .object(var members) = serverOperations.settings.json else { return API.json(200, .null) }
        members.append(("current_max_speed", JSONValue(serverOperations.currentSpeedLimit ?? 0)))
        members.append(("time_zone", .string(API.timeZone)))
        members.append(("utc_offset", .string(ServerTimeZone.offset(at: Date()))))
        members.append(("defaults", serverOperations.defaultSettings.json))
        return API.json(200, .object(members))
    }

    /// Read once: the zone a process runs in does not change under it.
    static let timeZone = ServerTimeZone.name()

    func patchSettings(_ c: RequestContext) throws(Problem) -> HTTPResponse {
        let body = try RequestBody(c.request)
        let (change, errors) = SettingsChange.parse(body.allMembers)
        if !errors.isEmpty {
            var invalid = RequestBody(members: [])
            for error in errors { invalid.reject(error.field, error.message) }
            try invalid.finish()
        }
        _ = try attempt(c.operations.changeSettings(change))
        return settings()
    }

    func stats(_ c: RequestContext) -> HTTPResponse {
        let totals = c.operations.totals()
        return API.json(
            200,
            .object([
                ("downloads", JSONValue(totals.downloads)),
                ("active", JSONValue(totals.active)),
                ("queued", JSONValue(totals.count(.queued))),
                ("paused", JSONValue(totals.count(.paused))),
                ("completed", JSONValue(totals.count(.completed))),
                ("failed", JSONValue(totals.count(.failed))),
                ("speed", .number(totals.speed.rounded())),
                ("received_bytes", JSONValue(totals.receivedBytes)),
                ("active_connections", JSONValue(totals.activeConnections)),
                ("event_streams", JSONValue(events.streamCount)),
                ("slow_event_streams", JSONValue(events.slowStreamCount)),
                ("event_queued_bytes", JSONValue(events.queuedBytes)),
                ("sequence", JSONValue(events.sequence)),
                (
                    "disk",
                    serverOperations.diskSpace().map { space in
                        .object([
                            ("free_bytes", JSONValue(space.free)), ("total_bytes", JSONValue(space.total)),
                            ("reserved_bytes", JSONValue(space.reserved)), ("usable_bytes", JSONValue(space.usable)),
                        ])
                    } ?? .null
                ),
            ]))
    }

    /// `GET /metrics`: the Prometheus text exposition of downloads, transfers, API requests and event streams.
    /// Aggregates only; for a scoped token below admin, no webhook or node figures, and for one with a root the
    /// download figures are its own downloads'.
    func prometheusMetrics(_ c: RequestContext) -> HTTPResponse {
        let totals = c.operations.totals()
        let admin = c.caller.scope == .admin
        let confined = c.caller.confinedTo != nil
        var out = PrometheusText()
        if admin, let node = serverOperations.node {
            out.family("haul_node_info", type: "gauge", help: "This node's name among the nodes sharing the store.")
            out.sample("haul_node_info", ["node": node], 1)
            out.single(
                "haul_node_running_downloads", type: "gauge",
                help: "Downloads this node runs (the others' "
                    + "are in haul_downloads too).", Double(serverOperations.runningIDs.count))
            out.single(
                "haul_nodes_alive", type: "gauge",
                help: "Nodes sharing the store heard of within a lease, "
                    + "this one included: the limits are shared out among them.", Double(serverOperations.nodeShare))
        }
        out.family("haul_downloads", type: "gauge", help: "Downloads stored, by state.")
        for state in DownloadState.allCases {
            out.sample("haul_downloads", ["state": state.rawValue], Double(totals.count(state)))
        }
        if !confined {
            out.single(
                "haul_downloaded_bytes_total", type: "counter",
                help: "Body bytes written to part files since the server started.",
                Double(serverOperations.bytesReceived))
        }
        out.single(
            "haul_download_speed_bytes_per_second", type: "gauge",
            help: "Current transfer speed over all running downloads.", totals.speed.rounded())
        out.single(
            "haul_download_connections", type: "gauge",
            help: "Connections to origins open for running downloads.", Double(totals.activeConnections))
        out.single(
            "haul_torrent_peers", type: "gauge",
            help: "BitTorrent peers connected to the running and seeding torrents.",
            Double(totals.torrentPeers))
        out.single(
            "haul_upload_speed_bytes_per_second", type: "gauge",
            help: "Current upload speed to BitTorrent peers over the running and seeding torrents.",
            totals.uploadSpeed.rounded())
        out.single(
            "haul_torrent_uploaded_bytes", type: "gauge",
            help: "Payload bytes the running and seeding torrents uploaded over their lives.",
            Double(totals.uploadedBytes))
        out.single(
            "haul_event_streams", type: "gauge", help: "Server-sent event clients connected.",
            Double(events.streamCount))
        out.single(
            "haul_event_streams_slow", type: "gauge",
            help: "Event clients with events queued because they read slower than events come.",
            Double(events.slowStreamCount))
        out.single(
            "haul_event_queued_bytes", type: "gauge", help: "Event bytes waiting for slow clients.",
            Double(events.queuedBytes))
        if admin, let counts = serverOperations.webhookDeliveryCounts() {
            out.family(
                "haul_webhook_deliveries", type: "gauge",
                help: "Webhook deliveries in the outbox, by state "
                    + "(pending: not yet answered 2xx; delivered: the newest hundred per webhook kept; failed: given "
                    + "up on within a week).")
            for state in [WebhookDelivery.State.pending, .delivered, .failed] {
                out.sample("haul_webhook_deliveries", ["state": state.rawValue], Double(counts[state] ?? 0))
            }
        }
        if let space = serverOperations.diskSpace() {
            out.single(
                "haul_disk_free_bytes", type: "gauge",
                help: "Free bytes of the download root's file system "
                    + "(for unprivileged users).", Double(space.free))
            out.single(
                "haul_disk_total_bytes", type: "gauge", help: "Size of the download root's file system.",
                Double(space.total))
            out.single(
                "haul_disk_usable_bytes", type: "gauge",
                help: "Free bytes downloads may still take: the free "
                    + "space less --min-free-space.", Double(space.usable))
        }
        metrics.render(into: &out)
        if let resident = ProcessStats.residentBytes {
            out.single(
                "process_resident_memory_bytes", type: "gauge", help: "Resident memory size in bytes.",
                resident)
        }
        out.single(
            "process_cpu_seconds_total", type: "counter", help: "User and system CPU time spent in seconds.",
            ProcessStats.cpuSeconds)
        if let descriptors = ProcessStats.openDescriptors {
            out.single("process_open_fds", type: "gauge", help: "Number of open file descriptors.", descriptors)
        }
        out.single(
            "process_start_time_seconds", type: "gauge",
            help: "Start time of the process since unix epoch in seconds.", startedAt.rounded())
        return HTTPResponse(
            status: 200, headers: [("Content-Type", PrometheusText.contentType)],
            body: Array(out.text.utf8))
    }

    /// `GET /version`: Haul's, and the aria2 version its aria2 front answers as.
    func version() -> HTTPResponse {
        API.json(
            200,
            .object([
                ("version", .string(HaulVersion.current)), ("aria2_version", .string(Aria2RPC.aria2Version)),
            ]))
    }

    /// Liveness, with a shared store the node that answered (the others are behind the same name).
    func health() -> HTTPResponse {
        var members: [(String, JSONValue)] = [("status", .string("ok"))]
        if let node = serverOperations.node { members.append(("node", .string(node))) }
        return API.json(200, .object(members))
    }

    /// Readiness, beside liveness: 503 while the store cannot be reached, so a load balancer sends clients to a node
    /// that can store what they ask (the process itself is fine: `/healthz` stays 200).
    func readiness() -> HTTPResponse {
        var members: [(String, JSONValue)] = []
        if let node = serverOperations.node { members.append(("node", .string(node))) }
        guard let problem = serverOperations.storeProblem() else {
            return API.json(200, .object([("status", .string("ready"))] + members))
        }
        let reason = "the store cannot be reached: \(problem)"
        return API.json(
            503, .object([("status", .string("unavailable")), ("reason", .string(reason))] + members),
            headers: [("Retry-After", "5")])
    }
}
