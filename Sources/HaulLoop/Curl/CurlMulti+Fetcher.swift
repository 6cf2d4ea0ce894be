internal import CCurl

/// `Fetcher` over the multi: transfers by id, and requests whose every hop Haul checks against the address policy
/// before curl connects (through a proxy, curl's socket opener sees only the proxy's address).
extension CurlMulti: Fetcher {
    public func start(_ id: TransferID, _ request: TransferRequest, delegate: FetchDelegate) throws {
        try start(id, CurlMulti.prepare(request), delegate: delegate)
    }

    /// Builds what `start` would for `request`, on any thread, throwing as `start` does: a transfer loop's fetcher
    /// (`TransferLoops`) builds on its caller's thread, so that what cannot start says so at once, and starts on the
    /// multi's.
    public static func prepare(_ request: TransferRequest) throws -> PreparedTransfer {
        // A request whose hops are checked is built hop by hop, on the multi's loop.
        guard !request.policy.checksEachHop else { return PreparedTransfer(request: request, transfer: nil) }
        let proxy = request.policy.proxy(forHost: proxyHost(request.url))
        return PreparedTransfer(request: request, transfer: try Transfer(request, proxy: proxy))
    }

    /// Starts what `prepare` built; throws only when the multi refuses the transfer.
    public func start(_ id: TransferID, _ prepared: PreparedTransfer, delegate: FetchDelegate) throws {
        let request = prepared.request
        if let transfer = prepared.transfer {
            return try launch(id, request, proxy: transfer.proxy, delegate: delegate, built: transfer)
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

    /// Whether `id` runs as a stream of a shared connection (HTTP/2): holding it does not stop its connection's
    /// reads, curl keeps what arrives for it meanwhile (libcurl 7.88 kept it past the handle's cleanup: 23 MB under
    /// LeakSanitizer), so a transfer loop never holds one.
    func isMultiplexed(_ id: TransferID) -> Bool {
        guard let transfer = byID[id] else { return false }
        var version = 0
        _ = haul_easy_getinfo_long(transfer.easy, CURLINFO_HTTP_VERSION, &version)
        return version >= Int(CURL_HTTP_VERSION_2_0)
    }

    /// Whether `id` was started here and has neither ended nor been cancelled.
    func isRunning(_ id: TransferID) -> Bool { byID[id] != nil || checking[id] != nil }

    /// The host a URL's proxy is chosen by; parsed only when there is a proxy to choose.
    private static func proxyHost(_ url: String) -> String { URLParts(url)?.host ?? "" }

    private func launch(
        _ id: TransferID, _ request: TransferRequest, proxy: ProxyServer?, pinned: [String] = [],
        delegate: FetchDelegate, hop: Hop? = nil, built: Transfer? = nil
    ) throws {
        // The delegate is held until the transfer ends or is cancelled (then `byID` lets go of the transfer and its
        // closures): no weak reference, which would outlive a delegate that a shutdown leaves behind.
        let transfer = try built ?? Transfer(request, proxy: proxy, pinned: pinned)
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
            hop.request.profile.redirects.contains(parts.scheme)
        else {
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
            return startChecked(hop, proxy: policy.proxy(forHost: CurlMulti.proxyHost(url)))
        }
        guard let proxy = policy.proxy(forHost: parts.host) else { return startChecked(hop, proxy: nil) }
        if let literal = parts.literalAddress {
            // Handed to the loop's next turn, as a resolved name is: never an end inside `start`.
            // Held strongly until then (no cycle: the loop lets go of the closure once run). Never weak: the
            // side table a weak reference makes is invisible to LeakSanitizer behind its tagged pointer.
            return loop.offload(
                { () },
                then: {
                    guard self.checking[hop.id] != nil else { return }
                    guard addressPolicy.allows(literal) else { return self.refuse(hop, literal) }
                    self.startChecked(hop, proxy: proxy)
                })
        }
        let host = parts.host
        loop.offload(
            { IPAddress.resolve(host) },
            then: { resolved in
                guard self.checking[hop.id] != nil else { return }
                switch resolved {
                case .failure(let error):
                    // Not even a proxy that resolves names itself is asked for a name Haul cannot check: it could be
                    // a private zone only the proxy knows.
                    self.fail(
                        hop, .dns,
                        "Could not resolve host: \(host) (\(error.message)); under the address "
                            + "policy a name is resolved and checked before the proxy is asked")
                case .success(let addresses):
                    if let refused = addresses.first(where: { !addressPolicy.allows($0) }) {
                        return self.refuse(hop, refused)
                    }
                    // A proxy that takes an address (socks4, socks5) gets one of those checked: curl resolves through
                    // these entries instead of asking DNS again, which could answer differently.
                    let pinned =
                        proxy.resolvesNames || addresses.isEmpty
                        ? []
                        : [
                            "\(host):\(parts.port):"
                                + addresses.map { bytes in
                                    bytes.count == 16 ? "[\(IPAddress.text(bytes))]" : IPAddress.text(bytes)
                                }.joined(separator: ",")
                        ]
                    self.startChecked(hop, proxy: proxy, pinned: pinned)
                }
            })
    }

    private func refuse(_ hop: Hop, _ address: [UInt8]) {
        let reason = AddressPolicy.reason(address) ?? "not allowed"
        let host = URLParts(hop.request.url)?.host ?? ""
        let shownHost = host == IPAddress.text(address) ? "" : " (\(host))"
        fail(
            hop, .blockedAddress,
            "refused to connect to \(IPAddress.text(address))\(shownHost), a \(reason) "
                + "address; it is not asked of the proxy either")
    }

    private func startChecked(_ hop: Hop, proxy: ProxyServer?, pinned: [String] = []) {
        guard checking.removeValue(forKey: hop.id) != nil else { return }
        do {
            try launch(hop.id, hop.request, proxy: proxy, pinned: pinned, delegate: hop.delegate, hop: hop)
        } catch {
            // Never inside `start`: the delegate hears of the end on the loop's next turn.
            let message = "\(error)"
            loop.offload(
                { () },
                then: {
                    hop.delegate.transfer(
                        hop.id, ended: TransferResult(failure: .other, message: message, response: nil))
                })
        }
    }
}

/// A request's transfer, built but not started (`CurlMulti.prepare`): handed from the thread that built it to the
/// multi's, used by one at a time.
public struct PreparedTransfer: @unchecked Sendable {
    let request: TransferRequest
    /// nil when the multi builds it, one hop at a time.
    let transfer: Transfer?
}
