import HaulAPI
import HaulLoop

/// An event stream carried by an evhttp reply: the hub's `EventSink` on top of an `HTTPExchange`.
final class HTTPEventSink: EventSink {
    private let exchange: any ServerExchange
    var onDrained: (() -> Void)?
    var onClose: (() -> Void)?

    /// Opens the stream: status, headers, and a small kernel send buffer so a stalled client shows up in
    /// `queuedBytes` within kilobytes.
    init(exchange: any ServerExchange, headers: [(name: String, value: String)]) {
        self.exchange = exchange
        exchange.startStream(status: 200, headers: headers)
        exchange.limitSendBuffer(64 * 1024)
        exchange.onClose = { [unowned self] in
            let onClose = self.onClose
            self.onClose = nil
            self.onDrained = nil
            onClose?()
        }
    }

    func write(_ text: String) {
        exchange.send(Array(text.utf8), drained: { [weak self] in self?.onDrained?() })
    }

    var queuedBytes: Int { exchange.queuedBytes }

    func close() {
        exchange.abort()
    }

    func finish() {
        exchange.end()
        onClose = nil
        onDrained = nil
    }
}
