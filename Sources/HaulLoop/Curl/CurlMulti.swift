internal import CCurl
internal import CEvent

/// libcurl's multi_socket interface driven by the loop's `event_base`, in the shape of curl's hiperfifo example:
/// curl tells us which sockets to watch and when to wake it, libevent watches them, and finished transfers are
/// drained after every `curl_multi_socket_action`.
public final class CurlMulti {
    let loop: EventLoop
    private var multi: UnsafeMutableRawPointer?
    private var timer: OpaquePointer?
    /// Wakes curl to run every transfer while an FTPS one runs (see `pollsEveryTransfer`), nil until one does.
    private var sweep: OpaquePointer?
    /// How often the sweep runs.
    static let sweepInterval = 0.05
    /// Strong owners of the running transfers: curl only holds an unretained pointer to each.
    private var running: [ObjectIdentifier: Transfer] = [:]
    /// Strong owners of the socket watches, by socket: curl holds an unretained pointer to each, and does not say
    /// CURL_POLL_REMOVE for the connections it still caches when the multi is cleaned up.
    private var watches: [curl_socket_t: SocketWatch] = [:]

    public init(loop: EventLoop) throws {
        guard curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK else {
            throw LoopError.libevent("curl_global_init failed")
        }
        guard let multi = curl_multi_init() else { throw LoopError.libevent("curl_multi_init failed") }
        self.loop = loop
        self.multi = multi
        let me = Unmanaged.passUnretained(self).toOpaque()
        timer = event_new(
            loop.base, -1, 0,
            { _, _, arg in
                Unmanaged<CurlMulti>.fromOpaque(arg!).takeUnretainedValue().timerFired()
            }, me)
        event_priority_set(timer, EventLoop.Priority.transfer.rawValue)
        haul_multi_setopt_ptr(multi, CURLMOPT_SOCKETDATA, me)
        // Transfers to one HTTP/2 origin share its connection as streams (libcurl's default since 7.62, said here).
        haul_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        haul_multi_setopt_ptr(multi, CURLMOPT_TIMERDATA, me)
        haul_multi_setopt_socketfn(multi) { easy, socket, what, userp, socketp in
            let this = Unmanaged<CurlMulti>.fromOpaque(userp!).takeUnretainedValue()
            this.watch(socket: socket, what: what, context: socketp)
            return 0
        }
        haul_multi_setopt_timerfn(multi) { _, timeoutMS, userp in
            Unmanaged<CurlMulti>.fromOpaque(userp!).takeUnretainedValue().arm(timeoutMS: timeoutMS)
            return 0
        }
    }

    deinit { close() }

    /// Ends every transfer and closes curl's cached connections (their socket watches go with them). Nothing can be
    /// added afterwards. Called at shutdown, since a process that exits never runs this object's deinit.
    public func close() {
        guard let multi else { return }
        for transfer in running.values { curl_multi_remove_handle(multi, transfer.easy) }
        running.removeAll()
        byID.removeAll()
        checking.removeAll()
        curl_multi_cleanup(multi)
        self.multi = nil
        watches.removeAll()
        for event in [timer, sweep] {
            guard let event else { continue }
            event_del(event)
            event_free(event)
        }
        timer = nil
        sweep = nil
    }

    /// Starts `transfer`. Its `onComplete` runs on the loop thread when it ends, unless it is removed first. Throws
    /// when curl refuses it (it is then not running, and never completes).
    public func add(_ transfer: Transfer) throws(LoopError) {
        loop.assertInLoop()
        guard running[ObjectIdentifier(transfer)] == nil else { return }
        guard let multi else { throw LoopError.curl("curl_multi_add_handle", "the transfers are shut down") }
        transfer.prepareToStart()
        try CurlMulti.check(curl_multi_add_handle(multi, transfer.easy), "curl_multi_add_handle")
        running[ObjectIdentifier(transfer)] = transfer
        if transfer.needsSweeps { armSweep() }
    }

    /// Runs every transfer's state machine every `sweepInterval` while one needs it (an FTPS transfer): curl's
    /// socket callbacks leave its control connection unwatched while its data connection's TLS handshake waits for
    /// the server, and the server waits for a command on the control connection (vsftpd accepts TLS on the data
    /// connection only after RETR). curl's own poll loop wakes it every second; this does it for the event loop.
    private func armSweep() {
        if sweep == nil {
            let me = Unmanaged.passUnretained(self).toOpaque()
            sweep = event_new(
                loop.base, -1, 0,
                { _, _, arg in
                    Unmanaged<CurlMulti>.fromOpaque(arg!).takeUnretainedValue().swept()
                }, me)
            event_priority_set(sweep, EventLoop.Priority.transfer.rawValue)
        }
        guard let sweep, event_pending(sweep, Int16(haul_ev_timeout()), nil) == 0 else { return }
        let microseconds = Int(CurlMulti.sweepInterval * 1_000_000)
        var tv = timeval(tv_sec: microseconds / 1_000_000, tv_usec: microseconds % 1_000_000)
        event_add(sweep, &tv)
    }

