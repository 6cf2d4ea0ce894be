internal import CCurl

/// One blocking HTTP request made with a curl easy handle, for the command-line client: it talks to a Haul server
/// and has nothing else to do meanwhile. The body can be streamed as it arrives (event streams).
public struct APIRequest {
    public var method = "GET"
    public var url: String
    public var headers: [(String, String)] = []
    public var body: [UInt8]?
    /// Seconds to connect; the transfer itself has no limit (an event stream runs until stopped).
    public var connectTimeout = 10.0
    /// Seconds for the whole request, or 0 for none.
    public var timeout = 30.0

    public init(method: String = "GET", url: String) {
        self.method = method
        self.url = url
    }

    /// Why a request got no HTTP answer.
    public struct Failure: Error, CustomStringConvertible {
        /// curl's words, e.g. "Failed to connect to 127.0.0.1 port 8080 after 0 ms: Couldn't connect to server".
        public let description: String
    }

    /// Sends the request and returns the status and the whole body.
    public func send() throws(Failure) -> (status: Int, body: [UInt8]) {
        var body: [UInt8] = []
        let status = try stream { _, chunk in
            body += chunk
            return true
        }
        return (status, body)
    }

    /// Sends the request and hands `onData` the response status and the body as it arrives, until it returns
    /// false or the body ends. Returns the status; a stop by `onData` is not a failure.
    public func stream(_ onData: @escaping (_ status: Int, _ chunk: [UInt8]) -> Bool) throws(Failure) -> Int {
        guard let easy = curl_easy_init() else { throw Failure(description: "curl_easy_init failed") }
        defer { curl_easy_cleanup(easy) }
        let sink = Sink(easy: easy, onData: onData)
        let context = Unmanaged.passUnretained(sink).toOpaque()
        var headerList: UnsafeMutablePointer<curl_slist>?
        for (name, value) in headers { headerList = curl_slist_append(headerList, "\(name): \(value)") }
        defer { curl_slist_free_all(headerList) }
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        defer { errorBuffer.deallocate() }

        _ = haul_easy_setopt_string(easy, CURLOPT_URL, url)
        _ = haul_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, method)
        _ = haul_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        _ = haul_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        // The client follows the user's proxy variables as curl does, but never for a server on this machine.
        _ = haul_easy_setopt_string(easy, CURLOPT_NOPROXY, "localhost,127.0.0.1,::1")
        _ = haul_easy_setopt_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        _ = haul_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(connectTimeout * 1000))
        _ = haul_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(timeout * 1000))
        _ = haul_easy_setopt_string(easy, CURLOPT_USERAGENT, "haul-cli/0.1")
        _ = haul_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList)
        if method == "HEAD" { _ = haul_easy_setopt_long(easy, CURLOPT_NOBODY, 1) }
        _ = haul_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, context)
        _ = haul_easy_setopt_writefn(easy, CURLOPT_WRITEFUNCTION) { data, size, count, userdata in
            let sink = Unmanaged<Sink>.fromOpaque(userdata!).takeUnretainedValue()
            let length = size * count
            let chunk = Array(UnsafeRawBufferPointer(start: data, count: length))
            var status = 0
            _ = haul_easy_getinfo_long(sink.easy, CURLINFO_RESPONSE_CODE, &status)
            guard sink.onData(status, chunk) else {
                sink.stopped = true
                return 0
            }
            return length
        }
        if let body {
            // curl copies the body (COPYPOSTFIELDS), so nothing here must outlive this call; the extra byte gives an
            // empty body storage too.
            var bytes: [UInt8] = body
            bytes.append(0)
            _ = haul_easy_setopt_long(easy, CURLOPT_POSTFIELDSIZE, body.count)
            bytes.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) -> Void in
                _ = haul_easy_setopt_ptr(easy, CURLOPT_COPYPOSTFIELDS, buffer.baseAddress)
            }
        }
        let result = curl_easy_perform(easy)
        var status = 0
        _ = haul_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        if result != CURLE_OK && !(result == CURLE_WRITE_ERROR && sink.stopped) {
            let detail = String(cString: errorBuffer)
            throw Failure(description: detail.isEmpty ? String(cString: curl_easy_strerror(result)) : detail)
        }
        return status
    }

    private final class Sink {
        let easy: UnsafeMutableRawPointer
        let onData: (Int, [UInt8]) -> Bool
        var stopped = false

        init(easy: UnsafeMutableRawPointer, onData: @escaping (Int, [UInt8]) -> Bool) {
            self.easy = easy
            self.onData = onData
        }
    }
}
