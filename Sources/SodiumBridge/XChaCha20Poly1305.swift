import Foundation

/// XChaCha20-Poly1305 (IETF construction), libsodium's
/// `crypto_aead_xchacha20poly1305_ietf_*`.
///
/// A sealed box is `ciphertext || tag` (tag: 16 bytes); the 24-byte nonce is
/// passed separately and is large enough to be drawn at random for every seal.
package enum XChaCha20Poly1305 {
    private static let aead = SodiumAEAD.xChaCha20Poly1305
    /// Key size: 32 bytes.
    package static let keyByteCount = aead.keyByteCount
    /// Nonce size: 24 bytes.
    package static let nonceByteCount = aead.nonceByteCount
    /// Tag size: 16 bytes.
    package static let tagByteCount = aead.tagByteCount

    /// A fresh random nonce.
    package static func randomNonce() -> Data {
        Random.bytes(count: nonceByteCount)
    }

    /// Seals public bytes (e.g. a keybag body): returns `ciphertext || tag`.
    package static func seal(
        _ plaintext: Data, using key: SecureBytes, nonce: Data, authenticating associatedData: Data
    ) throws(SodiumError) -> Data {
        try aead.seal(plaintext, key: key, nonce: nonce, associatedData: associatedData)
    }

    /// Seals secret bytes (a wrapped key): returns `ciphertext || tag`.
    package static func seal(
        _ plaintext: SecureBytes, using key: SecureBytes, nonce: Data, authenticating associatedData: Data
    ) throws(SodiumError) -> Data {
        try plaintext.withUnsafeBytes { (raw) throws(SodiumError) in try aead.seal(raw, key: key, nonce: nonce, associatedData: associatedData) }
    }

    /// Opens `ciphertext || tag` into public bytes.
    package static func open(
        _ sealed: Data, using key: SecureBytes, nonce: Data, authenticating associatedData: Data
    ) throws(SodiumError) -> Data {
        try aead.open(sealed, key: key, nonce: nonce, associatedData: associatedData)
    }

    /// Opens `ciphertext || tag` into secure memory (an unwrapped key).
    package static func openSecret(
        _ sealed: Data, using key: SecureBytes, nonce: Data, authenticating associatedData: Data
    ) throws(SodiumError) -> SecureBytes {
        try aead.openSecret(sealed, key: key, nonce: nonce, associatedData: associatedData)
    }
}