    private func swept() {
        guard let multi else { return }
        var stillRunning: Int32 = 0
        haul_multi_socket_all(multi, &stillRunning)
        drainCompleted()
        if running.values.contains(where: \.needsSweeps) { armSweep() }
    }

    /// Stops `transfer` at once and closes its connection; `onComplete` is not called. Must not be called from
    /// inside one of the transfer's own callbacks.
    public func remove(_ transfer: Transfer) {
        loop.assertInLoop()
        guard running.removeValue(forKey: ObjectIdentifier(transfer)) != nil, let multi else { return }
        curl_multi_remove_handle(multi, transfer.easy)
    }

    /// The one place a multi call's result becomes an error.
    static func check(_ code: CURLMcode, _ call: String) throws(LoopError) {
        guard code != CURLM_OK else { return }
        throw LoopError.curl(call, String(cString: curl_multi_strerror(code)))
    }

    // MARK: Fetcher

    /// The transfers started through `Fetcher`, by id.
    var byID: [TransferID: Transfer] = [:]
    /// Requests whose next hop is being checked (a name resolved off the loop) before its transfer starts.
    var checking: [TransferID: Hop] = [:]

    public var activeCount: Int { running.count }

    // MARK: curl -> libevent

    private func watch(socket: curl_socket_t, what: Int32, context: UnsafeMutableRawPointer?) {
        guard let multi else { return }
        if what == CURL_POLL_REMOVE {
            watches.removeValue(forKey: socket)
            curl_multi_assign(multi, socket, nil)
            return
        }
        let watch: SocketWatch
        if let context {
            watch = Unmanaged<SocketWatch>.fromOpaque(context).takeUnretainedValue()
        } else {
            watch = SocketWatch(multi: self)
            watches[socket] = watch
            curl_multi_assign(multi, socket, Unmanaged.passUnretained(watch).toOpaque())
        }
        var flags = haul_ev_persist()
        if what == CURL_POLL_IN || what == CURL_POLL_INOUT { flags |= haul_ev_read() }
        if what == CURL_POLL_OUT || what == CURL_POLL_INOUT { flags |= haul_ev_write() }
        watch.set(base: loop.base, socket: socket, flags: flags)
    }

    private func arm(timeoutMS: Int) {
        guard let timer else { return }
        if timeoutMS < 0 {
            event_del(timer)
            return
        }
        // A zero timeout still goes through the loop: calling curl back from inside its own callback is not allowed.
        var tv = timeval(tv_sec: timeoutMS / 1000, tv_usec: (timeoutMS % 1000) * 1000)
        event_add(timer, &tv)
    }

    // MARK: libevent -> curl

    fileprivate func socketReady(_ socket: curl_socket_t, events: Int16) {
        var action: Int32 = 0
        if events & haul_ev_read() != 0 { action |= CURL_CSELECT_IN }
        if events & haul_ev_write() != 0 { action |= CURL_CSELECT_OUT }
        var stillRunning: Int32 = 0
        guard let multi else { return }
        curl_multi_socket_action(multi, socket, action, &stillRunning)
        drainCompleted()
    }

    private func timerFired() {
        guard let multi else { return }
        var stillRunning: Int32 = 0
        curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &stillRunning)
        drainCompleted()
    }

    private func drainCompleted() {
        guard let multi else { return }
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let result = haul_msg_result(message)
            var privatePointer: UnsafeMutableRawPointer?
            haul_easy_getinfo_ptr(easy, CURLINFO_PRIVATE, &privatePointer)
            guard let privatePointer else { continue }
            let transfer = Unmanaged<Transfer>.fromOpaque(privatePointer).takeUnretainedValue()
            guard running.removeValue(forKey: ObjectIdentifier(transfer)) != nil else { continue }
            curl_multi_remove_handle(multi, easy)
            transfer.finish(code: result)
        }
    }
}

/// The libevent event that watches one of curl's sockets; owned by the multi's `watches`, pointed to by curl through
/// `curl_multi_assign`.
private final class SocketWatch {
    private var event: OpaquePointer?
    /// The multi owns this watch, so it outlives it.
    private unowned let multi: CurlMulti
    private var flags: Int16 = 0

    init(multi: CurlMulti) { self.multi = multi }

    func set(base: OpaquePointer, socket: curl_socket_t, flags: Int16) {
        if let event {
            if flags == self.flags { return }
            event_del(event)
            event_free(event)
        }
        self.flags = flags
        event = event_new(
            base, socket, flags,
            { fd, events, arg in
                let watch = Unmanaged<SocketWatch>.fromOpaque(arg!).takeUnretainedValue()
                watch.multi.socketReady(fd, events: events)
            }, Unmanaged.passUnretained(self).toOpaque())
        event_priority_set(event, EventLoop.Priority.transfer.rawValue)
        event_add(event, nil)
    }

    deinit {
        if let event {
            event_del(event)
            event_free(event)
        }
    }
}
