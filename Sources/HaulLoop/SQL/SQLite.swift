internal import CSQLite

/// A failed SQLite call: the result code and SQLite's message.
public struct SQLiteError: Error, CustomStringConvertible, Sendable {
    public let code: Int32
    public let message: String
    public var description: String { "SQLite error \(code): \(message)" }

    public init(code: Int32, message: String) {
        self.code = code
        self.message = message
    }
}

/// One SQLite connection. Confined to the thread that uses it (the loop thread).
public final class SQLiteDatabase: SQLDatabase {
    public let dialect = SQLDialect.sqlite
    private var db: OpaquePointer?
    private var statements: [String: (OpaquePointer, SQLColumns)] = [:]

    public init(path: String) throws {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open \(path)"
            sqlite3_close_v2(handle)
            throw SQLiteError(code: rc, message: message)
        }
        db = handle
        sqlite3_busy_timeout(handle, 5000)
    }

    deinit { close() }

    public func close() {
        for (statement, _) in statements.values { sqlite3_finalize(statement) }
        statements.removeAll()
        if let db { sqlite3_close_v2(db) }
        db = nil
    }

    /// The one place SQLite result codes become Swift errors.
    /// Throws unless `rc` is `ok`. One code, not a set: a set literal here was built for every bound value and row.
    private func check(_ rc: Int32, _ ok: Int32 = SQLITE_OK) throws {
        guard rc == ok else {
            throw SQLiteError(code: rc, message: db.map { String(cString: sqlite3_errmsg($0)) } ?? "closed")
        }
    }

    /// Runs one or more statements that take no parameters and return no rows.
    public func execute(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(db, sql, nil, nil, &message)
        if rc != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? "error"
            sqlite3_free(message)
            throw SQLiteError(code: rc, message: text)
        }
    }

    /// Hands each row of `sql` to `body` as it is stepped: a large table is never all in memory at once.
    public func forEachRow(_ sql: String, _ parameters: [SQLValue], _ body: (SQLRow) throws -> Void) throws {
        var row: [SQLValue] = []
        try step(sql, parameters) { raw, columns in
            row.removeAll(keepingCapacity: true)
            row.reserveCapacity(columns.names.count)
            for column in columns.names.indices { row.append(raw.value(column)) }
            try body(SQLRow(values: row, columns: columns))
        }
    }

    /// As `forEachRow`, each row read in place from the statement.
    func forEachStatementRow(_ sql: String, _ parameters: [SQLValue], _ body: (SQLRawRow) throws -> Void) throws {
        try step(sql, parameters) { row, _ in try body(row) }
    }

    /// Prepares `sql` (once), binds `parameters` and calls `body` on each row it steps to.
    private func step(_ sql: String, _ parameters: [SQLValue], _ body: (SQLRawRow, SQLColumns) throws -> Void) throws {
        let (statement, columns) = try prepared(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (index, value) in parameters.enumerated() {
            let position = Int32(index + 1)
            switch value {
            case .null: try check(sqlite3_bind_null(statement, position))
            case .integer(let v): try check(sqlite3_bind_int64(statement, position, v))
            case .real(let v): try check(sqlite3_bind_double(statement, position, v))
            case .text(let v): try check(sqlite3_bind_text(statement, position, v, -1, haul_sqlite_transient()))
            }
        }
        let count = Int(sqlite3_column_count(statement))
        let types = UnsafeMutableBufferPointer<Int32>.allocate(capacity: count)
        defer { types.deallocate() }
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { break }
            try check(rc, SQLITE_ROW)
            for column in 0..<count { types[column] = sqlite3_column_type(statement, Int32(column)) }
            try body(SQLRawRow(statement: statement, types: UnsafeBufferPointer(types)), columns)
        }
    }

    /// Runs `body` in a transaction: committed if it returns, rolled back if it throws.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try transaction(beginningWith: "BEGIN IMMEDIATE", body)
    }

    public var inTransaction: Bool { sqlite3_get_autocommit(db) == 0 }

    public var session: Int32? { nil }

    public func openListener(_ channels: [String]) throws -> (any SQLListener)? { nil }

    private func prepared(_ sql: String) throws -> (OpaquePointer, SQLColumns) {
        if let found = statements[sql] { return found }
        var statement: OpaquePointer?
        try check(sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil))
        guard let statement else { throw SQLiteError(code: SQLITE_MISUSE, message: "empty statement: \(sql)") }
        let columns = SQLColumns(
            (0..<sqlite3_column_count(statement)).map { column in
                sqlite3_column_name(statement, column).map { String(cString: $0) } ?? ""
            })
        statements[sql] = (statement, columns)
        return (statement, columns)
    }
}
