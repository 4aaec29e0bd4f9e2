import CSodium
import Foundation

/// XChaCha20-Poly1305 (IETF construction), libsodium's
/// `crypto_aead_xchacha20poly1305_ietf_*`.
///
/// A sealed box is `ciphertext || tag` (tag: 16 bytes); the 24-byte nonce is
/// passed separately and is large enough to be drawn at random for every seal.
package enum XChaCha20Poly1305 {
    /// Key size: 32 bytes.
    package static let keyByteCount = Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)
    /// Nonce size: 24 bytes.
    package static let nonceByteCount = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    /// Tag size: 16 bytes.
    package static let tagByteCount = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)

    /// A fresh random nonce.
    package static func randomNonce() -> Data {
        Random.bytes(count: nonceByteCount)
    }

    /// Seals public bytes (e.g. a keybag body): returns `ciphertext || tag`.
    package static func seal(
        _ plaintext: Data, using key: SecureBytes, nonce: Data, authenticating associatedData: Data
    ) throws(SodiumError) -> Data {
        try check(key: key, nonce: nonce)
        return plaintext.withUnsafeBytes { raw in
            seal(raw, using: key, nonce: nonce, authenticating: associatedData)
        }
    }

    /// Seals secret bytes (a wrapped key): returns `ciphertext || tag`.
    package static func seal(
        _ plaintext: SecureBytes, using key: SecureBytes, nonce: Data, authenticating associatedData: Data
    ) throws(SodiumError) -> Data {
        try check(key: key, nonce: nonce)
        return plaintext.withUnsafeBytes { raw in
            seal(raw, using: key, nonce: nonce, authenticating: associatedData)
        }
    }

    /// Opens `ciphertext || tag` into public bytes.
    package static func open(
        _ sealed: Data, using key: SecureBytes, nonce: Data, authenticating associatedData: Data
    ) throws(SodiumError) -> Data {
        let length = try plaintextLength(of: sealed, key: key, nonce: nonce)
        var plaintext = Data(count: length)
        let ok = plaintext.withUnsafeMutableBytes { (out: UnsafeMutableRawBufferPointer) in
            decrypt(into: out, sealed: sealed, key: key, nonce: nonce, associatedData: associatedData)
        }
        guard ok else { throw .authenticationFailed }
        return plaintext
    }

    /// Opens `ciphertext || tag` into secure memory (an unwrapped key).
    package static func openSecret(
        _ sealed: Data, using key: SecureBytes, nonce: Data, authenticating associatedData: Data
    ) throws(SodiumError) -> SecureBytes {
        let length = try plaintextLength(of: sealed, key: key, nonce: nonce)
        let plaintext = SecureBytes(count: length)
        let ok = plaintext.withUnsafeMutableBytes { out in
            decrypt(into: out, sealed: sealed, key: key, nonce: nonce, associatedData: associatedData)
        }
        guard ok else {
            plaintext.wipe()
            throw .authenticationFailed
        }
        return plaintext
    }

    // MARK: - Internals

    private static func check(key: SecureBytes, nonce: Data) throws(SodiumError) {
        guard key.count == keyByteCount else {
            throw .invalidLength(what: "XChaCha20-Poly1305 key", expected: keyByteCount, actual: key.count)
        }
        guard nonce.count == nonceByteCount else {
            throw .invalidLength(what: "XChaCha20-Poly1305 nonce", expected: nonceByteCount, actual: nonce.count)
        }
    }

    private static func plaintextLength(of sealed: Data, key: SecureBytes, nonce: Data) throws(SodiumError) -> Int {
        try check(key: key, nonce: nonce)
        // A box shorter than a tag cannot authenticate: report it as such, not as a size error,
        // because it is what truncated ciphertext looks like.
        guard sealed.count >= tagByteCount else { throw .authenticationFailed }
        return sealed.count - tagByteCount
    }

    /// Seals; sizes of key and nonce were checked by the caller.
    private static func seal(
        _ plaintext: UnsafeRawBufferPointer, using key: SecureBytes, nonce: Data, authenticating associatedData: Data
    ) -> Data {
        Sodium.ensureInitialized()
        var sealed = Data(count: plaintext.count + tagByteCount)
        sealed.withUnsafeMutableBytes { out in
            key.withUnsafeBytes { k in
                nonce.withUnsafeBytes { n in
                    associatedData.withUnsafeBytes { ad in
                        var sealedLength: UInt64 = 0
                        _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                            out.baseAddress!.assumingMemoryBound(to: UInt8.self), &sealedLength,
                            plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(plaintext.count),
                            ad.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(ad.count),
                            nil,
                            n.baseAddress!.assumingMemoryBound(to: UInt8.self),
                            k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                    }
                }
            }
        }
        return sealed
    }

    private static func decrypt(
        into out: UnsafeMutableRawBufferPointer, sealed: Data, key: SecureBytes, nonce: Data, associatedData: Data
    ) -> Bool {
        Sodium.ensureInitialized()
        return sealed.withUnsafeBytes { c in
            key.withUnsafeBytes { k in
                nonce.withUnsafeBytes { n in
                    associatedData.withUnsafeBytes { ad in
                        var length: UInt64 = 0
                        // libsodium verifies the tag before it writes any plaintext.
                        return crypto_aead_xchacha20poly1305_ietf_decrypt(
                            out.baseAddress?.assumingMemoryBound(to: UInt8.self),
                            &length,
                            nil,
                            c.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(c.count),
                            ad.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(ad.count),
                            n.baseAddress!.assumingMemoryBound(to: UInt8.self),
                            k.baseAddress!.assumingMemoryBound(to: UInt8.self)) == 0
                    }
                }
            }
        }
    }
}
