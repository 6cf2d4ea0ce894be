import FoundationEssentials
import HaulLoop

/// Field rules: what a URL, a name, a folder or a header given by a caller must be. Every wire format checks with
/// these (through the option table for a download's options), so REST and the aria2 front refuse the same things.
public enum Validate {
    /// An absolute URL of one of `schemes` (by default those of every origin dialect) with a host that can be one
    /// (a name, an IPv4 address or a bracketed IPv6 one, nothing percent-encoded) and a port from 1 to 65535.
    /// Downloads, mirrors and webhooks (HTTP only) alike.
    public static func url(_ text: String, schemes: [String] = Origins.schemes) -> String? {
        // Only a refusal names them: "http, https or ftp".
        func kinds() -> String {
            schemes.count < 2 ? schemes.joined() : schemes.dropLast().joined(separator: ", ") + " or " + schemes.last!
        }
        guard text.utf8.count <= 8192, !text.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else {
            return "must be an absolute \(kinds()) URL without spaces or control characters"
        }
        let ascii = !text.utf8.contains(where: { $0 >= 0x80 })
        if !ascii, text.unicodeScalars.contains(where: { (0x80...0x9F).contains($0.value) || FileName.isInvisible($0) })
        {
            return "must not contain invisible characters (format controls, line separators)"
        }
        // The scheme as written: letters, digits, '+', '-', '.', then ':'.
        guard let colon = text.firstIndex(of: ":"), colon > text.startIndex,
            text[..<colon].utf8.allSatisfy({ ASCII.isLetterOrDigit($0) || "+-.".utf8.contains($0) })
        else {
            return "must be an absolute \(kinds()) URL"
        }
        let scheme = text[..<colon].lowercased()
        guard schemes.contains(scheme) else { return "scheme must be \(kinds()), not \(scheme)" }
        // A plain URL (ASCII, nothing percent-encoded: nearly all of them) is read here; others by URLComponents
        // too, which a batch of a thousand would otherwise pay for a thousand times.
        if !ascii || text.utf8.contains(UInt8(ascii: "%")), URLComponents(string: text)?.host == nil {
            return "must be an absolute \(kinds()) URL"
        }
        guard let authority = Validate.authority(text), !authority.host.isEmpty else {
            return "must name a host"
        }
        if let problem = Validate.host(authority.host) { return problem }
        if let port = authority.port {
            guard let number = Int(port), (1...65535).contains(number), port.utf8.count <= 5 else {
                return "the port must be from 1 to 65535, not \(port)"
            }
        }
        return nil
    }

    /// The host and port of a URL as written (a parser may decode or re-encode them): what lies between `//` and
    /// the path, query or fragment, after any user information.
    public static func authority(_ url: String) -> (host: String, port: String?)? {
        guard let colon = url.firstIndex(of: ":"), url[colon...].hasPrefix("://") else { return nil }
        var authority = url[url.index(colon, offsetBy: 3)...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            let rest = authority[authority.index(after: close)...]
            guard rest.isEmpty || rest.hasPrefix(":") else { return nil }
            return (String(authority[...close]), rest.isEmpty ? nil : String(rest.dropFirst()))
        }
        guard let colon = authority.lastIndex(of: ":") else { return (String(authority), nil) }
        let port = authority[authority.index(after: colon)...]
        // `http://host:/` is the default port, as RFC 3986 allows.
        return (String(authority[..<colon]), port.isEmpty ? nil : String(port))
    }

    /// A URL's host as written: a bracketed IPv6 address (no zone), or a name or IPv4 address of labels made of
    /// letters (any script: curl converts IDN), digits, '-' and '_', at most 63 bytes each and 253 in all.
    public static func host(_ host: String) -> String? {
        if host.contains("%") { return "the host must not be percent-encoded" }
        if host.hasPrefix("[") || host.contains(":") {
            let inner = host.trimmingPrefix("[")
            guard host.hasPrefix("["), host.hasSuffix("]"), inner.dropLast().contains(":"),
                inner.dropLast().unicodeScalars.allSatisfy({ $0.properties.isASCIIHexDigit || $0 == ":" || $0 == "." })
            else { return "the host must be a name or an IP address" }
            return nil
        }
        var labels = host.split(separator: ".", omittingEmptySubsequences: false)
        if labels.count > 1, labels.last == "" { labels.removeLast() }
        guard host.utf8.count <= 253,
            labels.allSatisfy({ label in
                !label.isEmpty && label.utf8.count <= 63
                    && label.unicodeScalars.allSatisfy { scalar in
                        scalar.isASCII
                            ? (ASCII.isLetterOrDigit(UInt8(scalar.value)) || scalar == "-" || scalar == "_")
                            : (scalar.properties.isAlphabetic || scalar.properties.numericType != nil
                                || scalar.properties.generalCategory == .nonspacingMark
                                || scalar.properties.generalCategory == .spacingMark)
                    }
            })
        else { return "the host must be a name or an IP address" }
        return nil
    }

