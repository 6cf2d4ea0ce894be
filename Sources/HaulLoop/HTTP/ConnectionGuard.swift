internal import CEvent
import FoundationEssentials
import Glibc

/// What evhttp 2.1 cannot police by itself, for the API's connections.
public struct ConnectionPolicy: Sendable {
    /// Connections one client address may hold open at once; 0 for no cap. One over the cap closes that client's
    /// longest-idle connection (or the new one, when all others are busy).
    public var maxPerClient = 256
    /// Seconds a connection may take to deliver a whole request, counted from its opening or from its previous
    /// request; a streaming reply pauses the count. evhttp's own timeout is per read, which a client trickling a
    /// request head a byte at a time (slowloris) never trips.
    public var requestDeadline: Double = 60

    public init(maxPerClient: Int = 256, requestDeadline: Double = 60) {
        self.maxPerClient = maxPerClient
        self.requestDeadline = requestDeadline
    }
}

/// Tracks the server's client connections by socket (with its inode, so a reused descriptor is told apart), counts
/// them per client address and closes those over the cap or past their request deadline. Confined to the loop.
final class ConnectionGuard {
    private struct Tracked {
        var inode: ino_t
        var peer: String
        /// When the connection opened or last delivered a request; nil while it streams a reply.
        var since: Double?
    }

    /// A connection whose socket evhttp has not attached yet, kept alive (one bufferevent reference) until then.
    private final class Pending {
        unowned(unsafe) let owner: ConnectionGuard
        let bufferEvent: OpaquePointer

        init(owner: ConnectionGuard, bufferEvent: OpaquePointer) {
            self.owner = owner
            self.bufferEvent = bufferEvent
        }
    }

    private let loop: EventLoop
    let policy: ConnectionPolicy
    private var connections: [Int32: Tracked] = [:]
    private var perPeer: [String: Int] = [:]
    private var sweepTimer: LoopTimer?

    init(loop: EventLoop, policy: ConnectionPolicy) {
        self.loop = loop
        self.policy = policy
        sweepTimer = LoopTimer(loop: loop, delay: 0.25, repeating: true) { [unowned self] in self.sweep() }
        sweepTimer?.start()
    }

    /// A new connection's bufferevent, from evhttp's bufferevent callback: its socket is set right after, so it is
    /// looked at on the loop's next turn.
    func opened(_ bufferEvent: OpaquePointer) {
        bufferevent_incref(bufferEvent)
        let pending = Unmanaged.passRetained(Pending(owner: self, bufferEvent: bufferEvent)).toOpaque()
        var now = timeval(tv_sec: 0, tv_usec: 0)
        event_base_once(
            loop.base, -1, haul_ev_timeout(),
            { _, _, arg in
                let pending = Unmanaged<Pending>.fromOpaque(arg!).takeRetainedValue()
                pending.owner.adopt(pending.bufferEvent)
                bufferevent_decref(pending.bufferEvent)
            }, pending, &now)
    }

    /// A whole request arrived on `fd`: its deadline starts again.
    func requestArrived(on fd: Int32) {
        connections[fd]?.since = ProcessInfo.processInfo.systemUptime
    }

    /// A reply started or stopped streaming on `fd`; no deadline applies meanwhile.
    func streaming(on fd: Int32, _ on: Bool) {
        connections[fd]?.since = on ? nil : ProcessInfo.processInfo.systemUptime
    }

    private func adopt(_ bufferEvent: OpaquePointer) {
        let fd = bufferevent_getfd(bufferEvent)
        var info = stat()
        // Closed already (evhttp gave up on it): nothing to track.
        guard fd >= 0, fstat(fd, &info) == 0 else { return }
        // A reply goes out whole, never waiting on Nagle's algorithm for the ACK of its previous segment: without
        // this a reply of a few segments (a page of downloads) stalled the client's delayed ACK, 40 ms each.
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        if connections[fd] != nil { forget(fd) }
        let peer = ConnectionGuard.peerAddress(fd)
        connections[fd] = Tracked(inode: info.st_ino, peer: peer, since: ProcessInfo.processInfo.systemUptime)
        perPeer[peer, default: 0] += 1
        if policy.maxPerClient > 0, perPeer[peer]! > policy.maxPerClient {
            // One over the cap: the connection that has waited longest without delivering a request goes (an idle
            // keep-alive or a client trickling its head), so a client that opens a new connection for a new
            // request is served. Only when every other one is busy does the new one go.
            let victim = longestIdle(of: peer, sparing: fd) ?? fd
            shutdown(victim, Int32(SHUT_RDWR))
            forget(victim)
        }
    }

    /// The connection of `peer` (other than `spared`) that has gone longest without a complete request: not
    /// streaming a reply, and with no bytes waiting in the kernel (which may be a request about to be read).
    private func longestIdle(of peer: String, sparing spared: Int32) -> Int32? {
        var oldest: (fd: Int32, since: Double)?
        for (fd, tracked) in connections where fd != spared && tracked.peer == peer {
            guard let since = tracked.since, since < oldest?.since ?? .infinity else { continue }
            var byte: UInt8 = 0
            if recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) > 0 { continue }
            oldest = (fd, since)
        }
        return oldest?.fd
    }

    private func forget(_ fd: Int32) {
        guard let tracked = connections.removeValue(forKey: fd) else { return }
        let left = (perPeer[tracked.peer] ?? 1) - 1
        perPeer[tracked.peer] = left > 0 ? left : nil
    }

    private func sweep() {
        let now = ProcessInfo.processInfo.systemUptime
        for (fd, tracked) in connections {
            var info = stat()
            guard fstat(fd, &info) == 0, info.st_ino == tracked.inode else {
                forget(fd)
                continue
            }
            if let since = tracked.since, now - since > policy.requestDeadline {
                // evhttp sees the end of the stream and frees the connection; the next sweep forgets it.
                shutdown(fd, Int32(SHUT_RDWR))
                connections[fd]?.since = now
            }
        }
    }

    private static func peerAddress(_ fd: Int32) -> String {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        guard ok == 0 else { return "?" }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = storage.ss_family
        withUnsafeBytes(of: storage) { raw in
            if family == sa_family_t(AF_INET6) {
                var bytes = raw.loadUnaligned(as: sockaddr_in6.self).sin6_addr
                _ = inet_ntop(AF_INET6, &bytes, &text, socklen_t(text.count))
            } else {
                var bytes = raw.loadUnaligned(as: sockaddr_in.self).sin_addr
                _ = inet_ntop(AF_INET, &bytes, &text, socklen_t(text.count))
            }
        }
        return text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}
