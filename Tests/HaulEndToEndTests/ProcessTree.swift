import Foundation

/// The processes a test started and everything they forked, found through /proc by parent id, so a daemon that
/// forks its sessions (sshd, vsftpd) is stopped by its own pid and its children's, never by a name that another
/// user's processes on the machine may share.
enum ProcessTree {
    /// `root` and its descendants, parents before children.
    static func members(of root: pid_t) -> [pid_t] {
        var children: [pid_t: [pid_t]] = [:]
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries {
            guard let pid = pid_t(entry), let parent = parentID(of: pid) else { continue }
            children[parent, default: []].append(pid)
        }
        var found: [pid_t] = [root]
        var index = 0
        while index < found.count {
            found += children[found[index]] ?? []
            index += 1
        }
        return found
    }

    /// Sends `signal` to `root` and to every process below it, all found before the first is signalled (a child
    /// whose parent died would be handed to init and lost).
    static func kill(_ root: pid_t, signal: Int32 = SIGKILL) {
        guard root > 0 else { return }
        for pid in members(of: root) { Foundation.kill(pid, signal) }
    }

    /// Whether `pid` has ended: no such process, or one left to be reaped (a zombie runs nothing).
    static func isGone(_ pid: pid_t) -> Bool {
        guard Foundation.kill(pid, 0) == 0 else { return true }
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return true }
        return stat[stat.index(after: close)...].split(separator: " ").first == "Z"
    }

    /// The pid in a daemon's pid file, if it names a live process.
    static func pid(inFile path: String) -> pid_t? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
            let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)), pid > 0,
            Foundation.kill(pid, 0) == 0
        else { return nil }
        return pid
    }

    /// The parent of `pid` from /proc/PID/stat (its fourth field, after the command in parentheses).
    private static func parentID(of pid: pid_t) -> pid_t? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 1 ? pid_t(fields[1]) : nil
    }
}
