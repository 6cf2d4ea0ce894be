import FoundationEssentials
import Glibc
import HaulCore
import HaulLoop

/// `--watch-dir`: a list of links dropped into a folder (`NAME.txt`, aria2's input-file format: one download a line,
/// its mirrors after tabs, `# comments`, aria2's options indented below it where Haul has the option) is added as
/// one batch once it is written and closed, then renamed `NAME.added`, or `NAME.failed` with the reason of each
/// line refused (the others are added). Lists there when the server starts are read then.
///
/// A list read again after a crash (before its rename) is not added twice: the batch is remembered under the
/// file's identity and modification time, as an Idempotency-Key is.
final class WatchFolder {
    private let path: String
    private let operations: Operations
    private let clock: Clock
    private let log: Logger?
    private var watch: DirectoryWatch?
    /// Lists written and closed, each read once nothing has touched it for `settle` seconds.
    private var due: [String: ClockTimer] = [:]
    static let settle = 0.5
    /// The largest list read, and the most lines of downloads in one.
    static let maxBytes = 4 << 20
    static let maxDownloads = 10_000

    init(path: String, operations: Operations, loop: EventLoop, log: Logger?) throws(FileError) {
        self.path = path
        self.operations = operations
        clock = operations.clock
        self.log = log
        watch = try DirectoryWatch(loop: loop, path: path) { [unowned self] change in self.changed(change) }
        scan()
    }

    private func changed(_ change: DirectoryWatch.Change) {
        switch change {
        case .ready(let name):
            guard WatchFolder.isList(name) else { return }
            due[name]?.cancel()
            due[name] = clock.after(WatchFolder.settle) { [unowned self] in
                self.due[name] = nil
                self.read(name)
            }
        case .writing(let name):
            // Its writer is at it again: it is read after the next close.
            due.removeValue(forKey: name)?.cancel()
        case .overflow:
            scan()
        }
    }

