import CSodium
import Foundation

/// HMAC-SHA-256 (RFC 2104) with a key of any length, libsodium's `crypto_auth_hmacsha256_*`
/// (multi-part API, which accepts keys other than 32 bytes).
package enum HMACSHA256 {
    /// The MAC size: 32 bytes.
    package static let byteCount = Int(crypto_auth_hmacsha256_BYTES)

    /// `HMAC-SHA-256(key, message)` into secure memory (when the MAC is a key: HKDF).
    package static func authenticationCode(key: SecureBytes, message: Data) -> SecureBytes {
        key.withUnsafeBytes { k in message.withUnsafeBytes { m in compute(key: k, message: m) } }
    }

    /// `HMAC-SHA-256(key, message)` of secret bytes under a public key (HKDF-Extract of a secret).
    package static func authenticationCode(key: Data, message: SecureBytes) -> SecureBytes {
        key.withUnsafeBytes { k in message.withUnsafeBytes { m in compute(key: k, message: m) } }
    }

    /// `HMAC-SHA-256(key, message)` of secret bytes under a secret key (HKDF-Expand).
    package static func authenticationCode(key: SecureBytes, message: SecureBytes) -> SecureBytes {
        key.withUnsafeBytes { k in message.withUnsafeBytes { m in compute(key: k, message: m) } }
    }

    /// The public MAC of a public message (age's header MAC), as plain bytes.
    package static func tag(key: SecureBytes, message: Data) -> Data {
        let mac = authenticationCode(key: key, message: message)
        return mac.withUnsafeBytes { Data($0) }
    }

    private static func compute(key: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer) -> SecureBytes {
        Sodium.ensureInitialized()
        let state = SecureBytes(count: MemoryLayout<crypto_auth_hmacsha256_state>.size)
        return SecureBytes(count: byteCount) { out in
            state.withUnsafeMutableBytes { raw in
                let statePointer = raw.baseAddress!.assumingMemoryBound(to: crypto_auth_hmacsha256_state.self)
                // An empty key (HKDF without salt) still needs a valid pointer.
                var empty: UInt8 = 0
                let keyPointer = key.baseAddress?.assumingMemoryBound(to: UInt8.self)
                _ = withUnsafePointer(to: &empty) { crypto_auth_hmacsha256_init(statePointer, keyPointer ?? $0, key.count) }
                _ = crypto_auth_hmacsha256_update(statePointer, message.baseAddress?.assumingMemoryBound(to: UInt8.self),
                                                  UInt64(message.count))
                _ = crypto_auth_hmacsha256_final(statePointer, out.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
    }
}
