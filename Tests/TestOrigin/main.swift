import Foundation
import HaulLoop

// TestOrigin: an HTTP origin for Haul's end-to-end tests, built on the same evhttp adapter as the server, serving
// the files of `--root` with faults chosen per request by query parameters:
//
//   /files/NAME                 the file, with Range (206), 416 past the end, If-Range, ETag and Last-Modified
//     ?norange=1                ignore Range: always 200 with the whole body, no Accept-Ranges
//     ?ignorerange=1            advertise Accept-Ranges: bytes, yet answer every Range with 200 and the whole body
//     ?nohead=1                 answer HEAD with 405
//     ?nolength=1               no Content-Length (chunked body)
//     ?novalidator=1            no ETag and no Last-Modified
//     ?rate=BYTES               trickle the body at BYTES per second on each connection, no faster than read
//     ?slowfrom=OFFSET&slowrate=BYTES  bodies starting at OFFSET or later trickle at BYTES per second
//     ?cut=BYTES                close the connection after BYTES of body
//     ?stall=BYTES              send BYTES of body, then nothing more, keeping the connection open
//       &stalls=N               ... only in the first N bodies of this path
//     ?badrange=N               the first N ranged replies of this path carry a Content-Range off by one byte
//     ?ignorerangeafter=N       honour the first N ranged requests of this path, then answer 200 to the rest
//     ?fail=N&status=S          the first N GETs of this path answer S (default 503), with Retry-After: 1
//     ?status=S                 always answer S
//     ?disposition=VALUE        send Content-Disposition: VALUE
//     ?swap=NAME&after=N        from the N+1-th request of this path on, serve the file NAME instead (a new
//                               version appearing between two requests, e.g. between a probe and a resume)
//   /redirect/N/PATH            N redirects, then PATH (keeps the query)
//   /loop                       redirects to itself forever
//   /redirect-to?url=URL        one redirect to URL (any host, any scheme)
//     &setcookie=NAME=VALUE     ... setting that cookie
//   /files/NAME?auth=basic|digest[&user=U&pass=P]  401 unless the request authenticates (default user, pass)
//   /files/NAME?needcookie=NAME=VALUE  403 unless the request sends that cookie
//   /_requests                  GET: every request so far as JSON; DELETE: forget them
//   /_stats                     GET: {"active_streams": n, "max_active_streams": n} (the high-water mark)

final class Origin {
    let root: String
    var log: [[String: Any]] = []
    var failures: [String: Int] = [:]
    var hits: [String: Int] = [:]
    var rangedHits: [String: Int] = [:]
    var bodies: [String: Int] = [:]
    var maxActiveStreams = 0
    var activeStreams = 0
    let loop: EventLoop

    init(root: String, loop: EventLoop) {
        self.root = root
        self.loop = loop
    }

