import Foundation
import HaulLoop

/// A real PostgreSQL for the tests: Debian's postgresql package, a cluster made by initdb in a temporary directory,
/// listening on a Unix socket there and nowhere else. Run as the `postgres` user when the tests run as root (the
/// server refuses root). Started once per test process, each test takes a database of its own; the server is stopped
/// by its pid when the process exits.
public final class PostgresServer: @unchecked Sendable {
    public let directory: String
    public let socketDirectory: String
    private static let lock = NSLock()
    nonisolated(unsafe) private static var started: Result<PostgresServer, Error>?
    nonisolated(unsafe) private static var running: (pid: pid_t, directory: String)?

    /// The server of this test process, started on first use.
    public static func shared() throws -> PostgresServer {
        lock.lock()
        defer { lock.unlock() }
        if let started { return try started.get() }
        let result = Result { try PostgresServer() }
        started = result
        return try result.get()
    }

    private init() throws {
        guard let bin = Self.binDirectory() else {
            throw PostgresServerError(
                "PostgreSQL is not installed (/usr/lib/postgresql/*/bin/initdb); "
                    + "make test installs Debian's postgresql package")
        }
        let directory = NSTemporaryDirectory() + "haul-pg-" + String(UUID().uuidString.prefix(8))
        let socketDirectory = directory + "/socket"
        self.directory = directory
        self.socketDirectory = socketDirectory
        try FileManager.default.createDirectory(atPath: socketDirectory, withIntermediateDirectories: true)
        let asRoot = getuid() == 0
        if asRoot {
            guard let user = getpwnam("postgres") else { throw PostgresServerError("no postgres user") }
            for path in [directory, socketDirectory] { chown(path, user.pointee.pw_uid, user.pointee.pw_gid) }
        }
        func run(_ tool: String, _ arguments: [String]) throws {
            let command = asRoot ? ["/usr/sbin/runuser", "-u", "postgres", "--", bin + "/" + tool] : [bin + "/" + tool]
            // posix_spawn and waitpid, not Foundation's Process: that one learns of an exit when a socket the child
            // inherited closes, and the server pg_ctl leaves running inherits it too.
            let outputPath = directory + "/\(tool).out"
            let status = try Self.spawnAndWait(command + arguments, output: outputPath)
            guard status == 0 else {
                let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
                throw PostgresServerError("\(tool) failed (status \(status)): \(text)")
            }
        }
        let data = directory + "/data"
        try run("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"])
        // fsync off: the tests kill Haul nodes, never this server, and a test database need not survive a power cut.
        try run(
            "pg_ctl",
            [
                "-D", data, "-l", directory + "/server.log", "-w", "-t", "60", "start", "-o",
                "-k \(socketDirectory) -c listen_addresses='' -c fsync=off -c max_connections=200",
            ])
        let pidFile = try String(contentsOfFile: data + "/postmaster.pid", encoding: .utf8)
        guard let pid = pid_t(pidFile.split(separator: "\n").first ?? "") else {
            throw PostgresServerError("no pid in \(data)/postmaster.pid")
        }
        Self.running = (pid, directory)
        atexit {
            guard let running = PostgresServer.running else { return }
            // SIGINT is PostgreSQL's fast shutdown: sessions are ended, the server exits at once.
            kill(running.pid, SIGINT)
            for _ in 0..<100 where kill(running.pid, 0) == 0 { usleep(50_000) }
            try? FileManager.default.removeItem(atPath: running.directory)
        }
    }

    /// Runs `command` with its output in the file `output`; returns its wait status.
    private static func spawnAndWait(_ command: [String], output: String) throws -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = command.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, command[0], &actions, nil, argv, environ)
        guard rc == 0 else { throw PostgresServerError("cannot run \(command[0]): \(String(cString: strerror(rc)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        return status
    }

    private static func binDirectory() -> String? {
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return versions.compactMap(Int.init).sorted().reversed().map { "\(root)/\($0)/bin" }
            .first { FileManager.default.isExecutableFile(atPath: $0 + "/initdb") }
    }

    /// A libpq URI for `database` on this server.
    public func url(_ database: String) -> String {
        "postgresql:///\(database)?host=\(socketDirectory)&user=postgres"
    }

    /// A new, empty database; returns its URL.
    public func createDatabase() throws -> String {
        let name = "haul_" + UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: "")
        let admin = try PostgresDatabase(url: url("postgres"))
        try admin.execute("CREATE DATABASE \(name)")
        return url(name)
    }

    /// The server's log so far (printed when a test fails).
    public var log: String { (try? String(contentsOfFile: directory + "/server.log", encoding: .utf8)) ?? "" }
}

public struct PostgresServerError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
