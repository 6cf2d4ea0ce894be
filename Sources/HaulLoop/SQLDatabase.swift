/// A value stored in or read from a column.
public enum SQLValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)

    public var int: Int64? { if case .integer(let v) = self { return v } else { return nil } }
    public var string: String? { if case .text(let v) = self { return v } else { return nil } }
    public var double: Double? {
        switch self {
        case .real(let v): return v
        case .integer(let v): return Double(v)
        default: return nil
        }
    }
}

/// Which SQL a database speaks where the two differ: column types, and where the schema version is kept.
public enum SQLDialect: Sendable {
    case sqlite
    case postgres

    /// DDL written once, for SQLite, in the form this database takes: SQLite's INTEGER is 64 bits and REAL a
    /// double, PostgreSQL's INTEGER is 32 bits (a file of 4 GiB would not fit), so there they are BIGINT and
    /// DOUBLE PRECISION. Only whole upper-case words change; names and quoted text are lower case.
    public func ddl(_ sql: String) -> String {
        guard self == .postgres else { return sql }
        return sql.replacing(/\bINTEGER\b/, with: "BIGINT").replacing(/\bREAL\b/, with: "DOUBLE PRECISION")
    }
}

/// A database call that failed, with the database's own message.
public struct DatabaseError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public var description: String { message }

    public init(_ message: String) { self.message = message }
}

/// One connection to a database, confined to the thread that uses it (the loop thread). Statements take `?`
/// placeholders whatever the database; values are bound, never spliced into the text.
public protocol SQLDatabase: AnyObject {
    var dialect: SQLDialect { get }
    /// Runs one or more statements that take no parameters and return no rows.
    func execute(_ sql: String) throws
    /// Hands each row of `sql` to `body` as it arrives: a large table is never all in memory at once.
    func forEachRow(_ sql: String, _ parameters: [SQLValue], _ body: ([SQLValue]) throws -> Void) throws
    /// Runs `body` in a transaction: committed if it returns, rolled back if it throws.
    func transaction<T>(_ body: () throws -> T) throws -> T
    var inTransaction: Bool { get }
}

extension SQLDatabase {
    /// Runs a statement with parameters; returns no rows.
    public func run(_ sql: String, _ parameters: [SQLValue] = []) throws {
        try forEachRow(sql, parameters) { _ in }
    }

    /// Runs a statement and returns its rows, each as column values in order.
    public func query(_ sql: String, _ parameters: [SQLValue] = []) throws -> [[SQLValue]] {
        var rows: [[SQLValue]] = []
        try forEachRow(sql, parameters) { rows.append($0) }
        return rows
    }

    public func forEachRow(_ sql: String, _ body: ([SQLValue]) throws -> Void) throws {
        try forEachRow(sql, [], body)
    }

    /// `body` between `begin` and COMMIT, or ROLLBACK when it throws: what both databases' `transaction` do.
    func transaction<T>(beginningWith begin: String, _ body: () throws -> T) throws -> T {
        try execute(begin)
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// Like `transaction`, or just `body` when a transaction is already open.
    public func transactionIfNeeded<T>(_ body: () throws -> T) throws -> T {
        if inTransaction { return try body() }
        return try transaction(body)
    }
}
