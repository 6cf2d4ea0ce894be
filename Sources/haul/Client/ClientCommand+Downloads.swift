import FoundationEssentials
import Glibc
import HaulAPI
import HaulCore
import HaulLoop

extension ClientCommand {
    /// What `haul add`'s flag of `option` puts in the request, by the option's kind; nil when it is not given.
    private static func optionValue(
        _ option: DownloadOption, _ flag: DownloadOption.Flag, _ options: Options
    )
        throws(Stop) -> JSONValue?
    {
        switch option.kind {
        case .boolean:
            return options.flag(flag.name) ? .bool(true) : nil
        case .integer:
            guard let text = options.value(flag.name) else { return nil }
            guard let n = Int64(text) else {
                throw .usage("--\(flag.name) takes a number, not '\(text)'", command: options.spec)
            }
            return JSONValue(n)
        case .decimal:
            guard let text = options.value(flag.name) else { return nil }
            guard let n = Double(text), n.isFinite else {
                throw .usage("--\(flag.name) takes a number, not '\(text)'", command: options.spec)
            }
            return .number(n)
        case .bytes:
            guard let text = options.value(flag.name) else { return nil }
            guard let bytes = ByteSize.parse(text) else {
                throw .usage(
                    "--\(flag.name) takes bytes (per second) like 500k or 1.5M, not '\(text)'",
                    command: options.spec)
            }
            return JSONValue(bytes)
        case .text:
            guard let text = options.value(flag.name) else { return nil }
            // A file's text (cookies.txt), or the value itself when it is no file but reads as one (name=value).
            if flag.readsFile, !(text.contains("=") && access(text, F_OK) != 0) {
                return .string(try readText(text))
            }
            return .string(text)
        case .headers:
            var headers: [(String, JSONValue)] = []
            for header in options.values(flag.name) {
                guard let colon = header.firstIndex(of: ":") else {
                    throw .usage("--\(flag.name) takes 'Name: value', not '\(header)'", command: options.spec)
                }
                headers.append(
                    (
                        String(header[..<colon]),
                        .string(header[header.index(after: colon)...].trimmingSpaces())
                    ))
            }
            return headers.isEmpty ? nil : .object(headers)
        }
    }

    /// The most URLs one `haul add` takes, and the largest list file it reads.
    static let maxURLs = 100_000
    static let maxListBytes = 64 << 20

    static func add(_ client: Client, _ options: Options) throws(Stop) {
        var urls = options.positional
        if let input = options.value("input") { urls += try readURLs(input) }
        guard !urls.isEmpty else { throw .usage("give at least one URL (or -i FILE)", command: options.spec) }
        guard urls.count <= ClientCommand.maxURLs else {
            throw .usage("at most \(ClientCommand.maxURLs) URLs at once, not \(urls.count)", command: options.spec)
        }
        var shared: [(String, JSONValue)] = []
        let mirrors = options.values("mirror")
        if !mirrors.isEmpty {
            guard urls.count == 1 else {
                throw .usage("--mirror is another source of one download, not \(urls.count)", command: options.spec)
            }
            shared.append(("mirrors", .array(mirrors.map { .string($0) })))
        }
        for option in DownloadOptions.all {
            guard let flag = option.flag, let value = try optionValue(option, flag, options) else { continue }
            guard !flag.oneURL || urls.count == 1 else {
                throw .usage("--\(flag.name) is for one URL, not \(urls.count)", command: options.spec)
            }
            shared.append((option.name, value))
        }
        let wait = options.flag("wait")

        // The sequence before the POST: following from it, no event of the new downloads can be missed.
        let sequence = wait ? try client.call("GET", "/stats")["sequence"]?.integerValue : nil
        if urls.count == 1 {
            let (status, json) = try client.exchange(
                "POST", "/downloads",
                body: .object([try source(urls[0])] + shared))
            let download = DownloadView(json)
            printOutput(download.id)
            // 200, not 201: this URL into this place is in the list already, and that download is the answer.
            if status == 200 { printError(alreadyListed(urls[0], download)) }
            guard wait else { return }
            if download.state == "paused" {
                throw Stop(
                    status: .failed,
                    message: "\(download.id) is paused: haul resume \(download.id) lets it go "
                        + "on, haul watch \(download.id) follows it")
            }
            try follow(client, download, after: sequence)
            return
        }
        // A long list goes as batches of the most one request may add, each answered before the next is sent.
        var added: [DownloadView] = []
        var refused = 0
        for start in stride(from: 0, to: urls.count, by: API.maxBatch) {
            let batch = urls[start..<min(start + API.maxBatch, urls.count)]
            var items: [JSONValue] = []
            for url in batch { items.append(.object([try source(url)] + shared)) }
            let body = JSONValue.object([("downloads", .array(items))])
            let answer = try client.call("POST", "/downloads", body: body)
            guard case .array(let results)? = answer["results"], results.count == batch.count else {
                throw Stop(status: .failed, message: "the server's answer to the batch lists no results")
            }
            for (url, result) in zip(batch, results) {
                if let download = result["download"] {
                    let view = DownloadView(download)
                    printOutput(view.id)
                    if result["status"]?.integerValue == 200 { printError(alreadyListed(url, view)) }
                    added.append(view)
                } else {
                    refused += 1
                    printError("haul: \(url): \(Client.message(of: result["problem"] ?? .null))")
                }
            }
        }
        if wait, !added.isEmpty { try followAll(client, added, refused: refused, after: sequence) }
        // Each refusal is printed already.
        if refused > 0 { throw Stop(status: .failed, message: "") }
    }

