internal import CCrypto
import Glibc

/// Hash algorithms a checksum can name.
public enum DigestAlgorithm: String, Sendable {
    case sha256, sha1, md5

    public var hexLength: Int {
        switch self {
        case .sha256: return 64
        case .sha1: return 40
        case .md5: return 32
        }
    }
}

/// Hashing files with OpenSSL. Blocking: call it from a worker thread.
public enum Digest {
    /// The SHA-256 of `bytes`.
    public static func sha256(_ bytes: [UInt8]) -> [UInt8] { of(bytes, .sha256) }

    /// The `algorithm` digest of `bytes`.
    public static func of(_ bytes: [UInt8], _ algorithm: DigestAlgorithm) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let type = evp(algorithm)
        let ok = bytes.withUnsafeBytes { EVP_Digest($0.baseAddress, $0.count, &digest, &length, type, nil) }
        precondition(ok == 1, "EVP_Digest failed")
        return Array(digest.prefix(Int(length)))
    }

    private static func evp(_ algorithm: DigestAlgorithm) -> OpaquePointer? {
        switch algorithm {
        case .sha256: return EVP_sha256()
        case .sha1: return EVP_sha1()
        case .md5: return EVP_md5()
        }
    }

    /// HMAC-SHA256 of `message` under `key` (RFC 2104).
    public static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let result = key.withUnsafeBytes { k in
            message.withUnsafeBytes { m in
                HMAC(
                    EVP_sha256(), k.baseAddress, Int32(k.count), m.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    m.count, &digest, &length)
            }
        }
        precondition(result != nil, "HMAC failed")
        return Array(digest.prefix(Int(length)))
    }

    /// `bytes` as lower-case hex.
    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }, as: UTF8.self)
    }

    /// The lower-case hex digest of the file open as `fd`, read from its start in 1 MiB pieces (`path` names it in
    /// errors).
    public static func hex(
        ofDescriptor fd: Int32, path: String, algorithm: DigestAlgorithm
    ) throws(FileError)
        -> String
    {
        guard let context = EVP_MD_CTX_new() else { throw FileError(call: "EVP_MD_CTX_new", path: path, code: ENOMEM) }
        defer { EVP_MD_CTX_free(context) }
        let type = evp(algorithm)
        guard EVP_DigestInit_ex(context, type, nil) == 1 else {
            throw FileError(call: "EVP_DigestInit_ex", path: path, code: EINVAL)
        }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: off_t = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, offset) }
            if count < 0 {
                if errno == EINTR { continue }
                throw FileError(call: "read", path: path, code: errno)
            }
            if count == 0 { break }
            offset += off_t(count)
            _ = buffer.withUnsafeBytes { EVP_DigestUpdate(context, $0.baseAddress, count) }
        }
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard EVP_DigestFinal_ex(context, &digest, &length) == 1 else {
            throw FileError(call: "EVP_DigestFinal_ex", path: path, code: EINVAL)
        }
        let hex = Array("0123456789abcdef".utf8)
        return String(
            decoding: digest.prefix(Int(length)).flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 15)]] },
            as: UTF8.self)
    }
}
