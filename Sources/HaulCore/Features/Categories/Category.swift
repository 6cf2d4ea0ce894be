import FoundationEssentials
import HaulLoop

/// A client's namespace for downloads (`PUT /categories/NAME`): its own folder under the download root, the
/// connections and priority its downloads start with, and one speed limit over all of them (a bandwidth group).
public struct Category: Sendable, Equatable {
    public var name: String
    /// Relative to the download root; a download's own `directory` is then relative to this one.
    public var directory: String
    public var connections: Int?
    /// Bytes per second over every running download of the category, nil for none.
    public var maxSpeed: Int64?
    public var priority: Int?
    /// The proxy of its downloads that name none (`"none"`: direct); nil leaves it to the settings.
    public var proxy: ProxyChoice?
    /// Whether the operator named `proxy` (the server's own token); one a scoped token named is held to the
    /// address policy, as a download's own is.
    public var proxyTrusted = true
    /// Where its downloads' files go once verified, relative to the completed root (`--completed-root`, else the
    /// download root); nil leaves them where they were written.
    public var completedDirectory: String?

    public init(name: String, directory: String, connections: Int? = nil, maxSpeed: Int64? = nil,
                priority: Int? = nil, proxy: ProxyChoice? = nil, completedDirectory: String? = nil) {
        self.completedDirectory = completedDirectory
        self.name = name
        self.directory = directory
        self.connections = connections
        self.maxSpeed = maxSpeed
        self.priority = priority
        self.proxy = proxy
    }
}

/// The categories as the engine keeps them, with the speed limit of each.
final class CategoryBook {
    var byName: [String: Category] = [:]
    var buckets: [String: TokenBucket] = [:]
}

extension DownloadStore {
    public func saveCategory(_ c: Category) throws {
        try db.run("""
            INSERT INTO categories (name, directory, connections, max_speed, priority, proxy, completed_directory,
                proxy_untrusted)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (name) DO UPDATE SET directory = excluded.directory, connections = excluded.connections,
                max_speed = excluded.max_speed, priority = excluded.priority, proxy = excluded.proxy,
                completed_directory = excluded.completed_directory, proxy_untrusted = excluded.proxy_untrusted
            """, [.text(c.name), .text(c.directory), integer(c.connections.map(Int64.init)), integer(c.maxSpeed),
                  integer(c.priority.map(Int64.init)), text(c.proxy?.stored), text(c.completedDirectory),
                  .integer(c.proxyTrusted ? 0 : 1)])
    }

    public func categories() throws -> [Category] {
        try db.query("SELECT name, directory, connections, max_speed, priority, proxy, completed_directory, "
                     + "proxy_untrusted FROM categories ORDER BY name")
            .compactMap { row in
                guard let name = row["name"].string, let directory = row["directory"].string else { return nil }
                var category = Category(name: name, directory: directory,
                                        connections: row["connections"].int.map(Int.init),
                                        maxSpeed: row["max_speed"].int, priority: row["priority"].int.map(Int.init),
                                        proxy: ProxyChoice.stored(row["proxy"].string),
                                        completedDirectory: row["completed_directory"].string)
                category.proxyTrusted = row["proxy_untrusted"].int != 1
                return category
            }
    }

    public func deleteCategory(name: String) throws -> Bool {
        !(try db.query("DELETE FROM categories WHERE name = ? RETURNING name", [.text(name)])).isEmpty
    }
}

/// Categories: their folders and defaults apply when a download is added; their speed limits while it runs.
extension Engine {
    public var allCategories: [Category] { book.byName.values.sorted { $0.name < $1.name } }

    public func category(_ name: String) -> Category? { book.byName[name] }

    func loadCategories() throws {
        book.byName = Dictionary(try store.categories().map { ($0.name, $0) }, uniquingKeysWith: { $1 })
        updateCategoryLimits()
    }

    /// Another node changed a category (its notification): read them again.
    func reloadCategories() {
        do {
            try loadCategories()
        } catch {
            log.warning("cannot read the categories", ["error": "\(error)"])
        }
    }

    /// Makes or changes a category; true when it is new. Downloads added before keep their folder; a new speed
    /// limit holds for the running ones at once.
    public func putCategory(_ category: Category) throws(EngineError) -> Bool {
        let created = book.byName[category.name] == nil
        do {
            try store.saveCategory(category)
        } catch {
            throw .storage("\(error)")
        }
        book.byName[category.name] = category
        updateCategoryLimits()
        log.info(created ? "category added" : "category changed", ["category": category.name])
        return created
    }

    /// Forgets a category; its downloads keep its name (a filter still finds them) and their folders.
    public func removeCategory(_ name: String) throws(EngineError) {
        let found: Bool
        do {
            found = try store.deleteCategory(name: name)
        } catch {
            throw .storage("\(error)")
        }
        book.byName.removeValue(forKey: name)
        updateCategoryLimits()
        guard found else { throw .notFound(name) }
        log.info("category removed", ["category": name])
    }

    /// Each category's limit in force, shared out among the nodes like the global one.
    func updateCategoryLimits() {
        for (name, category) in book.byName {
            guard let limit = category.maxSpeed else {
                book.buckets.removeValue(forKey: name)
                continue
            }
            let rate = Double(max(1, limit / Int64(nodeShare)))
            if book.buckets[name] != nil { book.buckets[name]?.rate = rate } else { book.buckets[name] = TokenBucket(rate: rate) }
        }
        for name in book.buckets.keys where book.byName[name] == nil { book.buckets.removeValue(forKey: name) }
    }

    /// Whether the category `name` has a speed limit.
    func categoryLimited(_ name: String?) -> Bool {
        guard let name else { return false }
        return book.buckets[name] != nil
    }

    /// Seconds until `count` bytes fit the category's limit (0 without one).
    func categoryDelay(_ name: String?, for count: Int, now: Double) -> Double {
        guard let name else { return 0 }
        return book.buckets[name]?.delay(for: count, now: now) ?? 0
    }

    func categoryConsume(_ name: String?, _ count: Int) {
        guard let name else { return }
        book.buckets[name]?.consume(count)
    }
}
