internal import CPostgres
import Glibc

/// One connection to PostgreSQL through libpq, the store several Haul nodes share. Statements are prepared once per
/// connection and rows are read one at a time (single-row mode), as SQLite's are stepped. Calls block the calling
/// thread for a round trip, as SQLite's block it for a page write: on loopback or a LAN, a fraction of a millisecond.
public final class PostgresDatabase: SQLDatabase, SQLListener {
    public let dialect = SQLDialect.postgres
    /// The URL with its password blanked: what messages show.
    public let shownURL: String
    private var conn: OpaquePointer?
    private var statements: [String: String] = [:]
    /// Each statement's result column names, read from its first row.
    private var columns: [String: SQLColumns] = [:]

    /// The URL it connected to, for a second connection (a listener) to the same database.
    private let url: String

    public init(url: String) throws {
        self.url = url
        shownURL = Self.redacted(url)
        let handle = PQconnectdb(url)
        guard let handle, PQstatus(handle) == CONNECTION_OK else {
            let reason = handle.map { Self.trimmed(PQerrorMessage($0)) } ?? "out of memory"
            PQfinish(handle)
            throw DatabaseError("cannot connect to \(shownURL): \(reason)")
        }
        conn = handle
        // Notices (a table that already exists, ...) would go to stderr, around the log's format.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
    }

    deinit { close() }

    public func close() {
        PQfinish(conn)
        conn = nil
        statements.removeAll()
    }

    /// The server's process for this connection: what another session names to end it (tests of a lost node).
    public var backendPID: Int32 { PQbackendPID(conn) }

    public var session: Int32? { backendPID }

    public func openListener(_ channels: [String]) throws -> (any SQLListener)? {
        let listener = try PostgresDatabase(url: url)
        for channel in channels { try listener.listen(channel) }
        return listener
    }

    // MARK: notifications

    /// Starts listening on `channel`; notifications then arrive on the socket (`socket`, `notifications`).
    public func listen(_ channel: String) throws {
        let conn = try connection()
        guard let quoted = PQescapeIdentifier(conn, channel, channel.utf8.count) else {
            throw DatabaseError(Self.trimmed(PQerrorMessage(conn)))
        }
        defer { PQfreemem(quoted) }
        try execute("LISTEN " + String(cString: quoted))
    }

    /// The connection's socket: readable when the server sent something (a notification).
    public var socket: Int32 { conn.map { PQsocket($0) } ?? -1 }

    public var isConnected: Bool { conn.map { PQstatus($0) == CONNECTION_OK } ?? false }

    /// Reads what the server sent without waiting and returns the notifications in it: each one's channel,
    /// payload and the server process of the session that sent it.
    public func notifications() throws -> [(channel: String, payload: String, sender: Int32)] {
        guard let conn else { throw DatabaseError("the connection to \(shownURL) is closed") }
        guard PQconsumeInput(conn) == 1 else {
            throw DatabaseError("lost the connection to \(shownURL): \(Self.trimmed(PQerrorMessage(conn)))")
        }
        var received: [(channel: String, payload: String, sender: Int32)] = []
        while let notice = PQnotifies(conn) {
            received.append(
                (
                    String(cString: notice.pointee.relname), String(cString: notice.pointee.extra),
                    notice.pointee.be_pid
                ))
            PQfreemem(notice)
        }
        return received
    }

    /// A connection the server or the network dropped is opened again on the next call (the statement cache goes
    /// with it); a transaction it was in is lost, and the call that saw the loss has failed.
    private func connection() throws -> OpaquePointer {
        guard let conn else { throw DatabaseError("the connection to \(shownURL) is closed") }
        if PQstatus(conn) == CONNECTION_BAD {
            statements.removeAll()
            PQreset(conn)
            guard PQstatus(conn) == CONNECTION_OK else {
                throw DatabaseError("lost the connection to \(shownURL): \(Self.trimmed(PQerrorMessage(conn)))")
            }
        }
        return conn
    }

