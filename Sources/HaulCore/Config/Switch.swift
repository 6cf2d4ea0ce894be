/// The words an on/off option takes, wherever it is written: a flag's value (`--deny-private-networks=0`), an
/// environment variable, a config file's value. Anything else is refused with the value named: a guard that reads
/// `enabled`, `y`, `2` or an empty value as "off" fails open without a word.
public enum Switch {
    public static let onWords: Set<String> = ["1", "true", "yes", "on"]
    public static let offWords: Set<String> = ["0", "false", "no", "off"]

    /// For messages: what a switch takes.
    public static let words = "1, true, yes or on, or 0, false, no or off"

    /// On or off, or nil for anything but the documented words (in any case, nothing around them).
    public static func parse(_ text: String) -> Bool? {
        let word = text.lowercased()
        if onWords.contains(word) { return true }
        if offWords.contains(word) { return false }
        return nil
    }
}
