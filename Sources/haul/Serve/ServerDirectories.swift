import Glibc
import HaulLoop

/// The server's download root and data directory, made and checked before anything opens them. A volume or bind
/// mount owned by another user is the usual first-run failure in a container, so the error names the path, the
/// option that set it, who owns it, who Haul runs as, and what to do about it.
enum ServerDirectories {
    struct Unusable: Error, CustomStringConvertible {
        let description: String
    }

    /// Makes `path` (0700 when `private`) and checks that this process may create files in it.
    static func prepare(_ path: String, role: String, option: String, private: Bool) throws(Unusable) {
        do {
            if `private` { try Files.makePrivateDirectory(path) } else { try Files.makeDirectories(path) }
        } catch {
            // The component that could not be made (a missing parent of `path`, perhaps) is the parent's to allow.
            let parent = error.path.split(separator: "/").dropLast().joined(separator: "/")
            throw unusable(
                error.path, role: role, option: option, code: error.code, verb: "create",
                decidedBy: (error.path.hasPrefix("/") ? "/" : "") + parent)
        }
        if let code = Files.accessProblem(path, W_OK | X_OK) {
            throw unusable(path, role: role, option: option, code: code, verb: "write to", decidedBy: path)
        }
    }

    /// Checks the database and the two files SQLite keeps beside it, when they exist: each must be readable and
    /// writable, or SQLite fails later with a message that names no file.
    static func checkDatabase(_ path: String, option: String) throws(Unusable) {
        for file in [path, path + "-wal", path + "-shm"] {
            if let code = Files.accessProblem(file, R_OK | W_OK) {
                throw unusable(file, role: "the database", option: option, code: code, verb: "open", decidedBy: file)
            }
        }
    }

    /// The message for `path`, which the permissions of `decidedBy` (the path or its parent) keep from Haul.
    private static func unusable(
        _ path: String, role: String, option: String, code: Int32, verb: String,
        decidedBy: String
    ) -> Unusable {
        let reason = String(cString: strerror(code)).lowercased()
        var text = "cannot \(verb) \(path), \(role) (\(option)): \(reason)"
        guard code == EACCES || code == EPERM else { return Unusable(description: text) }
        let user = "uid \(geteuid()) gid \(getegid())"
        if let owner = Files.owner(decidedBy) {
            let whose = decidedBy == path ? "it" : decidedBy
            text +=
                "; \(whose) belongs to uid \(owner.uid) gid \(owner.gid) and Haul runs as \(user): "
                + "chown -R \(geteuid()):\(getegid()) \(decidedBy) (on the host, for a bind mount)"
            // Never advise running as root.
            if owner.uid != 0 { text += ", or run Haul as its owner (docker run --user \(owner.uid):\(owner.gid))" }
        } else {
            text += "; Haul runs as \(user), which must be able to write there"
        }
        return Unusable(description: text)
    }
}
