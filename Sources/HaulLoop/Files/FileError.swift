import Glibc

/// A failed file-system call: the call, the path it was about and why. Paths under the download root are relative to
/// it (never the server's absolute layout: these messages reach API clients).
public struct FileError: Error, CustomStringConvertible, Sendable {
    /// Why, beyond an errno value.
    public enum Reason: Sendable, Equatable {
        case errno(Int32)
        /// A file Haul would write or give a name to has other hard links or belongs to another user: someone else
        /// planted or shares it, so Haul leaves it alone.
        case foreign(String)
        /// A name Haul expects to be a directory is a symbolic link (never followed under the root).
        case symbolicLink
        /// A name Haul expects to be a directory is some other kind of file.
        case notADirectory
    }

    public let call: String
    /// Relative to the download root ("" for the root itself), or a path of the server's own for its data directory.
    public let path: String
    public let reason: Reason

    public init(call: String, path: String, code: Int32) {
        self.call = call
        self.path = path
        self.reason = .errno(code)
    }

    public init(call: String, path: String, reason: Reason) {
        self.call = call
        self.path = path
        self.reason = reason
    }

    /// The errno value, or 0 for a reason that is not one.
    public var code: Int32 {
        if case .errno(let code) = reason { return code }
        return 0
    }

    public var isNoSpace: Bool { code == ENOSPC || code == EDQUOT }

    /// Nothing has the name.
    public var isMissing: Bool { code == ENOENT }

    /// The file is someone else's (other hard links, another owner): never to be written or named.
    public var isForeign: Bool {
        if case .foreign = reason { return true }
        return false
    }

    /// The path as a message shows it.
    public var shownPath: String { path.isEmpty ? "the download root" : path }

    public var description: String {
        switch reason {
        case .errno(let code): return "\(call) \(shownPath): \(String(cString: strerror(code)))"
        case .foreign(let why): return "\(shownPath) \(why); Haul leaves it alone"
        case .symbolicLink: return "\(shownPath) is a symbolic link, and Haul follows none inside the download root"
        case .notADirectory: return "\(shownPath) is a file where a directory is needed"
        }
    }
}
