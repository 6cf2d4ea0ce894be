/// `haul ls` as a table that fits the terminal: id, state, done, size, speed, ETA, category (when any download has
/// one) and the name, which takes what is left and is cut to it; then a line of totals.
enum ListTable {
    /// The columns before the name: header, width, and whether the values are numbers (right-aligned).
    private struct Column {
        let header: String
        let width: Int
        var numeric = false
        let value: (DownloadView) -> String
    }

    static func lines(_ downloads: [DownloadView], width: Int) -> [String] {
        var columns = [
            Column(header: "ID", width: max(15, downloads.map(\.id.count).max() ?? 0)) { $0.id },
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
            columns.append(Column(header: "CATEGORY", width: min(12, max(8, categories.map(\.count).max() ?? 0))) {
                $0.category ?? ""
            })
        }
        // The last column stays free: some terminals wrap a line that fills it.
        let fixed = columns.reduce(0) { $0 + $1.width + 1 }
        let nameWidth = max(8, width - 1 - fixed)
        func line(_ cells: [String], _ name: String) -> String {
            zip(columns, cells).map { column, text in
                column.numeric ? Format.right(text, column.width) : Format.column(text, column.width)
            }.joined(separator: " ") + " " + name
        }
        var lines = [line(columns.map(\.header), "NAME")]
        for d in downloads {
            lines.append(line(columns.map { $0.value(d) }, name(d, width: nameWidth)))
        }
        lines.append(totals(downloads))
        return lines
    }

    /// The name cut to `width`, with the error code of a failed download (or the reason of a wait to retry) kept
    /// after it where it fits.
    private static func name(_ d: DownloadView, width: Int) -> String {
        guard let code = d.error?.code ?? (d.retryIn != nil ? d.lastError?.code : nil) else {
            return cut(d.name, width)
        }
        let note = " (\(code))"
        guard width - note.count >= 8 else { return cut(d.name, width) }
        return cut(d.name, width - note.count) + note
    }

    private static func cut(_ text: String, _ width: Int) -> String {
        text.count > width ? String(text.prefix(width - 1)) + "…" : text
    }

    /// `5 downloads: 2 downloading, 1 queued, 1 paused, 1 completed; 3.40 MiB/s`.
    static func totals(_ downloads: [DownloadView]) -> String {
        guard !downloads.isEmpty else { return "no downloads" }
        var counts: [String: Int] = [:]
        for d in downloads { counts[d.retryIn != nil ? "retrying" : d.state, default: 0] += 1 }
        let order = ["downloading", "probing", "verifying", "retrying", "queued", "paused", "completed", "failed"]
        let parts = order.compactMap { state in counts[state].map { "\($0) \(state)" } }
        let speed = downloads.filter(\.isRunning).reduce(0.0) { $0 + $1.speed }
        return "\(downloads.count) download\(downloads.count == 1 ? "" : "s"): " + parts.joined(separator: ", ")
            + (speed > 0 ? "; \(Format.bytes(Int64(speed)))/s" : "")
    }
}
