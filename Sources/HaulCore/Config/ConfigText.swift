/// The text of a config file (`haul serve --config FILE`) as option entries: TOML (`max-active = 10`) or JSON
/// (`{"max_active": 10}`). Names are the options' with dashes or underscores; a list
/// (`cors-origin = ["https://a.example", "https://b.example"]`) is the comma-separated value of its flag.
/// The TOML read is the part of TOML such a file needs: `name = value` lines, strings (with TOML's escapes),
/// numbers, booleans, arrays on one line, comments; LF or CRLF line ends and an optional byte order mark.
public enum ConfigText {
    public struct Entry: Equatable, Sendable {
        public var name: String
        public var value: String
        /// Where it was, for messages: `name in FILE:LINE`.
        public var place: String
        /// A list's strings as written (`value` joins them with commas): an argument list keeps its commas.
        public var items: [String]?

        public init(name: String, value: String, place: String, items: [String]? = nil) {
            self.name = name
            self.value = value
            self.place = place
            self.items = items
        }
    }

    public struct Invalid: Error, CustomStringConvertible, Sendable {
        public let description: String
        public init(description: String) { self.description = description }
    }

    /// The entries of a file's bytes: JSON for a path ending in `.json`, TOML otherwise.
    public static func entries(_ bytes: [UInt8], path: String) throws(Invalid) -> [Entry] {
        path.hasSuffix(".json") ? try json(bytes, path: path) : try toml(bytes, path: path)
    }

    public static func json(_ bytes: [UInt8], path: String) throws(Invalid) -> [Entry] {
        let value: JSONValue
        do {
            value = try JSONValue.parse(bytes)
        } catch {
            throw Invalid(description: "the config file \(path) is not valid JSON: \(error)")
        }
        guard case .object(let members) = value else {
            throw Invalid(description: "the config file \(path) is not a JSON object")
        }
        let entries = try members.map { name, value throws(Invalid) in
            let place = "\(name) in \(path)"
            guard let text = scalar(value) ?? list(value) else {
                throw Invalid(description: "\(place) must be a string, a number, true or false, or a list of strings")
            }
            var items: [String]?
            if case .array(let elements) = value { items = elements.compactMap(\.stringValue) }
            return Entry(name: name, value: text, place: place, items: items)
        }
        try refuseRepeats(entries)
        return entries
    }

    private static func scalar(_ value: JSONValue) -> String? {
        switch value {
        case .string(let text): return text
        case .bool(let flag): return flag ? "1" : "0"
        case .number: return value.integerValue.map(String.init) ?? value.serialized()
        default: return nil
        }
    }

    private static func list(_ value: JSONValue) -> String? {
        guard case .array(let elements) = value else { return nil }
        let texts = elements.compactMap(\.stringValue)
        return texts.count == elements.count ? texts.joined(separator: ",") : nil
    }

    public static func toml(_ bytes: [UInt8], path: String) throws(Invalid) -> [Entry] {
        // A byte order mark some editors write first.
        let text = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? Array(bytes.dropFirst(3)) : bytes
        guard String(validating: text, as: UTF8.self) != nil else {
            throw Invalid(description: "the config file \(path) is not UTF-8 text")
        }
        var entries: [Entry] = []
        // Split as bytes: as Characters, "\r\n" is one and a CRLF file would be a single line.
        for (index, rawLine) in text.split(separator: 0x0A, omittingEmptySubsequences: false).enumerated() {
            let place = "\(path):\(index + 1)"
            var scanner = TOMLLine(Array(rawLine))
            scanner.skipSpaces()
            if scanner.atEnd || scanner.peek == UInt8(ascii: "#") { continue }
            if scanner.peek == UInt8(ascii: "[") {
                throw Invalid(description: "\(place): tables are not used; write name = value lines at the top")
            }
            guard let name = scanner.key() else { throw Invalid(description: "\(place): expected name = value") }
            scanner.skipSpaces()
            guard scanner.take(UInt8(ascii: "=")) else {
                throw Invalid(description: "\(place): expected = after \(name)")
            }
            scanner.skipSpaces()
            let value: String
            do {
                value = try scanner.value()
            } catch {
                throw Invalid(description: "\(name) in \(place): \(error.description)")
            }
            scanner.skipSpaces()
            guard scanner.atEnd || scanner.peek == UInt8(ascii: "#") else {
                throw Invalid(description: "\(name) in \(place): unexpected text after the value")
            }
            entries.append(Entry(name: name, value: value, place: "\(name) in \(place)", items: scanner.items))
        }
        try refuseRepeats(entries)
        return entries
    }

    /// TOML forbids a key twice, and `max-active` and `max_active` are one option: which one would win is a guess
    /// nobody should have to make.
    private static func refuseRepeats(_ entries: [Entry]) throws(Invalid) {
        var seen: [String: String] = [:]
        for entry in entries {
            let key = entry.name.replacing("_", with: "-")
            if let first = seen[key] {
                throw Invalid(description: "\(entry.place): \(entry.name) is given again (first as \(first))")
            }
            seen[key] = entry.place
        }
    }
}

