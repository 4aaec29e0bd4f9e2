import COpenSSL
import SodiumBridge

/// HKDF-SHA-256 (RFC 5869) with libcrypto's HMAC: what libsecret and gnome-keyring derive the
/// session key of `dh-ietf1024-sha256-aes128-cbc-pkcs7` with (empty salt, empty info).
package enum HKDF {
    /// `length` bytes (at most 255 × 32) of keying material from `inputKey`, `salt` and `info`,
    /// in secure memory.
    package static func sha256(inputKey: SecureBytes, salt: [UInt8] = [], info: [UInt8] = [], length: Int) throws(CryptoError) -> SecureBytes {
        guard length > 0, length <= 255 * 32 else { throw CryptoError("HKDF cannot give \(length) bytes.") }
        // Extract: PRK = HMAC(salt or 32 zero bytes, IKM).
        let saltBytes = salt.isEmpty ? [UInt8](repeating: 0, count: 32) : salt
        let saltKey = SecureBytes(count: saltBytes.count) { $0.copyBytes(from: saltBytes) }
        let pseudorandomKey = SecureBytes(count: 32)
        try saltKey.withUnsafeBytes { salt throws(CryptoError) in
            try inputKey.withUnsafeBytes { input throws(CryptoError) in
                try pseudorandomKey.withUnsafeMutableBytes { output throws(CryptoError) in
                    try hmac(secretKey: salt, data: input, into: output)
                }
            }
        }
        // Expand: T(i) = HMAC(PRK, T(i-1) | info | i).
        let output = SecureBytes(count: length)
        let block = SecureBytes(count: 32 + info.count + 1)
        let previous = SecureBytes(count: 32)
        var filled = 0
        var counter: UInt8 = 1
        var previousCount = 0
        while filled < length {
            block.withUnsafeMutableBytes { buffer in
                previous.withUnsafeBytes { last in
                    buffer.baseAddress!.copyMemory(from: last.baseAddress!, byteCount: previousCount)
                }
                for (index, byte) in info.enumerated() { buffer[previousCount + index] = byte }
                buffer[previousCount + info.count] = counter
            }
            let used = previousCount + info.count + 1
            try pseudorandomKey.withUnsafeBytes { key throws(CryptoError) in
                try block.withUnsafeBytes { data throws(CryptoError) in
                    try previous.withUnsafeMutableBytes { out throws(CryptoError) in
                        try hmac(secretKey: key, data: UnsafeRawBufferPointer(rebasing: data[0..<used]), into: out)
                    }
                }
            }
            previousCount = 32
            let take = min(32, length - filled)
            output.withUnsafeMutableBytes { out in
                previous.withUnsafeBytes { last in
                    (out.baseAddress! + filled).copyMemory(from: last.baseAddress!, byteCount: take)
                }
            }
            filled += take
            counter &+= 1
        }
        block.wipe()
        previous.wipe()
        pseudorandomKey.wipe()
        return output
    }

    /// HMAC-SHA-256 of `data` under `secretKey`, its 32 bytes into `output`.
    private static func hmac(secretKey: UnsafeRawBufferPointer, data: UnsafeRawBufferPointer,
                             into output: UnsafeMutableRawBufferPointer) throws(CryptoError) {
        var written: UInt32 = 0
        let result = HMAC(EVP_sha256(), secretKey.baseAddress, Int32(secretKey.count),
                          data.bindMemory(to: UInt8.self).baseAddress, data.count,
                          output.bindMemory(to: UInt8.self).baseAddress, &written)
        guard result != nil, written == 32 else { throw CryptoError("libcrypto's HMAC-SHA-256 failed.") }
    }
}
