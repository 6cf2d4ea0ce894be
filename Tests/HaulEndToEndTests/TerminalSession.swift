import Foundation
import XCTest

/// A command in a real terminal of a given size: a tmux window on a tmux server of its own, whose screen is read as
/// a person would see it (tmux emulates the terminal: cursor moves, erases and wrapping are done as a terminal
/// does them). The command's exit status is printed under what it drew as `exit=N`.
final class TerminalSession {
    private let socket = "haul-test-\(UUID().uuidString.prefix(8))"
    let columns: Int

    static var available: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux") }

    init(_ command: String, columns: Int, rows: Int = 24) throws {
        self.columns = columns
        // The window stays after the command ends, so its last screen can be read. The tmux server lives on after
        // this call: it must not hold the descriptors Process watches to see its child end, so every one but the
        // standard three is closed before tmux starts.
        let closeInherited = #"for fd in /proc/$$/fd/*; do fd=${fd##*/}; [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done; "#
        let result = try execute(
            "/bin/bash",
            [
                "-c", closeInherited + "exec \"$@\"", "tmux", "/usr/bin/tmux",
                "-L", socket, "-f", "/dev/null", "new-session", "-d", "-x",
                String(columns), "-y", String(rows),
                "\(command); echo exit=$?; sleep 600",
            ])
        guard result.status == 0 else { throw Failure(description: "tmux did not start: \(result.output)") }
    }

    struct Failure: Error, CustomStringConvertible { let description: String }

    /// The screen's lines, without trailing spaces.
    func screen() throws -> [String] {
        let result = try execute("/usr/bin/tmux", ["-L", socket, "capture-pane", "-p"])
        return result.stdout.split(separator: "\n", omittingEmptySubsequences: false).map {
            String($0.reversed().drop(while: { $0 == " " }).reversed())
        }
    }

    /// The screen once `condition` holds of it (a test failure after `timeout`).
    @discardableResult
    func wait(
        for what: String, timeout: TimeInterval = 60, file: StaticString = #filePath, line: UInt = #line,
        _ condition: ([String]) -> Bool
    ) throws -> [String] {
        var last: [String] = []
        try waitFor(what, timeout: timeout, file: file, line: line) {
            last = try screen()
            return condition(last)
        }
        if !condition(last) { print("---- screen ----\n" + last.joined(separator: "\n")) }
        return last
    }

    /// Types keys as tmux names them (`C-c` is Ctrl-C).
    func press(_ keys: String) throws {
        _ = try execute("/usr/bin/tmux", ["-L", socket, "send-keys", keys])
    }

    func stop() {
        _ = try? execute("/usr/bin/tmux", ["-L", socket, "kill-server"])
    }

    deinit { stop() }
}
