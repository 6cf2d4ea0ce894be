import Foundation

/// nginx serving `root` on a free loopback port, started for one test with its own prefix directory.
final class Nginx {
    let baseURL: String
    private let prefix: String
    private let process = Process()

    static var available: Bool { FileManager.default.isExecutableFile(atPath: "/usr/sbin/nginx") }

    /// `serverConfig` is added to the server block (e.g. `limit_rate 2m;`). The access log records each request's
    /// status and Range header, tab-separated.
    /// With `tls` (certificate and key files) it speaks HTTPS.
    /// With `http2` as well, it offers HTTP/2 by ALPN.
    init(
        root: String, prefix: String, serverConfig: String = "", tls: (certificate: String, key: String)? = nil,
        http2: Bool = false
    ) throws {
        self.prefix = prefix
        try FileManager.default.createDirectory(atPath: prefix + "/logs", withIntermediateDirectories: true)
        let port = try Nginx.freePort()
        let config = """
            daemon off;
            worker_processes 1;
            pid \(prefix)/nginx.pid;
            error_log \(prefix)/logs/error.log warn;
            events { worker_connections 256; }
            http {
                log_format ranges '$status\t$http_range\t$body_bytes_sent\t$server_protocol\t$connection\t$uri';
                access_log \(prefix)/logs/access.log ranges;
                client_body_temp_path \(prefix)/body;
                proxy_temp_path \(prefix)/proxy;
                fastcgi_temp_path \(prefix)/fastcgi;
                uwsgi_temp_path \(prefix)/uwsgi;
                scgi_temp_path \(prefix)/scgi;
                sendfile on;
                server {
                    listen 127.0.0.1:\(port)\(tls == nil ? "" : " ssl")\(http2 ? " http2" : "");
                    \(tls.map { "ssl_certificate \($0.certificate); ssl_certificate_key \($0.key);" } ?? "")
                    root \(root);
                    \(serverConfig)
                }
            }
            """
        try config.write(toFile: prefix + "/nginx.conf", atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/nginx")
        process.arguments = ["-p", prefix, "-c", prefix + "/nginx.conf"]
        // Never the runner's own output: a server left behind would hold it open.
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        baseURL = (tls == nil ? "http" : "https") + "://127.0.0.1:\(port)"
        // Ready when it accepts a connection.
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if Nginx.canConnect(port: port) { return }
            guard process.isRunning else { break }
            usleep(20_000)
        }
        let log = (try? String(contentsOfFile: prefix + "/logs/error.log", encoding: .utf8)) ?? ""
        throw HarnessError("nginx did not start: \(log)")
    }

    /// Status, Range header, protocol ("HTTP/2.0") and connection number of every request so far.
    func requests() -> [(status: Int, range: String, proto: String, connection: Int)] {
        let log = (try? String(contentsOfFile: prefix + "/logs/access.log", encoding: .utf8)) ?? ""
        return log.split(separator: "\n").map { line in
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            return (
                Int(fields.first ?? "") ?? 0, fields.count > 1 ? fields[1] : "", fields.count > 3 ? fields[3] : "",
                fields.count > 4 ? Int(fields[4]) ?? 0 : 0
            )
        }
    }

    /// The path of every request so far, in order.
    func paths() -> [String] {
        let log = (try? String(contentsOfFile: prefix + "/logs/access.log", encoding: .utf8)) ?? ""
        return log.split(separator: "\n").map { line in
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            return fields.count > 5 ? String(fields[5]) : ""
        }
    }

    deinit {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    static func freePort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                guard bind(fd, pointer, length) == 0 else { return -1 }
                return getsockname(fd, pointer, &length)
            }
        }
        guard bound == 0 else { throw HarnessError("cannot find a free port") }
        return UInt16(bigEndian: address.sin_port)
    }

    static func canConnect(port: UInt16) -> Bool {
        guard let fd = try? connectToLoopback(port: port) else { return false }
        close(fd)
        return true
    }
}
