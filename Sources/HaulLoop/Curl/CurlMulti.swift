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
        timer = event_new(loop.base, -1, 0, { _, _, arg in
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
            sweep = event_new(loop.base, -1, 0, { _, _, arg in
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
    private var byID: [TransferID: Transfer] = [:]
    /// Requests whose next hop is being checked (a name resolved off the loop) before its transfer starts.
    private var checking: [TransferID: Hop] = [:]

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

extension CurlMulti: Fetcher {
    public func start(_ id: TransferID, _ request: TransferRequest, delegate: FetchDelegate) throws {
        guard request.policy.checksEachHop else {
            return try launch(id, request, proxy: request.policy.proxy(forHost: proxyHost(request.url)),
                              delegate: delegate)
        }
        // The first hop is checked like every later one, off the loop, so a refusal reaches the delegate as an
        // end after `start` returned, as any transfer's end does.
        let hop = Hop(id: id, request: request, origin: URLParts(request.url), delegate: delegate)
        checking[id] = hop
        check(hop)
    }

    public func cancel(_ id: TransferID) {
        if checking.removeValue(forKey: id) != nil { return }
        guard let transfer = byID.removeValue(forKey: id) else { return }
        remove(transfer)
    }

    public func resume(_ id: TransferID) {
        byID[id]?.resume()
    }

    /// The host a URL's proxy is chosen by; parsed only when there is a proxy to choose.
    private func proxyHost(_ url: String) -> String { URLParts(url)?.host ?? "" }

    private func launch(_ id: TransferID, _ request: TransferRequest, proxy: ProxyServer?, pinned: [String] = [],
                        delegate: FetchDelegate, hop: Hop? = nil) throws {
        // The delegate is held until the transfer ends or is cancelled (then `byID` lets go of the transfer and its
        // closures): no weak reference, which would outlive a delegate that a shutdown leaves behind.
        let transfer = try Transfer(request, proxy: proxy, pinned: pinned)
        transfer.onResponse = { response in delegate.transfer(id, responded: response) }
        transfer.onData = { chunk in delegate.transfer(id, received: chunk) }
        transfer.onComplete = { [unowned self] result in
            self.byID.removeValue(forKey: id)
            delegate.transfer(id, ended: result)
        }
        if request.credentials != nil, !request.digestAuth {
            transfer.onDigestChallenge = { [unowned self] in
                self.byID.removeValue(forKey: id)
                var again = request
                again.digestAuth = true
                do {
                    try self.launch(id, again, proxy: proxy, pinned: pinned, delegate: delegate, hop: hop)
                } catch {
                    delegate.transfer(id, ended: TransferResult(failure: .other, message: "\(error)", response: nil))
                }
            }
        }
        if var hop {
            transfer.onRedirect = { [unowned self] target in
                self.byID.removeValue(forKey: id)
                hop.redirects += 1
                self.follow(hop, to: target)
            }
        }
        try add(transfer)
        byID[id] = transfer
    }

    // MARK: one hop at a time, through a proxy under the address policy

    /// A request whose every hop is checked by Haul: curl's socket opener sees only the proxy's address, so the
    /// origin's is checked here, before the request for it goes out.
    struct Hop {
        let id: TransferID
        var request: TransferRequest
        /// The first URL's parts: credentials and cookies go only to its host.
        let origin: URLParts?
        let delegate: FetchDelegate
        var redirects = 0
    }

    /// Ends `hop` with `failure`, as its transfer would have.
    private func fail(_ hop: Hop, _ failure: TransferFailure, _ message: String) {
        checking.removeValue(forKey: hop.id)
        hop.delegate.transfer(hop.id, ended: TransferResult(failure: failure, message: message, response: nil))
    }

    /// The next hop of `hop`, to the absolute URL a redirect named.
    private func follow(_ hop: Hop, to target: String) {
        var next = hop
        guard next.redirects <= hop.request.policy.maxRedirects else {
            return fail(hop, .tooManyRedirects, "Maximum (\(hop.request.policy.maxRedirects)) redirects followed")
        }
        // Only to the schemes an answer of its kind may lead to (as curl is told when it follows them itself).
        guard let parts = URLParts(target), hop.request.policy.schemes.contains(parts.scheme),
              hop.request.profile.redirects.contains(parts.scheme) else {
            return fail(hop, .unsupportedScheme, "a redirect to \(URLPassword.redacted(target)) is not followed")
        }
        next.request.url = target
        if parts.host != hop.origin?.host || parts.port != hop.origin?.port || parts.scheme != hop.origin?.scheme {
            // As curl does when it follows: what authenticates to the first host stays with it.
            next.request.headers.removeAll { header in
                ASCII.equalsIgnoringCase(header.0, "authorization") || ASCII.equalsIgnoringCase(header.0, "cookie")
            }
            next.request.credentials = nil
        }
        checking[hop.id] = next
        check(next)
    }

    /// Checks the origin of `hop`'s URL: directly when it goes direct (the socket opener checks the address), else
    /// its IP literal, or every address its name resolves to, before the transfer starts.
    private func check(_ hop: Hop) {
        let url = hop.request.url
        let policy = hop.request.policy
        guard let parts = URLParts(url), let addressPolicy = policy.addressPolicy else {
            return startChecked(hop, proxy: policy.proxy(forHost: proxyHost(url)))
        }
        guard let proxy = policy.proxy(forHost: parts.host) else { return startChecked(hop, proxy: nil) }
        if let literal = parts.literalAddress {
            // Handed to the loop's next turn, as a resolved name is: never an end inside `start`.
            // Held strongly until then (no cycle: the loop lets go of the closure once run). Never weak: the
            // side table a weak reference makes is invisible to LeakSanitizer behind its tagged pointer.
            return loop.offload({ () }, then: {
                guard self.checking[hop.id] != nil else { return }
                guard addressPolicy.allows(literal) else { return self.refuse(hop, literal) }
                self.startChecked(hop, proxy: proxy)
            })
        }
        let host = parts.host
        loop.offload({ IPAddress.resolve(host) }, then: { resolved in
            guard self.checking[hop.id] != nil else { return }
            switch resolved {
            case .failure(let error):
                // Not even a proxy that resolves names itself is asked for a name Haul cannot check: it could be
                // a private zone only the proxy knows.
                self.fail(hop, .dns, "Could not resolve host: \(host) (\(error.message)); under the address "
                          + "policy a name is resolved and checked before the proxy is asked")
            case .success(let addresses):
                if let refused = addresses.first(where: { !addressPolicy.allows($0) }) {
                    return self.refuse(hop, refused)
                }
                // A proxy that takes an address (socks4, socks5) gets one of those checked: curl resolves through
                // these entries instead of asking DNS again, which could answer differently.
                let pinned = proxy.resolvesNames || addresses.isEmpty ? [] :
                    ["\(host):\(parts.port):" + addresses.map { bytes in
                        bytes.count == 16 ? "[\(IPAddress.text(bytes))]" : IPAddress.text(bytes)
                    }.joined(separator: ",")]
                self.startChecked(hop, proxy: proxy, pinned: pinned)
            }
        })
    }

    private func refuse(_ hop: Hop, _ address: [UInt8]) {
        let reason = AddressPolicy.reason(address) ?? "not allowed"
        let host = URLParts(hop.request.url)?.host ?? ""
        let shownHost = host == IPAddress.text(address) ? "" : " (\(host))"
        fail(hop, .blockedAddress, "refused to connect to \(IPAddress.text(address))\(shownHost), a \(reason) "
             + "address; it is not asked of the proxy either")
    }

    private func startChecked(_ hop: Hop, proxy: ProxyServer?, pinned: [String] = []) {
        guard checking.removeValue(forKey: hop.id) != nil else { return }
        do {
            try launch(hop.id, hop.request, proxy: proxy, pinned: pinned, delegate: hop.delegate, hop: hop)
        } catch {
            // Never inside `start`: the delegate hears of the end on the loop's next turn.
            let message = "\(error)"
            loop.offload({ () }, then: {
                hop.delegate.transfer(hop.id, ended: TransferResult(failure: .other, message: message, response: nil))
            })
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
        event = event_new(base, socket, flags, { fd, events, arg in
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
