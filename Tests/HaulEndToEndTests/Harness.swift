import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import XCTest

/// A temporary directory per test, removed afterwards (world-readable: nginx's workers run as nobody).
final class Sandbox {
    let path: String

    init() throws {
        var template = Array((NSTemporaryDirectory() + "haul-e2e-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw HarnessError("mkdtemp failed") }
        path = String(cString: made)
        chmod(path, 0o755)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func file(_ relative: String) -> String { path + "/" + relative }

    /// A self-signed certificate and its key for 127.0.0.1 test servers (`tls.crt`, `tls.key`), made once.
    func selfSignedCertificate() throws -> (certificate: String, key: String) {
        let certificate = file("tls.crt"), key = file("tls.key")
        if !FileManager.default.fileExists(atPath: certificate) {
            try runCommand(
                "/usr/bin/openssl",
                [
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", certificate, "-days", "1", "-subj", "/CN=haul-test",
                ])
            // nginx's workers read it as another user.
            chmod(key, 0o644)
        }
        return (certificate, key)
    }

    /// Writes `size` random bytes to `relative` (world-readable) and returns its sha256.
    @discardableResult
    func makeRandomFile(_ relative: String, size: Int) throws -> String {
        let full = file(relative)
        try FileManager.default.createDirectory(
            atPath: (full as NSString).deletingLastPathComponent,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o755])
        // Read from the kernel's generator in bulk (a generator's 8 bytes a call took seconds for 64 MiB).
        guard let random = FileHandle(forReadingAtPath: "/dev/urandom") else { throw HarnessError("no /dev/urandom") }
        defer { try? random.close() }
        var data = Data()
        while data.count < size {
            guard let more = try random.read(upToCount: size - data.count), !more.isEmpty else {
                throw HarnessError("/dev/urandom ran dry")
            }
            data.append(more)
        }
        try data.write(to: URL(fileURLWithPath: full))
        chmod(full, 0o644)
        return try sha256(full)
    }
}

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The package's root directory (where Package.swift is), found from this file's path.
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path

/// The directory holding the built `haul` and `TestOrigin` (next to the test bundle).
/// Set by `make sanitize` to the sanitizer the binaries were built with; their memory use then says nothing about
/// Haul's, so tests skip their RSS bounds.
let underSanitizer = ProcessInfo.processInfo.environment["HAUL_SANITIZER"] != nil

var buildDirectory: String {
    if let explicit = ProcessInfo.processInfo.environment["HAUL_BIN_DIR"] { return explicit }
    return (Bundle.main.executablePath.map { ($0 as NSString).deletingLastPathComponent })
        .flatMap { FileManager.default.fileExists(atPath: $0 + "/haul") ? $0 : nil }
        ?? (CommandLine.arguments[0] as NSString).deletingLastPathComponent
}

/// A TCP socket connected to 127.0.0.1:`port`, its receive buffer first shrunk to `receiveBuffer` when given.
func connectToLoopback(port: UInt16, receiveBuffer: Int32? = nil) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw HarnessError("socket: \(errno)") }
    if var size = receiveBuffer {
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = port.bigEndian
    let rc = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard rc == 0 else {
        let code = errno
        close(fd)
        throw HarnessError("connect to port \(port): \(code)")
    }
    return fd
}

/// sha256 of a file, computed by coreutils' sha256sum.
func sha256(_ path: String) throws -> String {
    let output = try runCommand("/usr/bin/sha256sum", [path])
    guard let hash = output.split(separator: " ").first else { throw HarnessError("sha256sum printed nothing") }
    return String(hash)
}

@discardableResult
func runCommand(_ executable: String, _ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw HarnessError("\(executable) \(arguments) exited with \(process.terminationStatus)")
    }
    return String(decoding: data, as: UTF8.self)
}

/// What a finished command left: its exit status and what it printed.
struct CommandResult {
    let status: Int32
    let stdout: String
    let stderr: String
    /// Both streams, for failure messages.
    var output: String { stdout + stderr }
}

