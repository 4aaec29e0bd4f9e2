import Foundation

/// HKDF-SHA-256 (RFC 5869) over ``HMACSHA256``: libsodium 1.0.18 has no HKDF of its own
/// (`crypto_kdf_hkdf_sha256_*` came with 1.0.19), and age derives every key with it.
package enum HKDFSHA256 {
    /// `HKDF-Expand(HKDF-Extract(salt, inputKey), info, byteCount)` into secure memory.
    /// `byteCount` is at most 255 × 32 bytes.
    package static func deriveKey(inputKey: SecureBytes, salt: Data, info: Data, byteCount: Int) -> SecureBytes {
        precondition(byteCount > 0 && byteCount <= 255 * HMACSHA256.byteCount, "HKDF output size out of range")
        // RFC 5869 §2.2: an absent salt is HashLen zeros (HMAC pads a key shorter than a block
        // with zeros, so an empty key gives the same MAC).
        let pseudorandomKey = HMACSHA256.authenticationCode(key: salt, message: inputKey)
        let output = SecureBytes(count: byteCount)
        var previous = SecureBytes(count: 0)
        var filled = 0
        var counter: UInt8 = 1
        while filled < byteCount {
            let block = SecureBytes(concatenating: [previous, SecureBytes(count: info.count) { $0.copyBytes(from: info) },
                                                    SecureBytes(count: 1) { $0[0] = counter }])
            let next = HMACSHA256.authenticationCode(key: pseudorandomKey, message: block)
            let take = min(next.count, byteCount - filled)
            output.withUnsafeMutableBytes { out in
                next.withUnsafeBytes { (out.baseAddress! + filled).copyMemory(from: $0.baseAddress!, byteCount: take) }
            }
            filled += take
            previous = next
            counter &+= 1
        }
        return output
    }
}
