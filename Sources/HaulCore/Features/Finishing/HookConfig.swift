import HaulLoop

/// The operator's hooks: argv lists from the config file only (an API caller never names a program to run).
public struct HookConfig: Sendable {
    public var onComplete: [String]?
    public var onFailed: [String]?
    /// The config file's `hls-remux`: the program that remuxes a finished HLS download into another container,
    /// `{input}` standing for the joined file and `{output.EXT}` for the new one (its extension EXT); off when nil.
    public var remux: [String]?
    /// Seconds before a hook is killed.
    public var timeout = 60.0
    /// Hooks running at once; more wait their turn.
    public var concurrency = 4

    public init() {}

    public var isEmpty: Bool { onComplete == nil && onFailed == nil }

    /// The extension `{output.EXT}` names in a remux command, if it names one (letters and digits, at most 8).
    public static func remuxExtension(_ argv: [String]) -> String? {
        for item in argv where item.hasPrefix("{output.") && item.hasSuffix("}") {
            let ext = String(item.dropFirst("{output.".count).dropLast())
            guard !ext.isEmpty, ext.count <= 8, ext.utf8.allSatisfy({ ASCII.isLetterOrDigit($0) }) else { return nil }
            return ext.lowercased()
        }
        return nil
    }

    /// The program for a download now in `state`.
    public func command(for state: DownloadState) -> [String]? {
        switch state {
        case .completed: return onComplete
        case .failed: return onFailed
        default: return nil
        }
    }
}