    func handle(_ exchange: HTTPExchange) {
        let request = exchange.message
        let path = request.path
        let query = request.query
        if path == "/_requests" {
            if request.method == "DELETE" {
                log.removeAll()
                failures.removeAll()
                hits.removeAll()
                rangedHits.removeAll()
                bodies.removeAll()
                maxActiveStreams = activeStreams
                return exchange.respond(HTTPResponse(status: 204))
            }
            return respondJSON(exchange, log)
        }
        if path == "/_stats" {
            return respondJSON(exchange, ["active_streams": activeStreams, "max_active_streams": maxActiveStreams])
        }
        let entryIndex = log.count
        log.append([
            "method": request.method, "path": path, "target": request.target,
            "range": request.header("Range") ?? NSNull(), "if_range": request.header("If-Range") ?? NSNull(),
            "headers": Dictionary(
                request.headers.map { ($0.name.lowercased(), $0.value) }, uniquingKeysWith: { a, _ in a }),
            "status": 0, "body_bytes": 0, "started_at": Date().timeIntervalSince1970,
        ])
        func answer(_ status: Int, _ headers: [(name: String, value: String)] = [], _ body: String = "") {
            log[entryIndex]["status"] = status
            exchange.respond(HTTPResponse(status: status, headers: headers, body: Array(body.utf8)))
        }
        if path == "/loop" { return answer(302, [("Location", "/loop")]) }
        if path == "/redirect-to", let location = query["url"] {
            return answer(
                302, [("Location", location)] + (query["setcookie"].map { [("Set-Cookie", $0 + "; Path=/")] } ?? []))
        }
        if path.hasPrefix("/redirect/") {
            let rest = path.dropFirst("/redirect/".count)
            guard let slash = rest.firstIndex(of: "/"), let n = Int(rest[..<slash]) else { return answer(400) }
            let target = n > 1 ? "/redirect/\(n - 1)\(rest[slash...])" : String(rest[slash...])
            let queryPart = request.target.firstIndex(of: "?").map { String(request.target[$0...]) } ?? ""
            return answer(302, [("Location", target + queryPart)])
        }
        guard path.hasPrefix("/files/") else { return answer(404, [], "not found\n") }
        if let kind = query["auth"],
            !authorized(
                kind, request, user: query["user"] ?? "user",
                password: query["pass"] ?? "pass")
        {
            let challenge =
                kind == "digest"
                ? "Digest realm=\"haul\", qop=\"auth\", nonce=\"\(UUID().uuidString)\", algorithm=MD5"
                : "Basic realm=\"haul\""
            return answer(401, [("WWW-Authenticate", challenge)], "who are you\n")
        }
        if let needed = query["needcookie"],
            !(request.header("Cookie") ?? "").split(separator: ";").contains(where: {
                $0.trimmingCharacters(in: .whitespaces) == needed
            })
        {
            return answer(403, [], "no cookie\n")
        }
        if let status = query["status"].flatMap(Int.init), query["fail"] == nil {
            return answer(status, [("Retry-After", "1")], "forced status\n")
        }
        if request.method == "HEAD", query["nohead"] != nil { return answer(405, [("Allow", "GET")]) }
        if let n = query["fail"].flatMap(Int.init), request.method == "GET" {
            let seen = failures[path, default: 0]
            if seen < n {
                failures[path] = seen + 1
                return answer(Int(query["status"] ?? "503") ?? 503, [("Retry-After", "1")], "try again\n")
            }
        }
        var name = String(path.dropFirst("/files/".count))
        let hit = hits[path, default: 0]
        hits[path] = hit + 1
        if let swap = query["swap"], let after = query["after"].flatMap(Int.init), hit >= after { name = swap }
        guard !name.contains(".."), let fd = Optional(open(root + "/" + name, O_RDONLY)), fd >= 0 else {
            return answer(404, [], "no such file\n")
        }
        var info = stat()
        fstat(fd, &info)
        let size = Int64(info.st_size)
        let mtimeNanos = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
        let etag = "\"\(size)-\(mtimeNanos)-\(info.st_ino)\""
        let lastModified = httpDate(TimeInterval(info.st_mtim.tv_sec))

        var headers: [(name: String, value: String)] = [("Content-Type", "application/octet-stream")]
        let ranges = query["norange"] == nil
        if ranges { headers.append(("Accept-Ranges", "bytes")) }
        if query["novalidator"] == nil {
            headers.append(("ETag", etag))
            log[entryIndex]["etag_sent"] = etag
            headers.append(("Last-Modified", lastModified))
        }
        if let disposition = query["disposition"] { headers.append(("Content-Disposition", disposition)) }

        var start: Int64 = 0
        var end = size - 1
        var status = 200
        var rangedHit = 0
        if request.method == "GET", request.header("Range") != nil {
            rangedHit = rangedHits[path, default: 0]
            rangedHits[path] = rangedHit + 1
        }
        let ignoreThisRange = query["ignorerangeafter"].flatMap(Int.init).map { rangedHit >= $0 } ?? false
        if ranges, query["ignorerange"] == nil, !ignoreThisRange, let rangeHeader = request.header("Range"),
            rangeHeader.hasPrefix("bytes=")
        {
            let ifRange = request.header("If-Range")
            let current = ifRange == nil || ifRange == etag || ifRange == lastModified
            if current {
                let spec = rangeHeader.dropFirst(6).split(
                    separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
                if spec.count == 2 {
                    if spec[0].isEmpty, let suffix = Int64(spec[1]) {
                        start = max(0, size - suffix)
                    } else if let first = Int64(spec[0]) {
                        start = first
                        if let last = Int64(spec[1]) { end = min(last, size - 1) }
                    }
                    if start >= size || start > end {
                        close(fd)
                        return answer(416, [("Content-Range", "bytes */\(size)")])
                    }
                    status = 206
                    let off = query["badrange"].flatMap(Int.init).map { rangedHit < $0 ? 1 : 0 } ?? 0
                    headers.append(("Content-Range", "bytes \(start + Int64(off))-\(end)/\(size)"))
                }
            }
        }
        let length = max(0, end - start + 1)
        if query["nolength"] == nil { headers.append(("Content-Length", "\(length)")) }
        let cut = query["cut"].flatMap { Int64($0) }
        if cut != nil { headers.append(("Connection", "close")) }
        log[entryIndex]["status"] = status
        if request.method == "HEAD" {
            close(fd)
            return exchange.respond(HTTPResponse(status: status, headers: headers))
        }
        var pace = query["rate"].flatMap { Int($0) }
        if let from = query["slowfrom"].flatMap({ Int64($0) }), start >= from {
            pace = query["slowrate"].flatMap { Int($0) }
        }
        let body = bodies[path, default: 0]
        bodies[path] = body + 1
        let stallsLeft = query["stalls"].flatMap(Int.init).map { body < $0 } ?? true
        let stall = stallsLeft ? query["stall"].flatMap { Int64($0) } : nil
        let stream = Stream(
            origin: self, exchange: exchange, fd: fd, offset: start, remaining: length,
            limit: (cut ?? stall).map { min($0, length) } ?? length, stalls: stall != nil,
            rate: pace, logIndex: entryIndex)
        stream.begin(status: status, headers: headers)
    }

    /// Whether the request carries `user` and `password` as `kind` (basic or digest) authentication.
    func authorized(_ kind: String, _ request: HTTPRequest, user: String, password: String) -> Bool {
        guard let header = request.header("Authorization") else { return false }
        if kind == "basic" {
            return header == "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
        }
        guard header.hasPrefix("Digest ") else { return false }
        var fields: [String: String] = [:]
        for part in header.dropFirst(7).split(separator: ",") {
            let pair = part.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            guard pair.count == 2 else { continue }
            fields[String(pair[0])] = pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        }
        func md5(_ text: String) -> String { Digest.hex(Digest.of(Array(text.utf8), .md5)) }
        guard fields["username"] == user, let realm = fields["realm"], let nonce = fields["nonce"],
            let uri = fields["uri"], let nc = fields["nc"], let cnonce = fields["cnonce"],
            let qop = fields["qop"]
        else { return false }
        let ha1 = md5("\(user):\(realm):\(password)"), ha2 = md5("\(request.method):\(uri)")
        return fields["response"] == md5("\(ha1):\(nonce):\(nc):\(cnonce):\(qop):\(ha2)")
    }

    func respondJSON(_ exchange: HTTPExchange, _ value: Any) {
        let data = (try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys])) ?? Data("null".utf8)
        exchange.respond(HTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: Array(data)))
    }

    func httpDate(_ seconds: TimeInterval) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: Date(timeIntervalSince1970: seconds))
    }
}

