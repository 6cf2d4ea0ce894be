internal import CCurl

/// One download's cookies, shared by every transfer of it (the probe, each segment, each redirect, each mirror) as
/// one curl share handle: a cookie a 302 sets is sent by the segment that starts next. Held in memory only; what a
/// client gave is kept in the store with the download, what origins set lives as long as the download runs.
/// Confined to the loop thread, as the transfers that use it are.
public final class CookieJar: @unchecked Sendable {
    let share: UnsafeMutableRawPointer

    /// A jar holding `cookies` (`Name=value; Other=value` for `host`, or the text of a Netscape cookies.txt);
    /// nil when curl cannot make one.
    public init?(cookies: String, host: String) {
        guard let share = curl_share_init() else { return nil }
        self.share = share
        haul_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_COOKIE.rawValue))
        let lines = CookieJar.lines(cookies, host: host)
        if lines.isEmpty { return }
        guard let loader = curl_easy_init() else { return nil }
        defer { curl_easy_cleanup(loader) }
        haul_easy_setopt_ptr(loader, CURLOPT_SHARE, share)
        // An empty file name turns the cookie engine on without reading a file.
        haul_easy_setopt_string(loader, CURLOPT_COOKIEFILE, "")
        for line in lines {
            haul_easy_setopt_string(loader, CURLOPT_COOKIELIST, line)
        }
    }

    deinit { curl_share_cleanup(share) }

    /// The cookies as lines of curl's cookie list (Netscape's format): a cookies.txt's own lines, or one
    /// host-only line per `name=value` of a Cookie header value.
    static func lines(_ cookies: String, host: String) -> [String] {
        if cookies.contains("\t") {
            return cookies.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }).map(String.init).filter { line in
                // Comments, but for the #HttpOnly_ prefix of a cookie line.
                line.contains("\t") && (!line.hasPrefix("#") || line.hasPrefix("#HttpOnly_"))
            }
        }
        return cookies.split(separator: ";").compactMap { pair in
            let text = pair.drop { $0 == " " }
            guard let equals = text.firstIndex(of: "="), equals != text.startIndex else { return nil }
            let name = text[..<equals], value = text[text.index(after: equals)...]
            return "\(host)\tFALSE\t/\tFALSE\t0\t\(name)\t\(value)"
        }
    }
}
