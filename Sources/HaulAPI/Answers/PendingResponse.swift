import HaulLoop

/// A response that is not ready when the handler returns: work that would hold the loop too long at once (removing
/// thousands of downloads) goes on a slice per loop turn, and the answer is sent when it is done. The loop answers
/// other requests in between. Confined to the loop thread.
public final class PendingResponse {
    private var ready: HTTPResponse?
    private var waiting: ((HTTPResponse) -> Void)?
    /// Headers every answer gets (CORS, the referrer policy), added when it is ready.
    var headers: [(name: String, value: String)] = []

    init() {}

    /// The response, once resolved.
    public var response: HTTPResponse? { ready }

    /// Hands the response to `send` when it is ready (at once if it is).
    public func whenReady(_ send: @escaping (HTTPResponse) -> Void) {
        if let ready { return send(ready) }
        waiting = send
    }

    func resolve(_ response: HTTPResponse) {
        guard ready == nil else { return }
        let complete = response.adding(headers)
        ready = complete
        let send = waiting
        waiting = nil
        send?(complete)
    }
}
