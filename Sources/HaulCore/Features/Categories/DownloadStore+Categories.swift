import HaulLoop

extension DownloadStore {
    public func saveCategory(_ c: Category) throws {
        try db.run(
            """
            INSERT INTO categories (name, directory, connections, max_speed, priority, proxy, completed_directory,
                proxy_untrusted, seed_ratio, seed_time)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (name) DO UPDATE SET directory = excluded.directory, connections = excluded.connections,
                max_speed = excluded.max_speed, priority = excluded.priority, proxy = excluded.proxy,
                completed_directory = excluded.completed_directory, proxy_untrusted = excluded.proxy_untrusted,
                seed_ratio = excluded.seed_ratio, seed_time = excluded.seed_time
            """,
            [
                .text(c.name), .text(c.directory), integer(c.connections.map(Int64.init)), integer(c.maxSpeed),
                integer(c.priority.map(Int64.init)), text(c.proxy?.stored), text(c.completedDirectory),
                .integer(c.proxyTrusted ? 0 : 1), c.seedRatio.map { .real($0) } ?? .null, integer(c.seedTime),
            ])
    }

    public func categories() throws -> [Category] {
        try db.query(
            "SELECT name, directory, connections, max_speed, priority, proxy, completed_directory, "
                + "proxy_untrusted, seed_ratio, seed_time FROM categories ORDER BY name"
        )
        .compactMap { row in
            guard let name = row["name"].string, let directory = row["directory"].string else { return nil }
            var category = Category(
                name: name, directory: directory,
                connections: row["connections"].int.map(Int.init),
                maxSpeed: row["max_speed"].int, priority: row["priority"].int.map(Int.init),
                proxy: ProxyChoice.stored(row["proxy"].string),
                completedDirectory: row["completed_directory"].string)
            category.proxyTrusted = row["proxy_untrusted"].int != 1
            category.seedRatio = row["seed_ratio"].double
            category.seedTime = row["seed_time"].int
            return category
        }
    }

    public func deleteCategory(name: String) throws -> Bool {
        !(try db.query("DELETE FROM categories WHERE name = ? RETURNING name", [.text(name)])).isEmpty
    }
}
