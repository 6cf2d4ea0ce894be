internal import CCrypto

/// Symmetric decryption with OpenSSL, for HLS segments (AES-128 in CBC mode with PKCS#7 padding, RFC 8216 5.2).
public enum Cipher {
    public enum Failure: Error, Equatable {
        /// The key or IV has the wrong length.
        case badKey
        /// The ciphertext is not a whole number of blocks, or its padding is wrong (the wrong key, or cut bytes).
        case badData
    }

    /// `ciphertext` decrypted with AES-128-CBC under the 16-byte `key` and `iv`, its padding removed.
    public static func aes128CBCDecrypt(_ ciphertext: [UInt8], key: [UInt8], iv: [UInt8]) throws(Failure) -> [UInt8] {
        guard key.count == 16, iv.count == 16 else { throw .badKey }
        guard !ciphertext.isEmpty, ciphertext.count % 16 == 0 else { throw .badData }
        guard let context = EVP_CIPHER_CTX_new() else { throw .badData }
        defer { EVP_CIPHER_CTX_free(context) }
        var plain = [UInt8](repeating: 0, count: ciphertext.count + 16)
        var written: Int32 = 0
        var final: Int32 = 0
        let ok = plain.withUnsafeMutableBufferPointer { out -> Bool in
            guard EVP_DecryptInit_ex(context, EVP_aes_128_cbc(), nil, key, iv) == 1,
                EVP_DecryptUpdate(context, out.baseAddress, &written, ciphertext, Int32(ciphertext.count)) == 1
            else { return false }
            return EVP_DecryptFinal_ex(context, out.baseAddress! + Int(written), &final) == 1
        }
        guard ok else { throw .badData }
        plain.removeSubrange(Int(written + final)...)
        return plain
    }
}
