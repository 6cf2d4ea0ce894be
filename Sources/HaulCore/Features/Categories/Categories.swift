import HaulLoop

/// What the categories ask of the engine: the store they are kept in, and the speed limits put in force again
/// when one changes.
protocol CategoriesHost: HostServices {
    /// A category's speed limit changed (or a category came or went).
    func categoryLimitsChanged()
}

/// The categories: their folders and defaults apply when a download is added; their speed limits while it runs
/// (each one's shared out among the nodes like the global one).
public final class Categories {
    unowned let host: CategoriesHost
    private(set) var byName: [String: Category] = [:]

    init(host: CategoriesHost) { self.host = host }

    public var all: [Category] { byName.values.sorted { $0.name < $1.name } }

    public subscript(name: String) -> Category? { byName[name] }

    /// Each limited category's speed limit, by name.
    var limits: [String: Int64] { byName.compactMapValues(\.maxSpeed) }

    func load() throws {
        byName = Dictionary(try host.store.categories().map { ($0.name, $0) }, uniquingKeysWith: { $1 })
        host.categoryLimitsChanged()
    }

    /// Another node changed a category (its notification): read them again.
    func reload() {
        do {
            try load()
        } catch {
            host.log.warning("cannot read the categories", ["error": "\(error)"])
        }
    }

    /// Makes or changes a category; true when it is new. Downloads added before keep their folder; a new speed
    /// limit holds for the running ones at once.
    public func put(_ category: Category) throws(EngineError) -> Bool {
        let created = byName[category.name] == nil
        try EngineError.storing { try host.store.saveCategory(category) }
        byName[category.name] = category
        host.categoryLimitsChanged()
        host.log.info(created ? "category added" : "category changed", ["category": category.name])
        return created
    }

    /// Forgets a category; its downloads keep its name (a filter still finds them) and their folders.
    public func remove(_ name: String) throws(EngineError) {
        let found = try EngineError.storing { try host.store.deleteCategory(name: name) }
        byName.removeValue(forKey: name)
        host.categoryLimitsChanged()
        guard found else { throw .notFound(name) }
        host.log.info("category removed", ["category": name])
    }
}
