import FoundationEssentials

/// Keeping secrets out of logs and API answers.
public enum Redact {
    /// The URL with any user name and password replaced.
    public static func url(_ url: String) -> String {
        // Credentials need an "@"; most URLs have none and skip the parse.
        guard url.utf8.contains(UInt8(ascii: "@")), var components = URLComponents(string: url),
            components.user != nil || components.password != nil
        else { return url }
        components.user = "redacted"
        components.password = nil
        return components.string ?? url
    }
}
