import FoundationEssentials

/// RFC 6455 framing for a server: what a client sends (masked frames, messages in fragments, control frames
/// between them) read back into messages, and what the server sends (unmasked frames). Pure: the connection feeds
/// it bytes and does what it says.
public struct WebSocketFrames {
    /// What the bytes so far amount to.
    public enum Output: Equatable {
        case text(String)
        case binary([UInt8])
        case ping([UInt8])
        case pong
        /// The client closes (its status code, if it gave one).
        case close(UInt16?)
        /// The client broke the protocol: close with this status (1002 protocol, 1007 bad UTF-8, 1009 too big).
        case fail(UInt16, String)
    }

    /// The largest message accepted, fragments together.
    public let maxMessage: Int
    private var buffer: [UInt8] = []
    private var message: [UInt8] = []
    /// The opcode of the message being reassembled (1 text, 2 binary), nil between messages.
    private var messageOpcode: UInt8?

    public init(maxMessage: Int = 1 << 20) { self.maxMessage = maxMessage }

    /// Whether no frame or message is partly read: nothing held waits for more bytes.
    public var isIdle: Bool { buffer.isEmpty && messageOpcode == nil }

    /// Takes `bytes` and returns every complete message and control frame in them, in order; after a `.fail` or
    /// `.close` nothing more is read.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> [Output] {
        buffer.append(contentsOf: bytes)
        var outputs: [Output] = []
        var offset = 0
        defer { buffer.removeFirst(offset) }
        while true {
            let available = buffer.count - offset
            guard available >= 2 else { return outputs }
            let first = buffer[offset], second = buffer[offset + 1]
            let fin = first & 0x80 != 0
            let opcode = first & 0x0F
            guard first & 0x70 == 0 else { return outputs + [.fail(1002, "reserved bits set")] }
            guard second & 0x80 != 0 else { return outputs + [.fail(1002, "a client's frames must be masked")] }
            var length = Int(second & 0x7F)
            var header = 2
            if length == 126 {
                guard available >= 4 else { return outputs }
                length = Int(buffer[offset + 2]) << 8 | Int(buffer[offset + 3])
                header = 4
            } else if length == 127 {
                guard available >= 10 else { return outputs }
                var long: UInt64 = 0
                for index in 2..<10 { long = long << 8 | UInt64(buffer[offset + index]) }
                guard long <= UInt64(maxMessage) else { return outputs + [.fail(1009, "message too large")] }
                length = Int(long)
                header = 10
            }
            let isControl = opcode & 0x08 != 0
            if isControl, length > 125 || !fin {
                return outputs + [.fail(1002, "a control frame over 125 bytes or fragmented")]
            }
            guard message.count + length <= maxMessage else { return outputs + [.fail(1009, "message too large")] }
            guard available >= header + 4 + length else { return outputs }
            let mask = Array(buffer[(offset + header)..<(offset + header + 4)])
            let start = offset + header + 4
            var payload = Array(buffer[start..<(start + length)])
            for index in payload.indices { payload[index] ^= mask[index & 3] }
            offset = start + length
            switch opcode {
            case 0x8:
                let code = payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : nil
                return outputs + [.close(code)]
            case 0x9: outputs.append(.ping(payload))
            case 0xA: outputs.append(.pong)
            case 0x1, 0x2:
                guard messageOpcode == nil else { return outputs + [.fail(1002, "a new message inside another")] }
                messageOpcode = opcode
                message = payload
            case 0x0:
                guard messageOpcode != nil else { return outputs + [.fail(1002, "a continuation of nothing")] }
                message += payload
            default:
                return outputs + [.fail(1002, "unknown opcode \(opcode)")]
            }
            if !isControl, fin, let kind = messageOpcode {
                messageOpcode = nil
                defer { message = [] }
                if kind == 0x2 {
                    outputs.append(.binary(message))
                } else if let text = String(validating: message, as: UTF8.self) {
                    outputs.append(.text(text))
                } else {
                    return outputs + [.fail(1007, "a text message that is not UTF-8")]
                }
            }
        }
    }

    /// A server frame: FIN set, unmasked.
    public static func frame(opcode: UInt8, _ payload: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x80 | opcode]
        switch payload.count {
        case ..<126: out.append(UInt8(payload.count))
        case ..<65536: out += [126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        default:
            out.append(127)
            for shift in stride(from: 56, through: 0, by: -8) {
                out.append(UInt8((UInt64(payload.count) >> UInt64(shift)) & 0xFF))
            }
        }
        return out + payload
    }

    /// The `Sec-WebSocket-Accept` for a client's `Sec-WebSocket-Key`.
    public static func accept(key: String) -> String {
        Base64.encode(Digest.of(Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8), .sha1))
    }
}