    /// What `haul add` says of a URL whose download is in the list already (the same URL into the same place).
    private static func alreadyListed(_ url: String, _ d: DownloadView) -> String {
        "haul: \(url) is in the list already: \(d.id) (\(d.name), \(d.state))"
    }

    /// The URLs in `path` (or standard input for "-"), one a line; blank lines and # comments are skipped.
    private static func readURLs(_ path: String) throws(Stop) -> [String] {
        try readText(path).split(whereSeparator: \.isNewline)
            .map { $0.trimming(while: \.isWhitespace) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
    }

    /// The text of `path` (standard input for "-"), at most `maxListBytes`.
    private static func readText(_ path: String) throws(Stop) -> String {
        String(decoding: try readBytes(path), as: UTF8.self)
    }

    /// What a download's source is in a request: `torrent` and the file's bytes in base64 for a local `.torrent`
    /// file, else `url`.
    static func source(_ argument: String) throws(Stop) -> (String, JSONValue) {
        guard argument.lowercased().hasSuffix(".torrent"), !argument.contains("://"), access(argument, R_OK) == 0
        else { return ("url", .string(argument)) }
        return ("torrent", .string(Base64.encode(try readBytes(argument))))
    }

    /// The bytes of `path` (standard input for "-"), at most `maxListBytes`.
    private static func readBytes(_ path: String) throws(Stop) -> [UInt8] {
        var bytes: [UInt8] = []
        let fd = path == "-" ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw Stop(status: .failed, message: "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        defer { if fd != STDIN_FILENO { close(fd) } }
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else {
                throw Stop(status: .failed, message: "cannot read \(path): \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            bytes += buffer[0..<n]
            guard bytes.count <= ClientCommand.maxListBytes else {
                throw Stop(status: .failed, message: "\(path) is over \(ClientCommand.maxListBytes >> 20) MiB")
            }
        }
        return bytes
    }

    /// What `ls --sort` takes, each also with `-` before it.
    static let sortKeys = ["created", "name", "size", "progress", "speed", "queue"]

    static func list(_ client: Client, _ options: Options) throws(Stop) {
        _ = try options.positionals(0...0, "ls takes no arguments")
        var filters = ""
        // `retrying` is no state of its own: the downloads waiting to try again, among the running ones.
        var wanted: Set<String>?
        if let text = options.value("state") {
            let states = try parseStates(text, extra: ["retrying"], spec: options.spec)
            wanted = Set(states)
            var asked = Set(states.filter { $0 != "retrying" })
            if states.contains("retrying") { asked.formUnion(["probing", "downloading"]) }
            filters += "&state=" + Client.escape(asked.sorted().joined(separator: ","))
        }
        if let search = options.value("search") { filters += "&q=" + Client.escape(search) }
        if let sort = options.value("sort") {
            guard sortKeys.contains(sort.hasPrefix("-") ? String(sort.dropFirst()) : sort) else {
                throw .usage(
                    "--sort takes " + sortKeys.joined(separator: ", ") + " (-KEY for descending), not '\(sort)'",
                    command: options.spec)
            }
            filters += "&sort=" + Client.escape(sort)
        }
        if let category = options.value("category") {
            if let problem = Validate.categoryName(category) {
                throw .usage("--category: \(problem)", command: options.spec)
            }
            filters += "&category=" + Client.escape(category)
        }
        var all: [JSONValue] = []
        var cursor: String?
        repeat {
            var path = "/downloads?limit=1000" + filters
            if let cursor { path += "&cursor=" + Client.escape(cursor) }
            let page = try client.call("GET", path)
            if case .array(let downloads) = page["downloads"] { all += downloads }
            cursor = page["next_cursor"]?.stringValue
        } while cursor != nil
        if let wanted {
            all = all.filter { item in
                let d = DownloadView(item)
                return wanted.contains(d.state) || wanted.contains("retrying") && d.retryIn != nil
            }
        }
        if options.flag("json") {
            printOutput(JSONValue.array(all).serialized())
            return
        }
        let width =
            Terminal.columns(STDOUT_FILENO)
            ?? ProcessInfo.processInfo.environment["COLUMNS"].flatMap(Int.init).flatMap { $0 > 0 ? $0 : nil } ?? 80
        for line in ListTable.lines(all.map(DownloadView.init), width: width) { printOutput(line) }
    }

    /// Runs `body` for every id: one that fails is reported (once) and the rest go on; then the exit status is 1.
    /// No server reachable stops at once, as every other id would fail the same way.
    static func eachID(_ ids: [String], _ body: (String) throws(Stop) -> Void) throws(Stop) {
        var failed = 0
        for id in ids {
            do {
                try body(id)
            } catch  where error.status == .unreachable {
                throw error
            } catch {
                printError("haul: \(id): \(error.message)")
                failed += 1
            }
        }
        if failed > 0 { throw Stop(status: .failed, message: "") }
    }
}