/// One TOML line, read byte by byte.
private struct TOMLLine {
    private let bytes: [UInt8]
    private var index = 0
    /// The strings of the list `value` read, if it read one.
    private(set) var items: [String]?

    init(_ bytes: [UInt8]) {
        self.bytes = bytes.last == UInt8(ascii: "\r") ? Array(bytes.dropLast()) : bytes
    }

    var atEnd: Bool { index >= bytes.count }
    var peek: UInt8? { atEnd ? nil : bytes[index] }

    mutating func skipSpaces() {
        while let byte = peek, byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") { index += 1 }
    }

    mutating func take(_ byte: UInt8) -> Bool {
        guard peek == byte else { return false }
        index += 1
        return true
    }

    private static func isBareKeyByte(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || (0x30...0x39).contains(byte)
            || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
    }

    /// A bare key (letters, digits, `-`, `_`) or a quoted one.
    mutating func key() -> String? {
        if peek == UInt8(ascii: "\"") || peek == UInt8(ascii: "'") { return try? string() }
        let start = index
        while let byte = peek, TOMLLine.isBareKeyByte(byte) { index += 1 }
        return index > start ? String(decoding: bytes[start..<index], as: UTF8.self) : nil
    }

    /// A string, number, boolean or one-line array of strings, as the text of the option's value.
    mutating func value() throws(ConfigText.Invalid) -> String {
        switch peek {
        case UInt8(ascii: "\"")?, UInt8(ascii: "'")?:
            return try string()
        case UInt8(ascii: "[")?:
            index += 1
            var items: [String] = []
            while true {
                skipSpaces()
                if take(UInt8(ascii: "]")) { break }
                items.append(try string())
                skipSpaces()
                if take(UInt8(ascii: ",")) { continue }
                guard take(UInt8(ascii: "]")) else { throw .init(description: "a list is [\"a\", \"b\"] on one line") }
                break
            }
            self.items = items
            return items.joined(separator: ",")
        default:
            let start = index
            while let byte = peek, byte != UInt8(ascii: " "), byte != UInt8(ascii: "\t"), byte != UInt8(ascii: "#") {
                index += 1
            }
            let word = String(decoding: bytes[start..<index], as: UTF8.self)
            switch word {
            case "true": return "1"
            case "false": return "0"
            case "": throw .init(description: "a value is missing")
            default:
                // Numbers: TOML's underscores between digits go; sizes like 4m are strings ("4m") but also taken bare.
                let plain = word.replacing("_", with: "")
                guard
                    plain.utf8.allSatisfy({
                        TOMLLine.isBareKeyByte($0) || $0 == UInt8(ascii: ".")
                            || $0 == UInt8(ascii: "+")
                    })
                else {
                    throw .init(description: "write text in quotes: \"\(word)\"")
                }
                return plain
            }
        }
    }

    /// A basic ("...", with TOML's escapes) or literal ('...') string.
    mutating func string() throws(ConfigText.Invalid) -> String {
        guard let quote = peek else { throw .init(description: "a string is missing") }
        index += 1
        var out: [UInt8] = []
        while let byte = peek {
            index += 1
            if byte == quote { return String(decoding: out, as: UTF8.self) }
            if byte < 0x20 && byte != 0x09 || byte == 0x7F {
                throw .init(description: "a control character in a string (write it as an escape)")
            }
            guard quote == UInt8(ascii: "\""), byte == UInt8(ascii: "\\") else {
                out.append(byte)
                continue
            }
            guard let escaped = peek else { break }
            index += 1
            switch escaped {
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "e"): out.append(0x1B)
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(escaped)
            case UInt8(ascii: "u"): out += try scalar(digits: 4)
            case UInt8(ascii: "U"): out += try scalar(digits: 8)
            default: throw .init(description: "unknown escape \\\(Character(Unicode.Scalar(escaped)))")
            }
        }
        throw .init(description: "a string is not closed")
    }

    /// `\uXXXX` or `\UXXXXXXXX`: the UTF-8 of a Unicode scalar value (no surrogates).
    private mutating func scalar(digits: Int) throws(ConfigText.Invalid) -> [UInt8] {
        guard index + digits <= bytes.count,
            let code = UInt32(String(decoding: bytes[index..<index + digits], as: UTF8.self), radix: 16),
            bytes[index..<index + digits].allSatisfy({ Character(Unicode.Scalar($0)).isHexDigit }),
            let scalar = Unicode.Scalar(code)
        else {
            throw .init(description: "\\\(digits == 4 ? "u" : "U") takes \(digits) hex digits of a Unicode scalar")
        }
        index += digits
        return Array(String(Character(scalar)).utf8)
    }
}
