import CSodium
import Foundation

/// ChaCha20-Poly1305 as RFC 8439 defines it (the IETF construction: 96-bit nonce), libsodium's
/// `crypto_aead_chacha20poly1305_ietf_*`: the AEAD of the age format (`Keys/backup-format.md`).
///
/// A sealed box is `ciphertext || tag` (tag: 16 bytes). The nonce is only 12 bytes: callers
/// derive it (age: a chunk counter, or zero under a single-use key), never draw it at random.
package enum ChaCha20Poly1305 {
    /// Key size: 32 bytes.
    package static let keyByteCount = Int(crypto_aead_chacha20poly1305_ietf_KEYBYTES)
    /// Nonce size: 12 bytes.
    package static let nonceByteCount = Int(crypto_aead_chacha20poly1305_ietf_NPUBBYTES)
    /// Tag size: 16 bytes.
    package static let tagByteCount = Int(crypto_aead_chacha20poly1305_ietf_ABYTES)

    /// Seals public bytes: returns `ciphertext || tag`.
    package static func seal(_ plaintext: Data, using key: SecureBytes, nonce: Data) throws(SodiumError) -> Data {
        try check(key: key, nonce: nonce)
        return plaintext.withUnsafeBytes { seal($0, key: key, nonce: nonce) }
    }

    /// Seals secret bytes (a wrapped key): returns `ciphertext || tag`.
    package static func seal(_ plaintext: SecureBytes, using key: SecureBytes, nonce: Data) throws(SodiumError) -> Data {
        try check(key: key, nonce: nonce)
        return plaintext.withUnsafeBytes { seal($0, key: key, nonce: nonce) }
    }

    /// Opens `ciphertext || tag` into public bytes; nothing is returned unless the tag verifies.
    package static func open(_ sealed: Data, using key: SecureBytes, nonce: Data) throws(SodiumError) -> Data {
        let length = try plaintextLength(of: sealed, key: key, nonce: nonce)
        var plaintext = Data(count: length)
        let ok = plaintext.withUnsafeMutableBytes { decrypt(into: $0, sealed: sealed, key: key, nonce: nonce) }
        guard ok else { throw .authenticationFailed }
        return plaintext
    }

    /// Opens `ciphertext || tag` into secure memory (an unwrapped key).
    package static func openSecret(_ sealed: Data, using key: SecureBytes, nonce: Data) throws(SodiumError) -> SecureBytes {
        let length = try plaintextLength(of: sealed, key: key, nonce: nonce)
        let plaintext = SecureBytes(count: length)
        let ok = plaintext.withUnsafeMutableBytes { decrypt(into: $0, sealed: sealed, key: key, nonce: nonce) }
        guard ok else {
            plaintext.wipe()
            throw .authenticationFailed
        }
        return plaintext
    }

    // MARK: - Internals

    private static func check(key: SecureBytes, nonce: Data) throws(SodiumError) {
        guard key.count == keyByteCount else {
            throw .invalidLength(what: "ChaCha20-Poly1305 key", expected: keyByteCount, actual: key.count)
        }
        guard nonce.count == nonceByteCount else {
            throw .invalidLength(what: "ChaCha20-Poly1305 nonce", expected: nonceByteCount, actual: nonce.count)
        }
    }

    private static func plaintextLength(of sealed: Data, key: SecureBytes, nonce: Data) throws(SodiumError) -> Int {
        try check(key: key, nonce: nonce)
        // Shorter than a tag is what truncated ciphertext looks like: an authentication failure.
        guard sealed.count >= tagByteCount else { throw .authenticationFailed }
        return sealed.count - tagByteCount
    }

    private static func seal(_ plaintext: UnsafeRawBufferPointer, key: SecureBytes, nonce: Data) -> Data {
        Sodium.ensureInitialized()
        var sealed = Data(count: plaintext.count + tagByteCount)
        sealed.withUnsafeMutableBytes { out in
            key.withUnsafeBytes { k in
                nonce.withUnsafeBytes { n in
                    var sealedLength: UInt64 = 0
                    _ = crypto_aead_chacha20poly1305_ietf_encrypt(
                        out.baseAddress!.assumingMemoryBound(to: UInt8.self), &sealedLength,
                        plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(plaintext.count),
                        nil, 0, nil,
                        n.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        return sealed
    }

    private static func decrypt(into out: UnsafeMutableRawBufferPointer, sealed: Data, key: SecureBytes, nonce: Data) -> Bool {
        Sodium.ensureInitialized()
        return sealed.withUnsafeBytes { c in
            key.withUnsafeBytes { k in
                nonce.withUnsafeBytes { n in
                    var length: UInt64 = 0
                    // libsodium verifies the tag before it writes any plaintext.
                    return crypto_aead_chacha20poly1305_ietf_decrypt(
                        out.baseAddress?.assumingMemoryBound(to: UInt8.self), &length, nil,
                        c.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(c.count),
                        nil, 0,
                        n.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        k.baseAddress!.assumingMemoryBound(to: UInt8.self)) == 0
                }
            }
        }
    }
}
