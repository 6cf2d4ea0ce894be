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

/// The names of a statement's result columns, read once when the statement is first prepared and shared by every
/// row it returns.
public final class SQLColumns: Sendable {
    public let names: [String]
    private let positions: [String: Int]

    public init(_ names: [String]) {
        self.names = names
        // A name given twice (a join's two `id`s) is found at its first position; select it `AS` another name to
        // read the second.
        var positions: [String: Int] = [:]
        for (index, name) in names.enumerated() where positions[name] == nil { positions[name] = index }
        self.positions = positions
    }

    public func position(_ name: String) -> Int? { positions[name] }
}

/// One row of a result, read by column name: a query's column list and the code reading it cannot drift apart by
/// position, and a name the query does not select is a programming error caught by the tests, not a value read
/// from the wrong column.
public struct SQLRow: Sendable {
    /// The values in the order the query selects them, for code that walks a column list of its own.
    public let values: [SQLValue]
    public let columns: SQLColumns

    public init(values: [SQLValue], columns: SQLColumns) {
        self.values = values
        self.columns = columns
    }

    public subscript(_ name: String) -> SQLValue {
        guard let position = columns.position(name), position < values.count else {
            assertionFailure("no column \(name) in \(columns.names)")
            return .null
        }
        return values[position]
    }

    /// The first column: what a query of one value (`count(*)`, `SELECT 1`) answers.
    public var first: SQLValue? { values.first }
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
    func forEachRow(_ sql: String, _ parameters: [SQLValue], _ body: (SQLRow) throws -> Void) throws
    /// Runs `body` in a transaction: committed if it returns, rolled back if it throws.
    func transaction<T>(_ body: () throws -> T) throws -> T
    var inTransaction: Bool { get }
    /// The server's session for this connection, which notifications it caused itself carry (nil: a database of
    /// one process, which sends none).
    var session: Int32? { get }
    /// A second connection to the same database that hears notifications other sessions send on `channels`, or
    /// nil for a database that has none (SQLite: one process owns it).
    func openListener(_ channels: [String]) throws -> (any SQLListener)?
}

/// A connection hearing notifications (PostgreSQL's LISTEN): readable on `socket` when some arrived.
public protocol SQLListener: AnyObject {
    var socket: Int32 { get }
    var isConnected: Bool { get }
    /// What arrived, without waiting: each notification's channel, payload and the session that sent it.
    func notifications() throws -> [(channel: String, payload: String, sender: Int32)]
}

extension SQLDatabase {
    /// Runs a statement with parameters; returns no rows.
    public func run(_ sql: String, _ parameters: [SQLValue] = []) throws {
        try forEachRow(sql, parameters) { _ in }
    }

    /// Runs a statement and returns its rows.
    public func query(_ sql: String, _ parameters: [SQLValue] = []) throws -> [SQLRow] {
        var rows: [SQLRow] = []
        try forEachRow(sql, parameters) { rows.append($0) }
        return rows
    }

    public func forEachRow(_ sql: String, _ body: (SQLRow) throws -> Void) throws {
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
