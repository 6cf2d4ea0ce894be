import FoundationEssentials
import HaulCore
import HaulLoop

/// `/webhooks`: receivers of signed POSTs about downloads, and what was sent to each.
extension API {
    var webhookRoutes: [Route] {
        [
            Route(
                pattern: "/webhooks",
                handlers: [
                    "GET": .read(.listWebhooks) { c in
                        .response(
                            API.json(
                                200,
                                .object([
                                    (
                                        "webhooks",
                                        .array(
                                            c.operations.webhooks.map {
                                                API.webhookJSON($0, withSecret: false)
                                            })
                                    )
                                ])))
                    },
                    "POST": .write(.addWebhook) { [unowned self] c throws(Problem) in .response(try self.addWebhook(c))
                    },
                ]),
            Route(
                pattern: "/webhooks/{id}",
                handlers: [
                    "GET": .read(.getWebhook) { [unowned self] c throws(Problem) in
                        .response(API.json(200, API.webhookJSON(try self.webhook(c), withSecret: false)))
                    },
                    "DELETE": .write(.removeWebhook) { [unowned self] c throws(Problem) in
                        try self.attempt(c.operations.removeWebhook(c.parameters["id"]!))
                        return .response(HTTPResponse(status: 204))
                    },
                ]),
            Route(
                pattern: "/webhooks/{id}/deliveries",
                handlers: [
                    "GET": .read(.listDeliveries, query: ["limit"]) { [unowned self] c throws(Problem) in
                        let limit = try API.deliveryLimit(c)
                        let hook = try self.webhook(c)
                        return .response(
                            API.deliveriesJSON(
                                try self.attempt(
                                    c.operations.deliveries(of: hook.id, limit: limit))))
                    }
                ]),
            Route(
                pattern: "/downloads/{id}/deliveries",
                handlers: [
                    "GET": .read(.listDeliveries, query: ["limit"]) { [unowned self] c throws(Problem) in
                        let limit = try API.deliveryLimit(c)
                        return .response(
                            API.deliveriesJSON(
                                try self.attempt(
                                    c.operations.deliveries(about: c.parameters["id"]!, limit: limit))))
                    }
                ]),
        ]
    }

    private func webhook(_ c: RequestContext) throws(Problem) -> Webhook {
        try attempt(c.operations.webhook(c.parameters["id"]!))
    }

    private func addWebhook(_ c: RequestContext) throws(Problem) -> HTTPResponse {
        var body = try RequestBody(c.request)
        body.rejectUnknown(except: ["url", "events", "category"])
        let url = body.string("url", required: true)
        if let url, let problem = Validate.url(url, schemes: HTTPDialect().schemes) {
            body.reject("url", problem)
        }
        var events = WebhookEvent.allCases.filter { $0 != .state }
        if let names = body.array("events", count: 1...WebhookEvent.allCases.count) {
            let parsed = names.map { $0.stringValue.flatMap(WebhookEvent.init(rawValue:)) }
            if parsed.contains(nil) {
                body.reject(
                    "events",
                    "must list events among "
                        + WebhookEvent.allCases.map(\.rawValue)
                        .joined(separator: ", "))
            } else if Set(parsed).count != parsed.count {
                body.reject("events", "must name each event once")
            } else {
                events = parsed.compactMap { $0 }
            }
        }
        let category = body.string("category")
        if let category, let problem = Validate.categoryName(category) { body.reject("category", problem) }
        try body.finish()
        let hook = try attempt(c.operations.addWebhook(url: url!, events: events, category: category))
        return API.json(201, API.webhookJSON(hook, withSecret: true), headers: [("Location", "/webhooks/\(hook.id)")])
    }

    /// A webhook as the API shows it; its secret only in the answer to the POST that made it.
    static func webhookJSON(_ hook: Webhook, withSecret: Bool) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("id", .string(hook.id)),
            ("url", .string(Redact.url(hook.url))),
            ("events", .array(hook.events.map { .string($0.rawValue) })),
            ("category", JSONValue(hook.category)),
            ("created_at", .string(Timestamp.rfc3339(hook.createdAt))),
        ]
        if withSecret { members.append(("secret", .string(hook.secret))) }
        return .object(members)
    }

    /// `?limit=`: 1 to 1,000, 50 when absent.
    private static func deliveryLimit(_ c: RequestContext) throws(Problem) -> Int {
        guard let text = c.query["limit"] else { return 50 }
        guard let value = Int(text), (1...1000).contains(value) else {
            throw Problem.invalid([("limit", "must be an integer from 1 to 1000")])
        }
        return value
    }

    private static func deliveriesJSON(_ list: [WebhookDelivery]) -> HTTPResponse {
        API.json(
            200,
            .object([
                (
                    "deliveries",
                    .array(
                        list.map { d in
                            .object([
                                ("id", .string(d.id)),
                                ("webhook_id", .string(d.webhookID)),
                                ("event", .string(d.event.rawValue)),
                                ("download_id", .string(d.downloadID)),
                                ("state", .string(d.state.rawValue)),
                                ("attempts", JSONValue(d.attempts)),
                                ("created_at", .string(Timestamp.rfc3339(d.createdAt))),
                                ("last_attempt_at", JSONValue(d.lastAttemptAt.map(Timestamp.rfc3339))),
                                ("last_status", JSONValue(d.lastStatus.map(Int64.init))),
                                ("last_error", JSONValue(d.lastError)),
                                (
                                    "next_attempt_at",
                                    d.state == .pending ? .string(Timestamp.rfc3339(d.nextAttemptAt)) : .null
                                ),
                            ])
                        })
                )
            ]))
    }
}
