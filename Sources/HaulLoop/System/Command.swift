internal import CSystem
import Glibc

/// Runs operators' programs (hooks) without a shell: argv as given, an environment, bytes on standard input,
/// standard output and error captured together (the first `outputLimit` bytes kept), killed with its process group
/// after `timeout` seconds. At most `concurrency` run at once, each on a thread of the pool, never on the loop.
public final class CommandPool: @unchecked Sendable {
    public struct Result: Sendable, Equatable {
        /// The exit status; nil when it was killed or could not start.
        public var status: Int32?
        /// Why it has no status: the signal that ended it, the timeout, or why it could not start.
        public var error: String?
        public var output: String
        /// Bytes of output beyond those kept.
        public var dropped: Int
    }

    private let workers: WorkerPool
    public let timeout: Double
    public let outputLimit: Int

    public init(concurrency: Int, timeout: Double, outputLimit: Int = 4096) throws(LoopError) {
        workers = try WorkerPool(threads: max(1, concurrency))
        self.timeout = timeout
        self.outputLimit = outputLimit
    }

    /// Runs `argv` on a pool thread, then `completion` with what came of it on `loop`'s thread.
    public func run(
        _ argv: [String], environment: [String], input: [UInt8], on loop: EventLoop,
        then completion: @escaping (Result) -> Void
    ) {
        let box = LoopBound(completion)
        let inbox = loop.inbox
        let (timeout, limit) = (timeout, outputLimit)
        workers.submit {
            let result = CommandPool.execute(
                argv, environment: environment, input: input, timeout: timeout,
                outputLimit: limit)
            inbox.append { box.value(result) }
        }
    }

    /// Runs `argv` and waits for it (blocking the calling thread).
    static func execute(
        _ argv: [String], environment: [String], input: [UInt8], timeout: Double,
        outputLimit: Int
    ) -> Result {
        guard let program = argv.first, !program.isEmpty else {
            return Result(status: nil, error: "no program to run", output: "", dropped: 0)
        }
        var inPipe: [Int32] = [-1, -1], outPipe: [Int32] = [-1, -1]
        guard pipe2(&inPipe, O_CLOEXEC) == 0 else { return failed("pipe", errno) }
        guard pipe2(&outPipe, O_CLOEXEC) == 0 else {
            close(inPipe[0]); close(inPipe[1])
            return failed("pipe", errno)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 2)
        posix_spawn_file_actions_addclosefrom_np(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Its own process group (the timeout kills it and its children), default signal handling (the server
        // ignores SIGPIPE) and no blocked signals.
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes,
            Int16(
                POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF
                    | POSIX_SPAWN_SETSIGMASK))
        let cArgv = argv.map { strdup($0) } + [nil]
        let cEnvironment = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in cArgv { free(pointer) }
            for pointer in cEnvironment { free(pointer) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawnp(&pid, program, &actions, &attributes, cArgv, cEnvironment)
        close(inPipe[0])
        close(outPipe[1])
        guard spawned == 0 else {
            close(inPipe[1]); close(outPipe[0])
            return failed("cannot run \(program):", spawned)
        }
        let deadline = monotonic() + timeout
        var output: [UInt8] = []
        var dropped = 0
        var written = 0
        var writer = inPipe[1]
        if input.isEmpty { close(writer); writer = -1 } else { _ = fcntl(writer, F_SETFL, O_NONBLOCK) }
        var reader = outPipe[0]
        var timedOut = false
        var buffer = [UInt8](repeating: 0, count: 16384)
        while reader >= 0 {
            let left = deadline - monotonic()
            if left <= 0 {
                timedOut = true
                break
            }
            var fds = [pollfd(fd: reader, events: Int16(POLLIN), revents: 0)]
            if writer >= 0 { fds.append(pollfd(fd: writer, events: Int16(POLLOUT), revents: 0)) }
            let ready = poll(&fds, nfds_t(fds.count), Int32(min(left * 1000, 1000).rounded(.up)))
            if ready < 0 && errno != EINTR { break }
            if writer >= 0, fds.count > 1, fds[1].revents != 0 {
                let n = input[written...].withUnsafeBytes { write(writer, $0.baseAddress, $0.count) }
                if n > 0 { written += n }
                // All given, or the program does not read it (EPIPE): its end is closed.
                if written >= input.count || (n < 0 && errno != EAGAIN && errno != EINTR) {
                    close(writer)
                    writer = -1
                }
            }
            if fds[0].revents != 0 {
                let n = read(reader, &buffer, buffer.count)
                if n > 0 {
                    let kept = min(n, max(0, outputLimit - output.count))
                    output += buffer[0..<kept]
                    dropped += n - kept
                } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
                    close(reader)
                    reader = -1
                }
            }
        }
        if writer >= 0 { close(writer) }
        if reader >= 0 { close(reader) }
        // Its output is closed: it has ended or soon will; one that holds on past the deadline is killed.
        var status: Int32 = 0
        while true {
            if !timedOut, monotonic() >= deadline { timedOut = true }
            if timedOut {
                // It and whatever it started: its process group.
                kill(-pid, SIGKILL)
                kill(pid, SIGKILL)
            }
            let done = waitpid(pid, &status, timedOut ? 0 : WNOHANG)
            if done == pid { break }
            if done < 0 && errno != EINTR { return failed("waitpid", errno) }
            if done == 0 { usleep(10_000) }
        }
        let text = String(decoding: output, as: UTF8.self)
        if timedOut {
            return Result(
                status: nil, error: "timed out after \(Int(timeout)) s and was killed", output: text,
                dropped: dropped)
        }
        // WIFEXITED and friends are macros: the status word's layout is Linux's.
        let signal = status & 0x7F
        if signal != 0 {
            return Result(status: nil, error: "killed by signal \(signal)", output: text, dropped: dropped)
        }
        return Result(status: (status >> 8) & 0xFF, error: nil, output: text, dropped: dropped)
    }

    private static func failed(_ call: String, _ code: Int32) -> Result {
        Result(status: nil, error: "\(call) \(String(cString: strerror(code)))", output: "", dropped: 0)
    }

    private static func monotonic() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}