    /// A category's name: a path segment of the API and a folder's default name, so 1-64 letters, digits, '-', '_'
    /// and '.', starting with a letter or digit.
    public static func categoryName(_ text: String) -> String? {
        guard let first = text.first, first.isASCII, first.isLetter || first.isNumber, text.utf8.count <= 64,
            text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) })
        else {
            return "must be 1 to 64 letters, digits, '-', '_' or '.', starting with a letter or digit"
        }
        return nil
    }

    /// A plain file name: no path separators, no `.` or `..`, no NUL or control characters (which would be
    /// silently dropped, leaving a name the client did not ask for).
    public static func filename(_ text: String) -> String? {
        if text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            return "must not contain NUL or control characters"
        }
        // Refused, not cut: a name shortened without a word is not the one asked for.
        if text.utf8.count > FileName.maxBytes {
            return "must be at most \(FileName.maxBytes) bytes of UTF-8 (the part file and a ' (1)' need the rest of "
                + "a name's 255), not \(text.utf8.count)"
        }
        if text.contains("/") || text.contains("\\") || text == "." || text == ".." || FileName.sanitize(text) == nil {
            return "must be a plain file name without path separators"
        }
        return nil
    }

    /// A relative directory inside the download root: `/`-separated components, each a name `filename` would
    /// accept, none `.` or `..`, none empty (so no leading, trailing or doubled `/`).
    public static func directory(_ text: String) -> String? {
        guard !text.isEmpty else { return nil }
        if text.hasPrefix("/") { return "must be relative to the download root" }
        if text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            return "must not contain NUL or control characters"
        }
        let components = text.split(separator: "/", omittingEmptySubsequences: false)
        if let problem = pathLimits(depth: components.count, bytes: text.utf8.count) { return problem }
        for component in components {
            if component.isEmpty { return "must not have empty components (a trailing or doubled '/')" }
            if component == ".." || component == "." { return "must not contain '.' or '..'" }
            if component.utf8.count > FileName.maxComponentBytes {
                return "has a folder name of \(component.utf8.count) bytes; a name has at most "
                    + "\(FileName.maxComponentBytes)"
            }
            if component.contains("\\") || FileName.sanitize(String(component)) == nil {
                return "'\(component)' is not a usable directory name"
            }
        }
        return nil
    }

    /// Why a folder this deep and long cannot be made under the download root, or nil.
    public static func pathLimits(depth: Int, bytes: Int) -> String? {
        if depth > FileName.maxDepth { return "must be at most \(FileName.maxDepth) folders deep, not \(depth)" }
        if bytes > FileName.maxDirectoryBytes {
            return "must be at most \(FileName.maxDirectoryBytes) bytes long, not \(bytes)"
        }
        return nil
    }

    /// A directory `directory` accepted, as it is used: each component sanitized, never cut.
    public static func sanitizedDirectory(_ text: String) -> String {
        text.split(separator: "/").compactMap { FileName.sanitize(String($0), maxBytes: FileName.maxComponentBytes) }
            .joined(separator: "/")
    }

    /// Names of headers Haul sets itself, or that shape the connection or its framing: a client may not give them.
    public static let reservedHeaders: Set<String> = [
        "range", "if-range", "host", "content-length", "transfer-encoding", "connection", "accept-encoding",
        "te", "trailer", "upgrade", "keep-alive", "proxy-connection", "expect", "http2-settings",
    ]
    /// At most this many headers per download ...
    public static let maxHeaders = 64
    /// ... and this many bytes of names and values together.
    public static let maxHeaderBytes = 16 * 1024

    /// Checks the `headers` object of a request: each name a token (RFC 9110) not reserved and not given twice, each
    /// value a field value (no CR, LF, NUL or other control), and the whole within the caps. Returns the headers
    /// (values without surrounding whitespace) and the problems, each with its field.
    public static func headers(
        _ members: [(String, JSONValue)]
    ) -> (
        headers: [HeaderField],
        errors: [(field: String, message: String)]
    ) {
        guard members.count <= maxHeaders else {
            return ([], [("headers", "at most \(maxHeaders) headers, not \(members.count)")])
        }
        var headers: [HeaderField] = []
        var errors: [(field: String, message: String)] = []
        var seen: Set<String> = []
        var bytes = 0
        for (name, value) in members {
            // Names are quoted in messages only once known to be tokens: nothing a client sends is echoed raw.
            let field = HTTPField.isToken(name) ? "headers.\(name)" : "headers"
            guard HTTPField.isToken(name) else {
                errors.append((field, "a header name must be an RFC 9110 token (letters, digits and !#$%&'*+-.^_`|~)"))
                continue
            }
            let normalized = HTTPField.normalized(name)
            if reservedHeaders.contains(normalized) {
                errors.append((field, "'\(name)' is set by Haul and cannot be given"))
                continue
            }
            if !seen.insert(normalized).inserted {
                errors.append((field, "'\(name)' is given more than once"))
                continue
            }
            guard let text = value.stringValue else {
                errors.append((field, "must be a string"))
                continue
            }
            let trimmed = HTTPField.trimmed(text)
            guard HTTPField.isValue(trimmed) else {
                errors.append((field, "the value must not contain line breaks, NUL or other control characters"))
                continue
            }
            bytes += name.utf8.count + trimmed.utf8.count
            headers.append(HeaderField(name: name, value: trimmed))
        }
        if bytes > maxHeaderBytes {
            errors.append(("headers", "names and values must total at most \(maxHeaderBytes) bytes, not \(bytes)"))
        }
        return (headers, errors)
    }
}
