/// Compact JSON written straight into bytes, for answers read far more often than they change (a download's status,
/// a page of them, an event): no intermediate `JSONValue` tree, whose building, walking and freeing were over half
/// of a list's CPU. The same bytes as `JSONValue.serializedBytes()` of the same document: that serializer is this one.
///
/// Commas are the writer's: every key and every value that is not the first in its object or array gets one, read
/// from the byte before it (after `{`, `[` or a key's `:` none is due).
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []

    public init(capacity: Int = 1024) { bytes.reserveCapacity(capacity) }

    /// Appends a literal's bytes: a static array would cost a retain and a release at every use.
    @inline(__always)
    private mutating func literal(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    @inline(__always)
    private mutating func separate() {
        guard let last = bytes.last else { return }
        if last != UInt8(ascii: "{") && last != UInt8(ascii: "[") && last != UInt8(ascii: ":") {
            bytes.append(UInt8(ascii: ","))
        }
    }

    // MARK: structure

    /// An object whose members `body` writes (with `key` then a value).
    @inline(__always)
    public mutating func object(_ body: (inout JSONWriter) -> Void) {
        enclosed(UInt8(ascii: "{"), UInt8(ascii: "}"), body)
    }

    /// An array whose items `body` writes.
    @inline(__always)
    public mutating func array(_ body: (inout JSONWriter) -> Void) {
        enclosed(UInt8(ascii: "["), UInt8(ascii: "]"), body)
    }

    @inline(__always)
    private mutating func enclosed(_ open: UInt8, _ close: UInt8, _ body: (inout JSONWriter) -> Void) {
        separate()
        bytes.append(open)
        body(&self)
        bytes.append(close)
    }

    /// A member's name known when the program was built: plain ASCII that needs no escape (checked in debug builds).
    @inline(__always)
    public mutating func key(_ name: StaticString) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { raw in
            assert(raw.allSatisfy { $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") })
            bytes.append(contentsOf: raw)
        }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    /// A member's name written once by `JSONWriter.key(bytes:)` and kept: a table's names, not escaped again at
    /// every answer.
    @inline(__always)
    public mutating func key(written: [UInt8]) {
        separate()
        bytes.append(contentsOf: written)
    }

    /// `name` quoted and escaped with its colon, for `key(written:)`.
    public static func key(bytes name: String) -> [UInt8] {
        var out: [UInt8] = []
        escape(name, into: &out)
        out.append(UInt8(ascii: ":"))
        return out
    }

    /// A member's name from data: escaped as any string. (Its own label: a literal would pick `String` over
    /// `StaticString` and be escaped at every answer.)
    public mutating func key(text name: String) {
        separate()
        JSONWriter.escape(name, into: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    /// Bytes that are one whole JSON value already (another writer's document).
    public mutating func raw(_ json: [UInt8]) {
        separate()
        bytes.append(contentsOf: json)
    }

    // MARK: members

    /// A member: its name, then its value (null for nil).
    public mutating func member(_ name: StaticString, _ value: String?) {
        key(name)
        string(value)
    }

    public mutating func member(_ name: StaticString, _ value: Int64?) {
        key(name)
        integer(value)
    }

    public mutating func member(_ name: StaticString, _ value: Int) {
        key(name)
        integer(value)
    }

    public mutating func member(_ name: StaticString, _ value: Bool) {
        key(name)
        bool(value)
    }

    public mutating func member(_ name: StaticString, number value: Double?) {
        key(name)
        number(value)
    }

    // MARK: values

    public mutating func null() {
        separate()
        literal("null")
    }

    public mutating func bool(_ value: Bool) {
        separate()
        if value { literal("true") } else { literal("false") }
    }

    public mutating func string(_ value: String) {
        separate()
        JSONWriter.escape(value, into: &bytes)
    }

    public mutating func string(_ value: String?) {
        if let value { string(value) } else { null() }
    }

    public mutating func integer(_ value: Int64) {
        separate()
        JSONWriter.decimal(value, into: &bytes)
    }

    public mutating func integer(_ value: Int64?) {
        if let value { integer(value) } else { null() }
    }

    public mutating func integer(_ value: Int) { integer(Int64(value)) }

    /// A number: integral values as integers, others in Swift's shortest round-tripping form, NaN and infinities
    /// as null (JSON has no spelling for them).
    public mutating func number(_ value: Double) {
        separate()
        if value.rounded() == value, abs(value) < 9.0e15 {
            JSONWriter.decimal(Int64(value), into: &bytes)
        } else if value.isFinite {
            bytes.append(contentsOf: String(value).utf8)
        } else {
            literal("null")
        }
    }

    public mutating func number(_ value: Double?) {
        if let value { number(value) } else { null() }
    }

    /// A document as a tree (what a table of options shows, a part built elsewhere).
    public mutating func value(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let b): bool(b)
        case .number(let n): number(n)
        case .string(let s): string(s)
        case .array(let items):
            array { w in
                for item in items { w.value(item) }
            }
        case .object(let members):
            object { w in
                for (name, item) in members {
                    w.key(text: name)
                    w.value(item)
                }
            }
        }
    }

    // MARK: bytes

    @inline(__always)
    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }

    /// Whether a string may not hold `byte` as it is: `"`, `\`, the control characters, and 0xE2 (the lead byte of
    /// U+2028 and U+2029, which break JavaScript; most 0xE2 sequences are other characters and pass).
    @inline(__always)
    private static func needsAttention(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == 0x22 || byte == 0x5C || byte == 0xE2
    }

    /// An integer's decimal digits, without the String a `description` would make.
    @inline(__always)
    static func decimal(_ value: Int64, into out: inout [UInt8]) {
        if value >= 0 && value < 10 {
            out.append(UInt8(ascii: "0") + UInt8(value))
            return
        }
        var magnitude = value.magnitude
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = 20
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if value < 0 { out.append(UInt8(ascii: "-")) }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start..<20]))
        }
    }

    /// Quotes and escapes `s`: runs that need nothing are copied whole.
    static func escape(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = s
        text.withUTF8 { bytes in
            var runStart = 0
            var i = 0
            let count = bytes.count
            while i < count {
                let byte = bytes[i]
                guard needsAttention(byte) else {
                    i += 1
                    continue
                }
                var width = 1
                var second: UInt8 = 0
                switch byte {
                case UInt8(ascii: "\""): second = 0x22
                case UInt8(ascii: "\\"): second = 0x5C
                case 0x0A: second = UInt8(ascii: "n")
                case 0x0D: second = UInt8(ascii: "r")
                case 0x09: second = UInt8(ascii: "t")
                case 0xE2:
                    guard i + 2 < count, bytes[i + 1] == 0x80, bytes[i + 2] == 0xA8 || bytes[i + 2] == 0xA9 else {
                        i += 1
                        continue
                    }
                    width = 3
                default: break
                }
                if i > runStart { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<i])) }
                out.append(0x5C)
                if second != 0 {
                    out.append(second)
                } else if width == 3 {
                    // \u2028 or \u2029
                    for digit in [UInt8(ascii: "u"), UInt8(ascii: "2"), UInt8(ascii: "0"), UInt8(ascii: "2")] {
                        out.append(digit)
                    }
                    out.append(bytes[i + 2] == 0xA8 ? UInt8(ascii: "8") : UInt8(ascii: "9"))
                } else {
                    // \u00XX
                    out.append(UInt8(ascii: "u"))
                    out.append(UInt8(ascii: "0"))
                    out.append(UInt8(ascii: "0"))
                    out.append(hexDigit(byte >> 4))
                    out.append(hexDigit(byte & 15))
                }
                i += width
                runStart = i
            }
            if count > runStart { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<count])) }
        }
        out.append(UInt8(ascii: "\""))
    }
}
