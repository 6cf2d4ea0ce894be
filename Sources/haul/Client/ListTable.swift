/// `haul ls` as a table that fits the terminal: the id's first characters, state, done, size, speed and ETA (for a
/// failed download, its error's code), category (when any download has one, narrower on a narrow terminal) and the
/// name, which takes what is left and is cut to it; then a line of totals.
enum ListTable {
    /// The columns before the name: header, width, and whether the values are numbers (right-aligned).
    private struct Column {
        let header: String
        let width: Int
        var numeric = false
        let value: (DownloadView) -> String
    }

    /// The id's first characters that tell it from every other listed (at least 6), as `haul ls --help`
    /// promises: every command takes them wherever it takes an id.
    static func idLength(_ ids: [String]) -> Int {
        let sorted = ids.sorted()
        var length = 6
        for (a, b) in zip(sorted, sorted.dropFirst()) {
            let common = zip(a, b).prefix { $0 == $1 }.count
            length = max(length, min(common + 1, max(a.count, b.count)))
        }
        return min(length, ids.map(\.count).max() ?? length)
    }

    /// The least a name keeps on a narrow terminal; the category column gives way first.
    static let minimumName = 10

    static func lines(_ downloads: [DownloadView], width: Int) -> [String] {
        let idLength = idLength(downloads.map(\.id))
        var columns = [
            Column(header: "ID", width: max(2, idLength)) { String($0.id.prefix(idLength)) },
            Column(header: "STATE", width: 11) { $0.retryIn != nil ? "retrying" : $0.state },
            Column(header: "DONE", width: 4, numeric: true) { $0.percent },
            Column(header: "SIZE", width: 7, numeric: true) { d in d.total.map(Format.shortBytes) ?? "unknown" },
            Column(header: "SPEED", width: 9, numeric: true) { d in
                d.isRunning && d.speed > 0 ? Format.shortBytes(Int64(d.speed)) + "/s" : ""
            },
            Column(header: "ETA", width: 6, numeric: true) { d in
                if let wait = d.retryIn { return Format.shortDuration(wait) }
                return d.isRunning ? d.eta.map(Format.shortDuration) ?? "" : ""
            },
        ]
        let categories = downloads.compactMap(\.category)
        if !categories.isEmpty {
            // As wide as its longest (8 to 12), narrower where the terminal would leave the name too little.
            let before = columns.reduce(0) { $0 + $1.width + 1 }
            let room = width - 1 - before - 1 - minimumName
            let wanted = min(12, max(8, categories.map(\.count).max() ?? 0))
            let categoryWidth = max(4, min(wanted, room))
            columns.append(
                Column(header: categoryWidth >= 8 ? "CATEGORY" : "CAT", width: categoryWidth) {
                    cut($0.category ?? "", categoryWidth)
                })
        }
        // The last column stays free: some terminals wrap a line that fills it.
        let fixed = columns.reduce(0) { $0 + $1.width + 1 }
        let nameWidth = max(8, width - 1 - fixed)
        // A failed download has no speed or ETA: those two cells together say why it failed.
        let speed = columns.firstIndex { $0.header == "SPEED" }!
        let why = columns[speed].width + 1 + columns[speed + 1].width
        func line(_ cells: [String], _ name: String, failure: String? = nil) -> String {
            var parts: [String] = []
            for (index, (column, text)) in zip(columns, cells).enumerated() {
                if let failure, index == speed {
                    parts.append(Format.column(cut(failure, why), why))
                } else if failure != nil, index == speed + 1 {
                    continue
                } else {
                    parts.append(column.numeric ? Format.right(text, column.width) : Format.column(text, column.width))
                }
            }
            return parts.joined(separator: " ") + " " + name
        }
        var lines = [line(columns.map(\.header), "NAME")]
        for d in downloads {
            let failure = d.state == "failed" ? d.error?.code ?? "failed" : nil
            lines.append(line(columns.map { $0.value(d) }, name(d, width: nameWidth), failure: failure))
        }
        lines.append(totals(downloads))
        return lines
    }

    /// The name cut to `width`, with the reason of a wait to retry kept after it where it fits (a failed one's is
    /// in its own cell).
    private static func name(_ d: DownloadView, width: Int) -> String {
        guard d.retryIn != nil, let code = d.lastError?.code else {
            return cut(d.name, width)
        }
        let note = " (\(code))"
        guard width - note.count >= 8 else { return cut(d.name, width) }
        return cut(d.name, width - note.count) + note
    }

    private static func cut(_ text: String, _ width: Int) -> String {
        text.count > width ? String(text.prefix(max(0, width - 1))) + "…" : text
    }

    /// `5 downloads: 2 downloading, 1 queued, 1 paused, 1 completed; 3.40 MiB/s`.
    static func totals(_ downloads: [DownloadView]) -> String {
        guard !downloads.isEmpty else { return "no downloads" }
        var counts: [String: Int] = [:]
        for d in downloads { counts[d.retryIn != nil ? "retrying" : d.state, default: 0] += 1 }
        let order = [
            "downloading", "probing", "verifying", "seeding", "retrying", "queued", "paused", "completed", "failed",
        ]
        let parts = order.compactMap { state in counts[state].map { "\($0) \(state)" } }
        let speed = downloads.filter(\.isRunning).reduce(0.0) { $0 + $1.speed }
        return "\(downloads.count) download\(downloads.count == 1 ? "" : "s"): " + parts.joined(separator: ", ")
            + (speed > 0 ? "; \(Format.bytes(Int64(speed)))/s" : "")
    }
}
