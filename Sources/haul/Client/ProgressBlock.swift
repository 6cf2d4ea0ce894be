import FoundationEssentials
import Glibc
import HaulLoop

/// Several downloads' progress on a terminal, as `haul add A B --wait` draws it: a line each (name, bar, bytes,
/// speed, ETA) and a total line, redrawn in place and sized to the terminal. More downloads than rows: the running
/// ones are shown first, then the waiting, then the finished, and a line says how many more there are. A notice
/// (a lost and found event stream) goes on a line of its own above the block.
final class ProgressBlock {
    private let order: [String]
    private var downloads: [String: DownloadView]
    /// Lines drawn at the last redraw; the cursor is at the end of the last.
    private var drawnLines = 0
    private var tailWidth = 0
    private var lastDrawAt = -1.0

    init(_ downloads: [DownloadView]) {
        order = downloads.map(\.id)
        self.downloads = Dictionary(downloads.map { ($0.id, $0) }, uniquingKeysWith: { _, last in last })
    }

    /// The terminal's size now (it may be resized while the block runs), else COLUMNS and LINES, else 80 x 24.
    private var size: (columns: Int, rows: Int) {
        let environment = ProcessInfo.processInfo.environment
        let columns = Terminal.columns(STDERR_FILENO) ?? environment["COLUMNS"].flatMap(Int.init) ?? 80
        let rows = Terminal.rows(STDERR_FILENO) ?? environment["LINES"].flatMap(Int.init) ?? 24
        return (max(columns, 20), max(rows, 4))
    }

    /// Takes a download's new state; redraws at once when its state changed, else at most ten times a second.
    func update(_ d: DownloadView) {
        guard let before = downloads[d.id] else { return }
        downloads[d.id] = d
        let now = ProcessInfo.processInfo.systemUptime
        guard before.state != d.state || before.retryIn != d.retryIn || now - lastDrawAt >= 0.1 else { return }
        draw()
    }

    /// Writes `text` on a line of its own above the block, which is drawn again under it.
    func notice(_ text: String) {
        clear()
        printError(text)
        draw()
    }

    /// Draws the block a last time and leaves the cursor on the line after it.
    func finish() {
        draw()
        writeError("\n")
        drawnLines = 0
    }

    /// Takes the block off the screen: the cursor goes to its first line, which and everything below is erased.
    private func clear() {
        guard drawnLines > 0 else { return }
        writeError("\r" + (drawnLines > 1 ? "\u{1B}[\(drawnLines - 1)A" : "") + "\u{1B}[J")
        drawnLines = 0
    }

    private func draw() {
        lastDrawAt = ProcessInfo.processInfo.systemUptime
        let lines = ProgressBlock.lines(order.compactMap { downloads[$0] }, size: size, tailWidth: &tailWidth)
        var text = "\r" + (drawnLines > 1 ? "\u{1B}[\(drawnLines - 1)A" : "")
        text += lines.map { $0 + "\u{1B}[K" }.joined(separator: "\r\n")
        // A block that shrank (the terminal got shorter) leaves nothing of the longer one below it.
        if lines.count < drawnLines { text += "\u{1B}[J" }
        writeError(text)
        drawnLines = lines.count
    }

    /// The block's lines for `downloads` on a terminal of `size`: as many downloads as fit above the total line
    /// (and the "more" line when some do not), running ones first.
    static func lines(
        _ downloads: [DownloadView], size: (columns: Int, rows: Int), tailWidth: inout Int
    )
        -> [String]
    {
        // The rows left once the total line and the line the shell prompt will take are counted.
        let room = max(1, size.rows - 2)
        var shown = downloads
        var hidden: [DownloadView] = []
        if downloads.count > room {
            func rank(_ d: DownloadView) -> Int { d.isRunning ? 0 : d.isFinished ? 2 : 1 }
            let ranked = downloads.enumerated().sorted { (rank($0.element), $0.offset) < (rank($1.element), $1.offset) }
            let kept = Set(ranked.prefix(room - 1).map(\.offset))
            shown = downloads.enumerated().filter { kept.contains($0.offset) }.map(\.element)
            hidden = downloads.enumerated().filter { !kept.contains($0.offset) }.map(\.element)
        }
        // Under 100 columns the numbers take their short forms, or the bars would have no room.
        let compact = size.columns < 100
        var bars = shown.map { $0.bar(compact: compact) }
        bars.append(total(downloads, compact: compact))
        let nameWidth = min(24, bars.map(\.name.count).max() ?? 8)
        // Every line's numbers measured first: the bars of one drawing all end in the same column.
        for bar in bars { _ = bar.render(width: size.columns, tailWidth: &tailWidth, nameWidth: nameWidth) }
        var lines = bars.map { $0.render(width: size.columns, tailWidth: &tailWidth, nameWidth: nameWidth) }
        let totalLine = lines.removeLast()
        if !hidden.isEmpty {
            let done = hidden.filter { $0.state == "completed" }.count
            let failed = hidden.filter { $0.state == "failed" }.count
            let waiting = hidden.count - done - failed
            var parts: [String] = []
            if waiting > 0 { parts.append("\(waiting) waiting or running") }
            if done > 0 { parts.append("\(done) completed") }
            if failed > 0 { parts.append("\(failed) failed") }
            lines.append(Format.column("… \(hidden.count) more: " + parts.joined(separator: ", "), size.columns - 1))
        }
        lines.append(totalLine)
        return lines
    }

    /// The total line: bytes over all downloads (of those whose size is known for the bar), speed, ETA, and how
    /// many have ended.
    static func total(_ downloads: [DownloadView], compact: Bool = false) -> BarLine {
        let bytes = compact ? Format.shortBytes : Format.bytes
        let received = downloads.reduce(Int64(0)) { $0 + $1.received }
        let sized = downloads.filter { $0.total != nil }
        let total = sized.reduce(Int64(0)) { $0 + ($1.total ?? 0) }
        let known = sized.count == downloads.count
        let speed = downloads.filter(\.isRunning).reduce(0.0) { $0 + $1.speed }
        let done = downloads.filter(\.isFinished).count
        var fraction: Double?
        if total > 0 {
            fraction = Double(sized.reduce(Int64(0)) { $0 + $1.received }) / Double(total)
        } else if !sized.isEmpty && done == downloads.count {
            fraction = 1
        }
        var tail: [String] = []
        if speed > 0 { tail.append(bytes(Int64(speed)) + "/s") }
        if known, speed > 0, total > received {
            let eta = Double(total - received) / speed
            tail.append("ETA " + (compact ? Format.shortDuration(eta) : Format.duration(eta)))
        }
        // Short: how many are done goes with the name, where a narrow line has room.
        if !compact { tail.append("\(done) of \(downloads.count) done") }
        let size =
            !known
            ? bytes(received)
            : compact
                ? "\(bytes(received))/\(bytes(total))"
                : "\(bytes(received)) of \(bytes(total))"
        let percent = fraction.map { "\(Int(($0 * 100).rounded(.down)))%" } ?? ""
        return BarLine(
            name: compact ? "total \(done)/\(downloads.count)" : "total", fraction: fraction,
            percent: percent, size: size, tail: tail)
    }
}
