import Foundation

/// ChaCha20-Poly1305 as RFC 8439 defines it (the IETF construction: 96-bit nonce), libsodium's
/// `crypto_aead_chacha20poly1305_ietf_*`: the AEAD of the age format (`Keys/backup-format.md`).
///
/// A sealed box is `ciphertext || tag` (tag: 16 bytes). The nonce is only 12 bytes: callers
/// derive it (age: a chunk counter, or zero under a single-use key), never draw it at random.
package enum ChaCha20Poly1305 {
    private static let aead = SodiumAEAD.chaCha20Poly1305
    /// Key size: 32 bytes.
    package static let keyByteCount = aead.keyByteCount
    /// Nonce size: 12 bytes.
    package static let nonceByteCount = aead.nonceByteCount
    /// Tag size: 16 bytes.
    package static let tagByteCount = aead.tagByteCount

    /// Seals public bytes: returns `ciphertext || tag`.
    package static func seal(_ plaintext: Data, using key: SecureBytes, nonce: Data) throws(SodiumError) -> Data {
        try aead.seal(plaintext, key: key, nonce: nonce, associatedData: Data())
    }

    /// Seals secret bytes (a wrapped key): returns `ciphertext || tag`.
    package static func seal(_ plaintext: SecureBytes, using key: SecureBytes, nonce: Data) throws(SodiumError) -> Data {
        try plaintext.withUnsafeBytes { (raw) throws(SodiumError) in try aead.seal(raw, key: key, nonce: nonce, associatedData: Data()) }
    }

    /// Seals `plaintext` into `out` (exactly `plaintext.count + tagByteCount` bytes), a buffer
    /// the caller reuses: `ciphertext || tag`.
    package static func seal(_ plaintext: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer,
                             using key: SecureBytes, nonce: Data) throws(SodiumError) {
        try aead.seal(plaintext, into: out, key: key, nonce: nonce, associatedData: Data())
    }

    /// Opens `ciphertext || tag` into public bytes; nothing is returned unless the tag verifies.
    package static func open(_ sealed: Data, using key: SecureBytes, nonce: Data) throws(SodiumError) -> Data {
        try aead.open(sealed, key: key, nonce: nonce, associatedData: Data())
    }

    /// Opens `ciphertext || tag` into secure memory (an unwrapped key).
    package static func openSecret(_ sealed: Data, using key: SecureBytes, nonce: Data) throws(SodiumError) -> SecureBytes {
        try aead.openSecret(sealed, key: key, nonce: nonce, associatedData: Data())
    }
}
