import Foundation

/// Setting up the server's own directories (given by the administrator); everything under the download root goes
/// through `ConfinedDirectory`.
public enum Files {
    /// Creates `path` and its missing parents.
    public static func makeDirectories(_ path: String) throws(FileError) {
        var built = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            built += "/" + component
            if mkdir(built, 0o755) != 0, errno != EEXIST {
                throw FileError(call: "mkdir", path: built, code: errno)
            }
        }
    }

    /// `path` made absolute against the working directory, without `.` components or trailing slashes.
    public static func absolute(_ path: String) -> String {
        let full = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        return (full as NSString).standardizingPath
    }
}
