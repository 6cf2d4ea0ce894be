import Foundation

/// A real proxy on loopback for the proxy tests: Debian's tinyproxy (HTTP: absolute-form GET and CONNECT, Basic
/// proxy authentication) or microsocks (SOCKS5 with a user name and password). Its log says what it was asked for.
final class LocalProxy {
    enum Kind { case tinyproxy, microsocks }

    let process = Process()
    let port: UInt16
    let host: String
    let logPath: String

    static func available(_ kind: Kind) -> Bool {
        FileManager.default.isExecutableFile(atPath: kind == .tinyproxy ? "/usr/bin/tinyproxy" : "/usr/bin/microsocks")
    }

    /// Listens on `host` (a loopback address) with `user` and `password` required.
    init(_ kind: Kind, directory: String, host: String = "127.0.0.1", user: String, password: String) throws {
        self.host = host
        port = try Nginx.freePort()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        logPath = directory + "/proxy.log"
        switch kind {
        case .tinyproxy:
            let config = """
                Port \(port)
                Listen \(host)
                Timeout 60
                MaxClients 64
                LogLevel Info
                LogFile "\(logPath)"
                BasicAuth \(user) \(password)
                """
            try config.write(toFile: directory + "/tinyproxy.conf", atomically: true, encoding: .utf8)
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
            // tinyproxy drops to nobody when run as root: its log must stay writable.
            chmod(logPath, 0o666)
            process.executableURL = URL(fileURLWithPath: "/usr/bin/tinyproxy")
            process.arguments = ["-d", "-c", directory + "/tinyproxy.conf"]
            process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
            process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        case .microsocks:
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
            process.executableURL = URL(fileURLWithPath: "/usr/bin/microsocks")
            process.arguments = ["-i", host, "-p", "\(port)", "-u", user, "-P", password]
            process.standardOutput = FileHandle(forWritingAtPath: logPath)
            process.standardError = FileHandle(forWritingAtPath: logPath)
        }
        try process.run()
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if LocalProxy.accepts(host: host, port: port) { return }
            guard process.isRunning else { break }
            usleep(20_000)
        }
        throw HarnessError("\(kind) did not start: \(log)")
    }

    /// `scheme://user:password@host:port`.
    func url(_ scheme: String, user: String, password: String) -> String {
        "\(scheme)://\(user):\(password)@\(host):\(port)"
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    deinit { stop() }

    static func accepts(host: String, port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr(host)
        address.sin_port = port.bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}
