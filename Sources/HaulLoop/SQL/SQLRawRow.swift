internal import CSQLite
import Glibc

/// One row of a result read in place: a column's number or text without an `SQLValue`, or a `String` for each text
/// (reading a million rows at start-up, making them was most of the work). Valid only during the call it is handed
/// to; its values are the ones `forEachRow` would give (a blob reads as null, a text stops at its first NUL).
public struct SQLRawRow {
    /// SQLite's statement on its current row, or a row already read into values (PostgreSQL's).
    private let statement: OpaquePointer?
    /// SQLite's type of each column of the row, read once for the row (a call each time was a tenth of reading).
    private let types: UnsafeBufferPointer<Int32>
    private let values: [SQLValue]

    init(statement: OpaquePointer, types: UnsafeBufferPointer<Int32>) {
        self.statement = statement
        self.types = types
        values = []
    }

    init(values: [SQLValue]) {
        statement = nil
        types = UnsafeBufferPointer(start: nil, count: 0)
        self.values = values
    }

    /// Whether the column holds no value `forEachRow` would read (null, or a blob).
    public func isNull(_ column: Int) -> Bool {
        guard statement != nil else { return values[column] == .null }
        switch types[column] {
        case SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT: return false
        default: return true
        }
    }

    /// The column's integer, as `SQLValue.int` reads it (nil unless an integer).
    public func int(_ column: Int) -> Int64? {
        guard let statement else { return values[column].int }
        guard types[column] == SQLITE_INTEGER else { return nil }
        return sqlite3_column_int64(statement, Int32(column))
    }

    /// The column's number, as `SQLValue.double` reads it (a real, or an integer made one).
    public func double(_ column: Int) -> Double? {
        guard let statement else { return values[column].double }
        switch types[column] {
        case SQLITE_FLOAT: return sqlite3_column_double(statement, Int32(column))
        case SQLITE_INTEGER: return Double(sqlite3_column_int64(statement, Int32(column)))
        default: return nil
        }
    }

    /// Calls `body` with the column's text as UTF-8 bytes (nil unless a text), valid only during the call.
    public func withText<Result>(
        _ column: Int, _ body: (UnsafeBufferPointer<UInt8>?) throws -> Result
    ) rethrows
        -> Result
    {
        guard let statement else {
            guard var text = values[column].string else { return try body(nil) }
            return try text.withUTF8(body)
        }
        let at = Int32(column)
        guard types[column] == SQLITE_TEXT, let start = sqlite3_column_text(statement, at) else { return try body(nil) }
        // As `String(cString:)` reads it for `forEachRow`: up to the first NUL.
        let length = strnlen(
            UnsafeRawPointer(start).assumingMemoryBound(to: CChar.self), Int(sqlite3_column_bytes(statement, at)))
        return try body(UnsafeBufferPointer(start: start, count: length))
    }

    /// The column as `forEachRow` reads it.
    public func value(_ column: Int) -> SQLValue {
        guard let statement else { return values[column] }
        let at = Int32(column)
        switch types[column] {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(statement, at))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(statement, at))
        case SQLITE_TEXT: return .text(String(cString: sqlite3_column_text(statement, at)))
        default: return .null
        }
    }
}

extension SQLDatabase {
    /// As `forEachRow`, each row read in place (`SQLRawRow`); a database without a way of its own reads the values
    /// first.
    public func forEachRawRow(_ sql: String, _ parameters: [SQLValue], _ body: (SQLRawRow) throws -> Void) throws {
        if let sqlite = self as? SQLiteDatabase { return try sqlite.forEachStatementRow(sql, parameters, body) }
        try forEachRow(sql, parameters) { row in try body(SQLRawRow(values: row.values)) }
    }
}
