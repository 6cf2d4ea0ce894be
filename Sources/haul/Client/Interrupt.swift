import Glibc

/// What Ctrl-C says while the client follows downloads: following stops, the downloads do not (they are the
/// server's), and how to find them again. Kept where the signal handler can write it without allocating.
nonisolated(unsafe) private var interruptMessage: [UInt8] = []

enum Interrupt {
    /// From now on, Ctrl-C (SIGINT) writes `message` on a line of its own and exits with 130, as shells expect.
    static func onInterrupt(say message: String) {
        interruptMessage = Array(("\n" + message + "\n").utf8)
        signal(SIGINT) { _ in
            // Only async-signal-safe calls here: write(2) and _exit(2).
            interruptMessage.withUnsafeBufferPointer { bytes in
                _ = write(STDERR_FILENO, bytes.baseAddress, bytes.count)
            }
            _exit(130)
        }
    }
}
