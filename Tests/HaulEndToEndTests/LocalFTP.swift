import Foundation

/// An FTP (or explicit FTPS) server on loopback for the FTP tests: Tests/Servers/ftp_server.py, pyftpdlib from the
/// venv `make test` makes, with the faults a test asks for. Its log holds every command and reply (`<- REST
/// 1000`), which a test reads to see what Haul asked. It can be stopped and started again on the same port.
final class LocalFTP {
    let port: UInt16
    let root: String
    let logPath: String
    let user = "ann"
    let password = "ftp-s3cret"
    private let arguments: [String]
    private var process: Process?
    private var starts = 0

    static var python: String { packageRoot + "/.build/venv/bin/python" }
    static var script: String { packageRoot + "/Tests/Servers/ftp_server.py" }

    static var available: Bool {
        FileManager.default.isExecutableFile(atPath: python)
            && (try? execute(python, ["-c", "import pyftpdlib, OpenSSL"]).status) == 0
    }

    /// Serves `root`; `tls` a PEM of key and certificate (explicit FTPS); `options` the script's fault flags.
    init(root: String, directory: String, tls: String? = nil, options: [String] = []) throws {
        self.root = root
        port = try Nginx.freePort()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        logPath = directory + "/ftp.log"
        arguments =
            [LocalFTP.script, "--port", String(port), "--root", root, "--user", user, "--password", password]
            + (tls.map { ["--tls", $0] } ?? []) + options
        try start()
    }

    /// `ftp://` (or another scheme) with the login in it, to `path`.
    func url(_ path: String, scheme: String = "ftp", login: Bool = true) -> String {
        "\(scheme)://\(login ? "\(user):\(password)@" : "")127.0.0.1:\(port)/\(path)"
    }

    /// Starts the server (again, after `stop`), appending to the same log.
    func start() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: LocalFTP.python)
        process.arguments = arguments
        if !FileManager.default.fileExists(atPath: logPath) {
            FileManager.default.createFile(atPath: logPath, contents: nil)
        }
        let log = FileHandle(forWritingAtPath: logPath)
        log?.seekToEndOfFile()
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        process.standardError = log
        try process.run()
        self.process = process
        starts += 1
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline {
            if LocalProxy.accepts(host: "127.0.0.1", port: port) { return }
            guard process.isRunning else { break }
            usleep(20_000)
        }
        throw HarnessError("the FTP server did not start: \(self.log.suffix(2000))")
    }

    /// Kills it at once (SIGKILL): sessions and transfers end mid-way.
    func kill() {
        guard let process, process.isRunning else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    func stop() {
        guard let process, process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// The commands the server received with this verb (`REST`), their arguments in order.
    func commands(_ verb: String) -> [String] {
        log.split(separator: "\n").compactMap { line in
            guard let range = line.range(of: "<- \(verb)") else { return nil }
            return String(line[range.upperBound...]).trimmingCharacters(in: .whitespaces)
        }
    }

    deinit { kill() }
}
