/// The operations on what surrounds the downloads: categories, webhooks, settings and totals.
extension Operations {
    /// The most categories a server keeps.
    public static let maxCategories = 1000
    /// The most webhooks a server keeps: each change is written once per webhook.
    public static let maxWebhooks = 100

    // MARK: categories

    public var categories: [Category] { engine.categories.all }

    public func category(_ name: String) throws(EngineError) -> Category {
        guard let category = engine.categories[name] else { throw .missing("no category '\(name)'") }
        return category
    }

    /// Makes or replaces a category; true when it is new.
    public func putCategory(_ category: Category) throws(EngineError) -> Bool {
        if engine.categories[category.name] == nil, engine.categories.all.count >= Operations.maxCategories {
            throw .full(kind: "categories", limit: Operations.maxCategories)
        }
        var category = category
        // A proxy is the operator's only when the server's own token named it.
        category.proxyTrusted = caller.token == nil
        return try engine.categories.put(category)
    }

    public func removeCategory(_ name: String) throws(EngineError) {
        try engine.categories.remove(try category(name).name)
    }

    // MARK: webhooks

    public var webhooks: [Webhook] { engine.webhooks.list }

    public func webhook(_ id: String) throws(EngineError) -> Webhook {
        guard let hook = engine.webhooks.webhook(id) else { throw .missing("no webhook with id '\(id)'") }
        return hook
    }

    /// A new webhook. As for downloads (and qBittorrent), a category is made first, so a typo never makes a
    /// webhook that no download will ever wake.
    public func addWebhook(url: String, events: [WebhookEvent], category: String?) throws(EngineError) -> Webhook {
        if let category, engine.categories[category] == nil {
            throw .conflict("no category '\(category)'; make it first with PUT /categories/\(category)")
        }
        guard engine.webhooks.list.count < Operations.maxWebhooks else {
            throw .full(kind: "webhooks", limit: Operations.maxWebhooks)
        }
        return try engine.webhooks.add(url: url, events: events, category: category)
    }

    public func removeWebhook(_ id: String) throws(EngineError) {
        try engine.webhooks.remove(try webhook(id).id)
    }

    /// At most `limit` deliveries of a webhook, as the store lists them.
    public func deliveries(of id: String, limit: Int) throws(EngineError) -> [WebhookDelivery] {
        try engine.webhooks.deliveries(of: .webhook(try webhook(id).id), limit: limit)
    }

    /// At most `limit` deliveries about a download, to every webhook, newest first.
    public func deliveries(about id: String, limit: Int) throws(EngineError) -> [WebhookDelivery] {
        guard engine.snapshot(id) != nil else { throw .notFound(id) }
        return try engine.webhooks.deliveries(of: .download(id), limit: limit)
    }

    // MARK: settings

    public var settings: ServerSettings { engine.currentSettings }

    public func changeSettings(_ change: SettingsChange) throws(EngineError) -> ServerSettings {
        var change = change
        change.proxyFromToken = caller.token != nil
        return try engine.changeSettings(change)
    }
}
