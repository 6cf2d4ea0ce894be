import HaulLoop

/// The file name a `Content-Disposition` header proposes (RFC 6266), `filename*` (RFC 8187) before `filename`.
/// The result is untrusted: pass it through `FileName.sanitize` before using it.
public enum ContentDisposition {
    public static func filename(from header: String) -> String? {
        let parameters = parse(header)
        if let extended = parameters["filename*"], let decoded = decodeExtended(extended), !decoded.isEmpty {
            return decoded
        }
        if let plain = parameters["filename"], !plain.isEmpty {
            return plain
        }
        return nil
    }

    /// Splits `type; name=value; name="quoted; value"` into lower-cased names and unquoted values.
    static func parse(_ header: String) -> [String: String] {
        var result: [String: String] = [:]
        var index = header.startIndex
        // Skip the disposition type.
        while index < header.endIndex, header[index] != ";" { index = header.index(after: index) }
        while index < header.endIndex {
            index = header.index(after: index)  // past ';'
            var name = ""
            while index < header.endIndex, header[index] != "=", header[index] != ";" {
                name.append(header[index])
                index = header.index(after: index)
            }
            name = name.trimmingSpaces().lowercased()
            guard index < header.endIndex, header[index] == "=" else { continue }
            index = header.index(after: index)
            while index < header.endIndex, header[index] == " " { index = header.index(after: index) }
            var value = ""
            if index < header.endIndex, header[index] == "\"" {
                index = header.index(after: index)
                while index < header.endIndex, header[index] != "\"" {
                    if header[index] == "\\" {
                        index = header.index(after: index)
                        if index == header.endIndex { break }
                    }
                    value.append(header[index])
                    index = header.index(after: index)
                }
                if index < header.endIndex { index = header.index(after: index) }
                while index < header.endIndex, header[index] != ";" { index = header.index(after: index) }
            } else {
                while index < header.endIndex, header[index] != ";" {
                    value.append(header[index])
                    index = header.index(after: index)
                }
                value = value.trimmingSpaces()
            }
            if !name.isEmpty, result[name] == nil { result[name] = value }
        }
        return result
    }

    /// `charset'language'percent-encoded` (RFC 8187). UTF-8 and ISO-8859-1 are the charsets the RFC requires.
    static func decodeExtended(_ value: String) -> String? {
        let parts = value.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        let charset = parts[0].lowercased()
        var bytes: [UInt8] = []
        var iterator = Array(parts[2].utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next(), let low = iterator.next(),
                    let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
                else { return nil }
                bytes.append(value)
            } else {
                bytes.append(byte)
            }
        }
        switch charset {
        case "utf-8": return String(bytes: bytes, encoding: .utf8)
        case "iso-8859-1": return String(bytes: bytes, encoding: .isoLatin1)
        default: return nil
        }
    }
}