    private func check(_ result: OpaquePointer?, _ conn: OpaquePointer) throws {
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_SINGLE_TUPLE: return
        default:
            guard let result else { throw DatabaseError(Self.trimmed(PQerrorMessage(conn))) }
            let state = PQresultErrorField(result, haul_pg_diag_sqlstate()).map { String(cString: $0) }
            throw DatabaseError(Self.trimmed(PQresultErrorMessage(result)) + (state.map { " (SQLSTATE \($0))" } ?? ""))
        }
    }

    public func execute(_ sql: String) throws {
        let conn = try connection()
        let result = PQexec(conn, sql)
        defer { PQclear(result) }
        try check(result, conn)
    }

    public func forEachRow(_ sql: String, _ parameters: [SQLValue], _ body: (SQLRow) throws -> Void) throws {
        let conn = try connection()
        let name = try prepared(sql, conn)
        // Text format for every value: the server parses each as its column's type.
        let owned: [UnsafeMutablePointer<CChar>?] = parameters.map { value in
            switch value {
            case .null: return nil
            case .integer(let v): return strdup(String(v))
            case .real(let v): return strdup(String(v))
            case .text(let v): return strdup(v)
            }
        }
        defer { for pointer in owned { free(pointer) } }
        let values: [UnsafePointer<CChar>?] = owned.map { $0.map { UnsafePointer($0) } }
        guard PQsendQueryPrepared(conn, name, Int32(values.count), values, nil, nil, 0) == 1 else {
            throw DatabaseError(Self.trimmed(PQerrorMessage(conn)))
        }
        PQsetSingleRowMode(conn)
        // Every result is read, whatever fails on the way: the connection takes no new command before.
        var failure: Error?
        var row: [SQLValue] = []
        while let result = PQgetResult(conn) {
            defer { PQclear(result) }
            guard failure == nil else { continue }
            do {
                try check(result, conn)
                guard PQresultStatus(result) == PGRES_SINGLE_TUPLE else { continue }
                row.removeAll(keepingCapacity: true)
                for column in 0..<PQnfields(result) { row.append(Self.value(result, column)) }
                try body(SQLRow(values: row, columns: columns(sql, result)))
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
    }

    private func columns(_ sql: String, _ result: OpaquePointer) -> SQLColumns {
        if let known = columns[sql] { return known }
        let names = SQLColumns((0..<PQnfields(result)).map { PQfname(result, $0).map { String(cString: $0) } ?? "" })
        columns[sql] = names
        return names
    }

    private static func value(_ result: OpaquePointer, _ column: Int32) -> SQLValue {
        guard PQgetisnull(result, 0, column) == 0, let bytes = PQgetvalue(result, 0, column) else { return .null }
        let text = String(cString: bytes)
        switch PQftype(result, column) {
        case 20, 21, 23: return Int64(text).map { .integer($0) } ?? .text(text)  // int8, int2, int4
        case 700, 701, 1700: return Double(text).map { .real($0) } ?? .text(text)  // float4, float8, numeric
        case 16: return .integer(text == "t" ? 1 : 0)  // bool
        default: return .text(text)
        }
    }

    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try transaction(beginningWith: "BEGIN", body)
    }

    public var inTransaction: Bool { conn.map { PQtransactionStatus($0) != PQTRANS_IDLE } ?? false }

    private func prepared(_ sql: String, _ conn: OpaquePointer) throws -> String {
        if let name = statements[sql] { return name }
        let name = "haul_\(statements.count)"
        let result = PQprepare(conn, name, Self.numbered(sql), 0, nil)
        defer { PQclear(result) }
        try check(result, conn)
        statements[sql] = name
        return name
    }

    /// `?` placeholders as PostgreSQL's `$1`, `$2`, ...; a `?` inside quotes is text, not a placeholder.
    static func numbered(_ sql: String) -> String {
        var out = ""
        var count = 0
        var quote: Character?
        for character in sql {
            if let open = quote {
                if character == open { quote = nil }
                out.append(character)
            } else if character == "'" || character == "\"" {
                quote = character
                out.append(character)
            } else if character == "?" {
                count += 1
                out += "$\(count)"
            } else {
                out.append(character)
            }
        }
        return out
    }

    /// A URL as it may be shown: `postgres://user:secret@host/db` and `?password=secret` with the secret blanked.
    public static func redacted(_ url: String) -> String {
        var text = url
        if let scheme = text.firstRange(of: "://") {
            let authorityEnd = text[scheme.upperBound...].firstIndex { $0 == "/" || $0 == "?" } ?? text.endIndex
            if let at = text[scheme.upperBound..<authorityEnd].lastIndex(of: "@"),
                let colon = text[scheme.upperBound..<at].firstIndex(of: ":")
            {
                text.replaceSubrange(text.index(after: colon)..<at, with: "***")
            }
        }
        if let start = text.firstRange(of: "password=") {
            let end = text[start.upperBound...].firstIndex { $0 == "&" || $0 == " " } ?? text.endIndex
            text.replaceSubrange(start.upperBound..<end, with: "***")
        }
        return text
    }

    private static func trimmed(_ message: UnsafePointer<CChar>?) -> String {
        guard let message else { return "unknown error" }
        var text = String(cString: message)
        while let last = text.last, last.isWhitespace { text.removeLast() }
        return text.replacing("\n", with: "; ")
    }
}