/// Runs a command to its end with `input` on its standard input, whatever its exit status. Output goes through
/// files, so a chatty command never blocks on a full pipe.
func execute(
    _ executable: String, _ arguments: [String], input: Data = Data(),
    environment: [String: String]? = nil
) throws -> CommandResult {
    let sandbox = try Sandbox()
    FileManager.default.createFile(atPath: sandbox.file("in"), contents: input)
    FileManager.default.createFile(atPath: sandbox.file("out"), contents: nil)
    FileManager.default.createFile(atPath: sandbox.file("err"), contents: nil)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    process.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: sandbox.file("in")))
    process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: sandbox.file("out")))
    process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: sandbox.file("err")))
    try process.run()
    process.waitUntilExit()
    return CommandResult(
        status: process.terminationStatus,
        stdout: try String(contentsOfFile: sandbox.file("out"), encoding: .utf8),
        stderr: try String(contentsOfFile: sandbox.file("err"), encoding: .utf8))
}

/// A child process that prints `... listening on http://HOST:PORT` on its first line.
final class ServerProcess {
    let process = Process()
    let baseURL: String
    let logPath: String

    init(
        executable: String, arguments: [String], environment: [String: String]? = nil, logPath: String,
        currentDirectory: String? = nil
    ) throws {
        self.logPath = logPath
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var environment = environment ?? ProcessInfo.processInfo.environment
        if underSanitizer {
            // The runner's leak suppressions (its URLSession's libcurl) are not for the servers: theirs all count.
            environment["LSAN_OPTIONS"] = nil
        }
        process.environment = environment
        if let currentDirectory { process.currentDirectoryURL = URL(fileURLWithPath: currentDirectory) }
        let stdout = Pipe()
        process.standardOutput = stdout
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: logPath)
        try process.run()
        // Read the first line byte by byte: it carries the bound port.
        var line = Data()
        let reader = stdout.fileHandleForReading
        while true {
            let byte = reader.readData(ofLength: 1)
            if byte.isEmpty || byte == Data("\n".utf8) { break }
            line.append(byte)
        }
        let text = String(decoding: line, as: UTF8.self)
        guard let range = text.range(of: "http://") else {
            process.terminate()
            let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            throw HarnessError("\(executable) did not start: '\(text)'\n\(log)")
        }
        baseURL = String(text[range.lowerBound...])
    }

    var isRunning: Bool { process.isRunning }

    /// Sends `signal` and waits for the exit; returns the exit status.
    @discardableResult
    func stop(signal: Int32 = SIGTERM) -> Int32 {
        guard process.isRunning else { return process.terminationStatus }
        kill(process.processIdentifier, signal)
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit { stop(signal: SIGKILL) }
}

/// A synchronous HTTP client over URLSession.
struct Client {
    struct Reply {
        let status: Int
        let headers: [String: String]
        let body: Data

        var json: [String: Any] {
            (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:]
        }
        var text: String { String(decoding: body, as: UTF8.self) }
        func header(_ name: String) -> String? {
            headers.first(where: { $0.key.caseInsensitiveCompare(name) == .orderedSame })?.value
        }
    }

    let base: String

    func request(
        _ method: String, _ path: String, json: Any? = nil, body: Data? = nil,
        headers: [String: String] = [:]
    ) throws -> Reply {
        var request = URLRequest(url: URL(string: base + path)!)
        request.httpMethod = method
        request.timeoutInterval = 30
        if let json {
            request.httpBody = try JSONSerialization.data(withJSONObject: json)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        } else if let body {
            request.httpBody = body
        }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let done = DispatchSemaphore(value: 0)
        let box = ReplyBox()
        let task = URLSession.shared.dataTask(with: request) { data, response, error in
            if let http = response as? HTTPURLResponse {
                var headers: [String: String] = [:]
                for (key, value) in http.allHeaderFields { headers["\(key)"] = "\(value)" }
                box.reply = Reply(status: http.statusCode, headers: headers, body: data ?? Data())
            } else {
                box.error = error
            }
            done.signal()
        }
        task.resume()
        done.wait()
        if let reply = box.reply { return reply }
        throw HarnessError("\(method) \(path): \(box.error.map { "\($0)" } ?? "no response")")
    }

    func get(_ path: String) throws -> Reply { try request("GET", path) }
}

private final class ReplyBox: @unchecked Sendable {
    var reply: Client.Reply?
    var error: Error?
}

/// Polls `condition` every 20 ms until it holds or `timeout` passes.
func waitFor(
    _ what: String, timeout: TimeInterval = 30, file: StaticString = #filePath, line: UInt = #line,
    _ condition: () throws -> Bool
) rethrows {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return }
        usleep(20_000)
    }
    XCTFail("timed out after \(timeout)s waiting for \(what)", file: file, line: line)
}
