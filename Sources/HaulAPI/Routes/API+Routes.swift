import FoundationEssentials
import HaulAssets
import HaulCore
import HaulLoop

/// The routes of downloads and of the server itself; webhooks', categories', tokens' and aria2's are beside their
/// handlers.
extension API {
    /// Downloads: the list, one download, its file and its events.
    var downloadRoutes: [Route] {
        [
            Route(
                pattern: "/downloads",
                handlers: [
                    "GET": .read(
                        .listDownloads,
                        query: [
                            "state", "limit", "cursor", "changed_since", "q", "sort",
                            "category", "id_prefix",
                        ]
                    ) {
                        [unowned self] c throws(Problem) in .response(try self.listDownloads(c))
                    },
                    "POST": .write(.addDownloads) { [unowned self] c throws(Problem) in
                        .response(try self.addDownload(c))
                    },
                    "DELETE": .write(.removeDownloads, query: ["category", "state", "delete_file"]) {
                        [unowned self] c throws(Problem) in
                        try self.deleteDownloads(c)
                    },
                ]),
            Route(
                pattern: "/downloads/actions",
                handlers: [
                    "POST": .write(.actOnDownloads) { [unowned self] c throws(Problem) in try self.act(c) }
                ]),
            Route(
                pattern: "/downloads/{id}",
                handlers: [
                    "GET": .read(.getDownload) { [unowned self] c throws(Problem) in
                        .response(try self.getDownload(c))
                    },
                    "PATCH": .write(.changeDownload) { [unowned self] c throws(Problem) in
                        .response(try self.patchDownload(c))
                    },
                    "DELETE": .write(.removeDownload, query: ["delete_file"]) { [unowned self] c throws(Problem) in
                        .response(try self.deleteDownload(c))
                    },
                ]),
            Route(
                pattern: "/downloads/{id}/file", access: .streamToken,
                handlers: [
                    "GET": .read(.readFile, query: ["download", "start"]) { [unowned self] c throws(Problem) in
                        try self.file(c)
                    }
                ]),
            Route(
                pattern: "/downloads/{id}/events", access: .streamToken,
                handlers: [
                    "GET": .read(.followEvents, query: ["last_event_id"]) { [unowned self] c throws(Problem) in
                        try self.eventStream(c, downloadID: c.parameters["id"])
                    }
                ]),
            Route(
                pattern: "/events", access: .streamToken,
                handlers: [
                    "GET": .read(.followEvents, query: ["last_event_id", "category"]) {
                        [unowned self] c throws(Problem) in
                        try self.eventStream(c, downloadID: nil)
                    }
                ]),
            Route(
                pattern: "/tickets",
                handlers: [
                    "POST": .write(.issueTicket) { [unowned self] c throws(Problem) in
                        .response(try self.issueTicket(c))
                    }
                ]),
        ]
    }

    /// The server: totals, version, settings, the dashboard, metrics, health and this contract.
    var serverRoutes: [Route] {
        [
            Route(
                pattern: "/stats",
                handlers: [
                    "GET": .read(.stats) { [unowned self] c in .response(self.stats(c)) }
                ]),
            Route(
                pattern: "/version",
                handlers: [
                    "GET": .read(.version) { [unowned self] _ in .response(self.version()) }
                ]),
            Route(
                pattern: "/shutdown",
                handlers: [
                    "POST": .write(.shutdown) { [unowned self] _ throws(Problem) in .response(try self.shutdown()) }
                ]),
            Route(
                pattern: "/settings",
                handlers: [
                    "GET": .read(.getSettings) { [unowned self] c throws(Problem) in
                        .response(try self.conditional(c.request, self.settings()))
                    },
                    "PATCH": .write(.changeSettings) { [unowned self] c throws(Problem) in
                        .response(try self.patchSettings(c))
                    },
                ]),
            Route(
                pattern: "/", access: .open,
                handlers: [
                    "GET": .read(.dashboard, query: nil) { c in
                        .response(Dashboard.asset(Assets.dashboardPage, type: "text/html", for: c.request))
                    }
                ]),
            Route(
                pattern: "/ui/app.js", access: .open,
                handlers: [
                    "GET": .read(.dashboard, query: nil) { c in
                        .response(Dashboard.asset(Assets.dashboardScript, type: "text/javascript", for: c.request))
                    }
                ]),
            Route(
                pattern: "/ui/app.css", access: .open,
                handlers: [
                    "GET": .read(.dashboard, query: nil) { c in
                        .response(Dashboard.asset(Assets.dashboardStyle, type: "text/css", for: c.request))
                    }
                ]),
            Route(
                pattern: "/metrics",
                handlers: [
                    "GET": .read(.metrics) { [unowned self] c in .response(self.prometheusMetrics(c)) }
                ]),
            Route(
                pattern: "/healthz", access: .open,
                handlers: [
                    "GET": .read(.health, query: nil) { [unowned self] _ in .response(self.health()) }
                ]),
            Route(
                pattern: "/readyz", access: .open,
                handlers: [
                    "GET": .read(.health, query: nil) { [unowned self] _ in .response(self.readiness()) }
                ]),
            Route(
                pattern: "/openapi.yaml",
                handlers: [
                    "GET": .read(.describeAPI) { _ in
                        .response(
                            HTTPResponse(
                                status: 200, headers: [("Content-Type", "application/yaml")],
                                body: Assets.openAPI))
                    }
                ]),
        ]
    }
}
