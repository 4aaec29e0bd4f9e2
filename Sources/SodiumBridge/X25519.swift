import CSodium
import Foundation

/// X25519 key agreement (`crypto_scalarmult_curve25519`, `crypto_box_keypair`).
package enum X25519 {
    /// Public and secret key size: 32 bytes.
    package static let keyByteCount = Int(crypto_scalarmult_BYTES)

    /// A fresh key pair: the public half as plain bytes, the secret half in secure memory.
    package static func generateKeyPair() -> (publicKey: Data, secretKey: SecureBytes) {
        let secret = SecureBytes.random(count: keyByteCount)
        // A random 32-byte string is a valid X25519 secret (clamped by scalarmult).
        return (publicKey(for: secret), secret)
    }

    /// The public key of `secretKey` (`crypto_scalarmult_base`).
    package static func publicKey(for secretKey: SecureBytes) -> Data {
        Sodium.ensureInitialized()
        precondition(secretKey.count == keyByteCount, "X25519 secret key must be 32 bytes")
        var publicKey = Data(count: keyByteCount)
        publicKey.withUnsafeMutableBytes { out in
            secretKey.withUnsafeBytes { sk in
                _ = crypto_scalarmult_base(
                    out.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    sk.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        return publicKey
    }

    /// The raw shared secret `X25519(secretKey, publicKey)`; fails for low-order
    /// public keys, whose result would be all zeros. Hash it before use as a key.
    package static func sharedSecret(secretKey: SecureBytes, publicKey: Data) throws(SodiumError) -> SecureBytes {
        Sodium.ensureInitialized()
        guard secretKey.count == keyByteCount else {
            throw .invalidLength(what: "X25519 secret key", expected: keyByteCount, actual: secretKey.count)
        }
        guard publicKey.count == keyByteCount else {
            throw .invalidLength(what: "X25519 public key", expected: keyByteCount, actual: publicKey.count)
        }
        let shared = SecureBytes(count: keyByteCount)
        let status = shared.withUnsafeMutableBytes { out in
            secretKey.withUnsafeBytes { sk in
                publicKey.withUnsafeBytes { pk in
                    crypto_scalarmult(
                        out.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        sk.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        pk.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        guard status == 0 else { throw .invalidPublicKey }
        return shared
    }
}