/// One body being streamed: read with pread, sent a chunk at a time as the previous one drains, or paced by a
/// timer when trickling.
final class Stream {
    unowned let origin: Origin
    let exchange: HTTPExchange
    let fd: Int32
    var offset: Int64
    var remaining: Int64
    /// Bytes to send before ending (less than `remaining` when cutting the body short).
    var limit: Int64
    /// At `limit`, go quiet instead of ending the reply.
    let stalls: Bool
    let rate: Int?
    let logIndex: Int
    var timer: LoopTimer?
    var buffer: [UInt8]
    var finished = false
    /// Paced: a tick's bytes still wait in the connection's buffer (the client reads slower than the pace), so the
    /// next tick sends nothing. A real server's rate limit holds to what the socket takes, too.
    var waiting = false

    init(
        origin: Origin, exchange: HTTPExchange, fd: Int32, offset: Int64, remaining: Int64, limit: Int64,
        stalls: Bool, rate: Int?, logIndex: Int
    ) {
        self.stalls = stalls
        self.origin = origin
        self.exchange = exchange
        self.fd = fd
        self.offset = offset
        self.remaining = remaining
        self.limit = limit
        self.rate = rate
        self.logIndex = logIndex
        buffer = [UInt8](repeating: 0, count: max(256 * 1024, (rate ?? 0) / 20))
    }

