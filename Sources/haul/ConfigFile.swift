import FoundationEssentials
import Glibc
import HaulCore
import HaulLoop

/// `haul serve --config FILE`: the options of `haul serve --help` in a file, TOML (`max-active = 10`) or JSON
/// (`{"max_active": 10}`, for a file ending in .json). Names are the options' with dashes or underscores; a list
/// (`cors-origin = ["https://a.example", "https://b.example"]`) is the comma-separated value of its flag.
/// The TOML read is the part of TOML such a file needs: `name = value` lines, strings, numbers, booleans, arrays
/// on one line, comments. Flags and the environment win over the file.
enum ConfigFile {
    struct Entry: Equatable {
        var name: String
        var value: String
        /// Where it was, for messages: `name in FILE:LINE`.
        var place: String
    }

    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    /// The entries of the file at `path`, or why it cannot be read.
    static func read(_ path: String) throws(Invalid) -> [Entry] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw Invalid(description: "cannot read the config file \(path): \(String(cString: strerror(errno)))"
                + (errno == EACCES ? "; it must be readable by uid \(geteuid())" : ""))
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = Glibc.read(fd, &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else {
                throw Invalid(description: "cannot read the config file \(path): \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            bytes += buffer[0..<n]
            guard bytes.count <= 1 << 20 else { throw Invalid(description: "the config file \(path) is over 1 MiB") }
        }
        return path.hasSuffix(".json") ? try json(bytes, path: path) : try toml(String(decoding: bytes, as: UTF8.self),
                                                                              path: path)
    }

    static func json(_ bytes: [UInt8], path: String) throws(Invalid) -> [Entry] {
        guard case .object(let members)? = try? JSONValue.parse(bytes) else {
            throw Invalid(description: "the config file \(path) is not a JSON object")
        }
        return try members.map { name, value throws(Invalid) in
            let place = "\(name) in \(path)"
            guard let text = scalar(value) ?? list(value) else {
                throw Invalid(description: "\(place) must be a string, a number, true or false, or a list of strings")
            }
            return Entry(name: name, value: text, place: place)
        }
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

    static func toml(_ text: String, path: String) throws(Invalid) -> [Entry] {
        var entries: [Entry] = []
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let place = "\(path):\(index + 1)"
            var scanner = TOMLLine(Array(rawLine.utf8))
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
            entries.append(Entry(name: name, value: value, place: "\(name) in \(place)"))
        }
        return entries
    }
}

/// One TOML line, read byte by byte.
private struct TOMLLine {
    private let bytes: [UInt8]
    private var index = 0

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

    /// A bare key (letters, digits, `-`, `_`) or a quoted one.
    mutating func key() -> String? {
        if peek == UInt8(ascii: "\"") { return try? string() }
        let start = index
        while let byte = peek, byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
            || Character(Unicode.Scalar(byte)).isASCII && (Character(Unicode.Scalar(byte)).isLetter
                || Character(Unicode.Scalar(byte)).isNumber) {
            index += 1
        }
        return index > start ? String(decoding: bytes[start..<index], as: UTF8.self) : nil
    }

    /// A string, number, boolean or one-line array of strings, as the text of the option's value.
    mutating func value() throws(ConfigFile.Invalid) -> String {
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
                guard plain.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "+" || $0 == "-" }) else {
                    throw .init(description: "write text in quotes: \"\(word)\"")
                }
                return plain
            }
        }
    }

    /// A basic ("...", with escapes) or literal ('...') string.
    mutating func string() throws(ConfigFile.Invalid) -> String {
        guard let quote = peek else { throw .init(description: "a string is missing") }
        index += 1
        var out: [UInt8] = []
        while let byte = peek {
            index += 1
            if byte == quote { return String(decoding: out, as: UTF8.self) }
            guard quote == UInt8(ascii: "\""), byte == UInt8(ascii: "\\") else {
                out.append(byte)
                continue
            }
            guard let escaped = peek else { break }
            index += 1
            switch escaped {
            case UInt8(ascii: "n"): out.append(10)
            case UInt8(ascii: "t"): out.append(9)
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(escaped)
            default: throw .init(description: "unknown escape \\\(Character(Unicode.Scalar(escaped)))")
            }
        }
        throw .init(description: "a string is not closed")
    }
}