    /// Reads every list in the folder now (at start, and when the kernel dropped changes).
    private func scan() {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return }
        for name in names.sorted() where WatchFolder.isList(name) && due[name] == nil { read(name) }
    }

    static func isList(_ name: String) -> Bool {
        !name.hasPrefix(".") && name.lowercased().hasSuffix(".txt") && name.utf8.count > 4
    }

    private func read(_ name: String) {
        guard let folder = try? ConfinedDirectory(root: path, relative: "", create: false),
            let info = folder.status(name), info.st_mode & S_IFMT == S_IFREG
        else { return }
        guard Int(info.st_size) <= WatchFolder.maxBytes,
            let text = folder.readText(name, limit: WatchFolder.maxBytes + 1),
            text.utf8.count == Int(info.st_size)
        else {
            return finish(
                name, in: folder, text: "",
                report: [
                    "the list is over \(WatchFolder.maxBytes) bytes or "
                        + "cannot be read whole"
                ], added: 0)
        }
        let entries = WatchFolder.parse(text, root: operations.config.downloadRoot)
        var report: [String] = []
        var requests: [(line: Int, request: NewDownload)] = []
        for entry in entries {
            switch entry.outcome {
            case .success(let request): requests.append((entry.line, request))
            case .failure(let reason): report.append("line \(entry.line): \(reason)")
            }
        }
        if requests.count > WatchFolder.maxDownloads {
            for extra in requests[WatchFolder.maxDownloads...] {
                report.append("line \(extra.line): a list adds at most \(WatchFolder.maxDownloads) downloads")
            }
            requests.removeLast(requests.count - WatchFolder.maxDownloads)
        }
        // Read again after a crash before the rename: the same file (identity and time) was added already.
        let key = Idempotency(
            key: "watch:\(name):\(info.st_dev):\(info.st_ino):\(info.st_mtim.tv_sec)."
                + "\(info.st_mtim.tv_nsec)", requestHash: Digest.hex(Digest.sha256(Array(text.utf8))))
        var added = 0
        do throws(EngineError) {
            if let stored = try operations.batchAnswer(key) {
                added = Int(stored) ?? 0
            } else if !requests.isEmpty {
                let outcomes = try operations.add(batch: requests.map(\.request), atomic: false)
                for (index, outcome) in outcomes.enumerated() {
                    switch outcome {
                    case .added, .existing: added += 1
                    case .refused(let error):
                        report.append("line \(requests[index].line): \(Problem(error).detail)")
                    }
                }
                try operations.rememberBatchAnswer(key, answer: String(added))
            }
        } catch {
            // The store refused: the list stays, and is read again at the next change or start.
            return log?.warning("cannot add a watched list", ["file.name": name, "error": Problem(error).detail]) ?? ()
        }
        finish(
            name, in: folder, text: text, report: report.sorted { WatchFolder.lineOf($0) < WatchFolder.lineOf($1) },
            added: added)
    }

    private static func lineOf(_ text: String) -> Int {
        Int(text.dropFirst(5).prefix { $0.isNumber }) ?? 0
    }

    /// Writes `NAME.added` or `NAME.failed` (the list, then what became of it), then removes `NAME.txt`.
    private func finish(_ name: String, in folder: ConfinedDirectory, text: String, report: [String], added: Int) {
        let stem = String(name.dropLast(4))
        let suffix = report.isEmpty ? ".added" : ".failed"
        var summary = "\n# Haul \(Timestamp.rfc3339(Date())): \(added) added"
        if !report.isEmpty { summary += ", \(report.count) refused" }
        let body =
            text + (text.hasSuffix("\n") || text.isEmpty ? "" : "\n") + summary + "\n"
            + report.map { "# " + $0.replacing("\n", with: " ") + "\n" }.joined()
        var target = stem + suffix
        for n in 1..<1000 where folder.exists(target) { target = "\(stem) (\(n))\(suffix)" }
        do {
            try folder.writeText(body, to: target)
            try folder.remove(name)
            try folder.sync()
        } catch {
            log?.warning("cannot rename a watched list", ["file.name": name, "error": "\(error)"])
        }
        let fields = ["file.name": name, "downloads.added": String(added), "lines.refused": String(report.count)]
        if report.isEmpty {
            log?.info("watched list added", fields)
        } else {
            log?.warning("watched list refused in part", fields)
        }
    }

    /// One download of a list: where it starts, and the request or why not.
    struct Entry {
        let line: Int
        let outcome: Result<NewDownload, Refusal>
    }

    struct Refusal: Error, CustomStringConvertible {
        let description: String
    }

    /// The downloads of a list's text, in order.
    static func parse(_ text: String, root: String) -> [Entry] {
        var entries: [Entry] = []
        var current: (line: Int, urls: [String], options: [(String, JSONValue)], problem: String?)?
        func close() {
            guard let entry = current else { return }
            current = nil
            if let problem = entry.problem {
                return entries.append(Entry(line: entry.line, outcome: .failure(Refusal(description: problem))))
            }
            entries.append(Entry(line: entry.line, outcome: request(entry.urls, entry.options, root: root)))
        }
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.hasSuffix("\r") ? raw.dropLast() : raw
            let trimmed = line.drop { $0 == " " || $0 == "\t" }
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            if line.first == " " || line.first == "\t" {
                // An option of the download above: name=value.
                guard current != nil else {
                    entries.append(
                        Entry(
                            line: index + 1,
                            outcome: .failure(
                                Refusal(
                                    description: "an option line "
                                        + "before any URL"))))
                    continue
                }
                guard let equals = trimmed.firstIndex(of: "=") else {
                    if current?.problem == nil { current?.problem = "line \(index + 1) is not an option (name=value)" }
                    continue
                }
                let name = String(trimmed[..<equals]).trimmingSpaces()
                let value = String(trimmed[trimmed.index(after: equals)...]).trimmingSpaces()
                // A header may be given on several lines, as aria2 takes it.
                if name == "header", let at = current?.options.firstIndex(where: { $0.0 == "header" }),
                    case .array(let lines)? = current?.options[at].1
                {
                    current?.options[at].1 = .array(lines + [.string(value)])
                } else {
                    current?.options.append((name, name == "header" ? .array([.string(value)]) : .string(value)))
                }
                continue
            }
            close()
            let urls = line.split(separator: "\t").map { String($0).trimmingSpaces() }
                .filter { !$0.isEmpty }
            current = (index + 1, urls, [], nil)
        }
        close()
        return entries
    }

    /// A download from a line's URLs and its aria2 options, validated as POST /downloads validates one.
    private static func request(
        _ urls: [String], _ options: [(String, JSONValue)], root: String
    )
        -> Result<NewDownload, Refusal>
    {
        guard urls.count <= API.maxMirrors + 1 else {
            return .failure(Refusal(description: "at most \(API.maxMirrors + 1) URLs of one file"))
        }
        var members: [(String, JSONValue)] = [("urls", .array(urls.map { .string($0) }))]
        do {
            // `dir` as aria2 takes it: under the download root (absolute or not).
            members += try Aria2Options.downloadMembers(options, root: root, sources: urls.count)
        } catch {
            return .failure(Refusal(description: error.message))
        }
        var body = RequestBody(members: members)
        let request = API.newDownload(&body)
        if !body.errors.isEmpty {
            return .failure(
                Refusal(
                    description: body.errors.map { "\($0.field): \($0.message)" }
                        .joined(separator: "; ")))
        }
        return .success(request)
    }
}