    func begin(status: Int, headers: [(name: String, value: String)]) {
        origin.activeStreams += 1
        origin.maxActiveStreams = max(origin.maxActiveStreams, origin.activeStreams)
        exchange.onClose = { [self] in finish(closeEarly: true) }
        exchange.startStream(status: status, headers: headers)
        if let rate {
            timer = LoopTimer(loop: origin.loop, delay: 0.05, repeating: true) { [self] in
                if !waiting { sendNext(max(1, rate / 20)) }
            }
            timer?.start()
        } else {
            sendNext(buffer.count)
        }
    }

    func sendNext(_ size: Int) {
        guard !finished else { return }
        let count = Int(min(Int64(size), min(limit, Int64(buffer.count))))
        if count == 0 {
            if stalls, remaining > 0 { return }
            return finish(closeEarly: false)
        }
        let got = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, off_t(offset)) }
        guard got > 0 else { return finish(closeEarly: false) }
        offset += Int64(got)
        limit -= Int64(got)
        remaining -= Int64(got)
        origin.log[logIndex]["body_bytes"] = (origin.log[logIndex]["body_bytes"] as? Int64 ?? 0) + Int64(got)
        let paced = rate != nil
        waiting = paced
        buffer.withUnsafeBytes { bytes in
            exchange.send(UnsafeRawBufferPointer(rebasing: bytes[0..<got])) { [self] in
                if paced { waiting = false } else { sendNext(buffer.count) }
            }
        }
    }

    func finish(closeEarly: Bool) {
        guard !finished else { return }
        finished = true
        origin.log[logIndex]["ended_at"] = Date().timeIntervalSince1970
        timer?.cancel()
        timer = nil
        close(fd)
        origin.activeStreams -= 1
        if !closeEarly { exchange.end() }
    }
}

var root = "."
var listen = "127.0.0.1:0"
var args = CommandLine.arguments.dropFirst().makeIterator()
while let arg = args.next() {
    switch arg {
    case "--root": root = args.next() ?? root
    case "--listen": listen = args.next() ?? listen
    default:
        FileHandle.standardError.write(Data("TestOrigin: unknown argument \(arg)\n".utf8))
        exit(2)
    }
}
signal(SIGPIPE, SIG_IGN)
do {
    let loop = try EventLoop()
    let origin = Origin(root: root, loop: loop)
    let server = try HTTPServer(loop: loop, timeout: 120) { origin.handle($0) }
    let colon = listen.lastIndex(of: ":")!
    let port = try server.bind(host: String(listen[..<colon]), port: UInt16(listen[listen.index(after: colon)...])!)
    FileHandle.standardOutput.write(Data("origin listening on http://\(listen[..<colon]):\(port)\n".utf8))
    loop.onSignal(SIGTERM) { loop.stop() }
    loop.run()
    withExtendedLifetime(server) {}
} catch {
    FileHandle.standardError.write(Data("TestOrigin: \(error)\n".utf8))
    exit(1)
}
