import Glibc

/// What an FTP transfer's control connection said, as curl hands it to the header callback: reply lines (`213
/// 3000000`), and for a request without a body the header lines curl makes of SIZE and MDTM (`Content-Length:
/// 3000000`, `Last-Modified: ...`). An FTP answer is no HTTP response; `Transfer` makes one of what this holds, with
/// what curl reports once the data flows, so that a dialect reads FTP and HTTP answers alike.
struct FileTransferReplies {
    /// The last reply's code (`550`), 0 before any.
    private(set) var lastCode = 0
    /// The last reply's text.
    private(set) var lastText = ""
    /// The file's size, from SIZE's `213` (which curl sends after entering passive mode; MDTM's `213` comes before).
    private(set) var size: Int64?
    /// Header lines curl made up (lower-cased names), for a request without a body.
    private(set) var headers: [(name: String, value: String)] = []
    private var passive = false

    mutating func feed(_ raw: UnsafeRawBufferPointer) {
        // Without its line break (bytes: "\r\n" is one Character to Swift).
        var utf8 = Array(raw)
        while let last = utf8.last, last == 0x0A || last == 0x0D { utf8.removeLast() }
        guard !utf8.isEmpty else { return }
        let line = String(decoding: utf8, as: UTF8.self)
        if utf8.count >= 3, utf8[0...2].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            utf8.count == 3 || utf8[3] == 0x20 || utf8[3] == 0x2D
        {
            // `213 3000000`, or the first line of a multi-line reply (`211-...`).
            let code = Int(String(decoding: utf8[0...2], as: UTF8.self)) ?? 0
            let text = utf8.count > 4 ? String(decoding: utf8[4...], as: UTF8.self) : ""
            lastCode = code
            lastText = text
            if code == 227 || code == 229 { passive = true }
            if code == 213, passive, let value = Int64(text.trimmingSpaces()), value >= 0 { size = value }
            return
        }
        guard let colon = line.firstIndex(of: ":") else { return }
        headers.append(
            (String(line[..<colon]).lowercased(), String(line[line.index(after: colon)...]).trimmingSpaces()))
    }
}

/// An HTTP date (IMF-fixdate, RFC 9110 5.6.7): what Last-Modified says, made from a file's modification time.
public enum HTTPDate {
    public static func format(secondsSince1970 seconds: Int64) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return
            "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
