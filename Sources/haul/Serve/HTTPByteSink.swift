import HaulAPI
import HaulLoop

/// A reader's stream carried by an evhttp reply: `ByteSink` on top of an `HTTPExchange`.
final class HTTPByteSink: ByteSink {
    private let exchange: any ServerExchange
    var onClose: (() -> Void)?

    init(exchange: any ServerExchange) {
        self.exchange = exchange
    }

    /// Opens the stream with a small kernel send buffer, so a reader that stops reading holds little memory (the
    /// next read waits for the last to drain).
    func start(status: Int, headers: [(name: String, value: String)]) {
        exchange.startStream(status: status, headers: headers)
        exchange.limitSendBuffer(256 * 1024)
        exchange.onClose = { [weak self] in
            guard let self else { return }
            let onClose = self.onClose
            self.onClose = nil
            onClose?()
        }
    }

    func respond(_ response: HTTPResponse) {
        onClose = nil
        exchange.respond(response)
    }

    func write(_ bytes: [UInt8], drained: @escaping () -> Void) {
        exchange.send(bytes, drained: drained)
    }

    func finish() {
        onClose = nil
        exchange.end()
    }

    func cut() {
        onClose = nil
        exchange.abort()
    }
}
