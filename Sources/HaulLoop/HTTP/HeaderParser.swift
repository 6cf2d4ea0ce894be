/// Response header blocks built from the lines curl hands over one at a time (status line, fields, blank line);
/// redirects and interim responses each start a new block. Parsed as bytes: it runs for every header of every
/// response, and it reads whatever an origin sends.
public struct HeaderParser: Sendable {
    /// The status of the block being read (0 before a status line).
    public private(set) var status = 0
    /// Its fields, names lower-cased, in order.
    public private(set) var headers: [(name: String, value: String)] = []

    public init() {}

    /// Reads one line; true when it is the blank line that ends a final (status 200 or more) block.
    public mutating func feed(_ raw: UnsafeRawBufferPointer) -> Bool {
        let bytes = raw.bindMemory(to: UInt8.self)
        var end = bytes.count
        while end > 0, bytes[end - 1] == 0x0A || bytes[end - 1] == 0x0D || bytes[end - 1] == 0x20 { end -= 1 }
        if end == 0 { return status >= 200 }
        let line = UnsafeBufferPointer(rebasing: bytes[0..<end])
        if line.starts(with: Array("HTTP/".utf8)) {
            var index = 0
            while index < line.count, line[index] != 0x20 { index += 1 }
            while index < line.count, line[index] == 0x20 { index += 1 }
            var code = 0
            while index < line.count, (0x30...0x39).contains(line[index]), code < 1000 {
                code = code * 10 + Int(line[index] - 0x30)
                index += 1
            }
            status = code
            headers = []
        } else if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
            var valueStart = colon + 1
            while valueStart < line.count, line[valueStart] == 0x20 || line[valueStart] == 0x09 { valueStart += 1 }
            var nameEnd = colon
            while nameEnd > 0, line[nameEnd - 1] == 0x20 { nameEnd -= 1 }
            let name = String(
                decoding: line[0..<nameEnd].map { (0x41...0x5A).contains($0) ? $0 + 32 : $0 },
                as: UTF8.self)
            headers.append((name, String(decoding: line[valueStart...], as: UTF8.self)))
        }
        return false
    }
}
