internal import CEvent

/// Calls a handler on the loop thread each time a descriptor is readable, until cancelled (a PostgreSQL
/// connection waiting for notifications).
public final class ReadWatch {
    private var event: OpaquePointer?
    private let handler: () -> Void

    public init(loop: EventLoop, fd: Int32, _ handler: @escaping () -> Void) throws {
        self.handler = handler
        event = event_new(
            loop.base, fd, haul_ev_read() | haul_ev_persist(),
            { _, _, arg in
                Unmanaged<ReadWatch>.fromOpaque(arg!).takeUnretainedValue().handler()
            }, Unmanaged.passUnretained(self).toOpaque())
        guard let event, event_add(event, nil) == 0 else { throw LoopError.libevent("cannot watch descriptor \(fd)") }
    }

    deinit { cancel() }

    public func cancel() {
        if let event { event_free(event) }
        event = nil
    }
}
