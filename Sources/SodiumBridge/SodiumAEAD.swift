import CSodium
import Foundation

/// The two IETF AEAD constructions of libsodium this package uses, with the one seal and open
/// that both facades (``ChaCha20Poly1305``, ``XChaCha20Poly1305``) share: a sealed box is
/// `ciphertext || tag`, the nonce is passed apart, a box shorter than a tag is an
/// authentication failure (truncated ciphertext looks like that), and no plaintext is
/// returned, or left in secure memory, unless the tag verifies.
enum SodiumAEAD: Sendable {
    /// `crypto_aead_chacha20poly1305_ietf_*` (RFC 8439: 96-bit nonce).
    case chaCha20Poly1305
    /// `crypto_aead_xchacha20poly1305_ietf_*` (192-bit nonce).
    case xChaCha20Poly1305

    var name: String {
        switch self {
        case .chaCha20Poly1305: "ChaCha20-Poly1305"
        case .xChaCha20Poly1305: "XChaCha20-Poly1305"
        }
    }

    var keyByteCount: Int {
        switch self {
        case .chaCha20Poly1305: Int(crypto_aead_chacha20poly1305_ietf_KEYBYTES)
        case .xChaCha20Poly1305: Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)
        }
    }

    var nonceByteCount: Int {
        switch self {
        case .chaCha20Poly1305: Int(crypto_aead_chacha20poly1305_ietf_NPUBBYTES)
        case .xChaCha20Poly1305: Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
        }
    }

    var tagByteCount: Int {
        switch self {
        case .chaCha20Poly1305: Int(crypto_aead_chacha20poly1305_ietf_ABYTES)
        case .xChaCha20Poly1305: Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)
        }
    }

    /// Seals `plaintext` (public or secret bytes, as a raw buffer): `ciphertext || tag`.
    func seal(_ plaintext: UnsafeRawBufferPointer, key: SecureBytes, nonce: Data, associatedData: Data) throws(SodiumError) -> Data {
        var sealed = Data(count: plaintext.count + tagByteCount)
        try sealed.withUnsafeMutableBytes { out in
            Result { () throws(SodiumError) in try seal(plaintext, into: out, key: key, nonce: nonce, associatedData: associatedData) }
        }.get()
        return sealed
    }

    /// Seals `plaintext` into `out`, which holds exactly `plaintext.count + tagByteCount`
    /// bytes: `ciphertext || tag` (no buffer of its own: for callers that reuse one).
    func seal(
        _ plaintext: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer, key: SecureBytes, nonce: Data, associatedData: Data
    ) throws(SodiumError) {
        try check(key: key, nonce: nonce)
        guard out.count == plaintext.count + tagByteCount else {
            throw .invalidLength(what: "\(name) sealed box", expected: plaintext.count + tagByteCount, actual: out.count)
        }
        Sodium.ensureInitialized()
        key.withUnsafeBytes { k in
            nonce.withUnsafeBytes { n in
                associatedData.withUnsafeBytes { ad in
                    let c = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
                    let m = plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self)
                    let a = ad.baseAddress?.assumingMemoryBound(to: UInt8.self)
                    let npub = n.baseAddress!.assumingMemoryBound(to: UInt8.self)
                    let kp = k.baseAddress!.assumingMemoryBound(to: UInt8.self)
                    var sealedLength: UInt64 = 0
                    _ = switch self {
                    case .chaCha20Poly1305:
                        crypto_aead_chacha20poly1305_ietf_encrypt(c, &sealedLength, m, UInt64(plaintext.count), a, UInt64(ad.count), nil, npub, kp)
                    case .xChaCha20Poly1305:
                        crypto_aead_xchacha20poly1305_ietf_encrypt(c, &sealedLength, m, UInt64(plaintext.count), a, UInt64(ad.count), nil, npub, kp)
                    }
                }
            }
        }
    }

    /// Seals public bytes: `ciphertext || tag`.
    func seal(_ plaintext: Data, key: SecureBytes, nonce: Data, associatedData: Data) throws(SodiumError) -> Data {
        try plaintext.withUnsafeBytes { raw in
            Result { () throws(SodiumError) in try seal(raw, key: key, nonce: nonce, associatedData: associatedData) }
        }.get()
    }

    /// Opens `ciphertext || tag` into public bytes.
    func open(_ sealed: Data, key: SecureBytes, nonce: Data, associatedData: Data) throws(SodiumError) -> Data {
        var plaintext = Data(count: try plaintextLength(of: sealed, key: key, nonce: nonce))
        let ok = plaintext.withUnsafeMutableBytes { decrypt(into: $0, sealed: sealed, key: key, nonce: nonce, associatedData: associatedData) }
        guard ok else { throw .authenticationFailed }
        return plaintext
    }

    /// Opens `ciphertext || tag` into secure memory (an unwrapped key), wiped if the tag fails.
    func openSecret(_ sealed: Data, key: SecureBytes, nonce: Data, associatedData: Data) throws(SodiumError) -> SecureBytes {
        let plaintext = SecureBytes(count: try plaintextLength(of: sealed, key: key, nonce: nonce))
        let ok = plaintext.withUnsafeMutableBytes { decrypt(into: $0, sealed: sealed, key: key, nonce: nonce, associatedData: associatedData) }
        guard ok else {
            plaintext.wipe()
            throw .authenticationFailed
        }
        return plaintext
    }

    // MARK: - Internals

    private func check(key: SecureBytes, nonce: Data) throws(SodiumError) {
        guard key.count == keyByteCount else { throw .invalidLength(what: "\(name) key", expected: keyByteCount, actual: key.count) }
        guard nonce.count == nonceByteCount else {
            throw .invalidLength(what: "\(name) nonce", expected: nonceByteCount, actual: nonce.count)
        }
    }

    private func plaintextLength(of sealed: Data, key: SecureBytes, nonce: Data) throws(SodiumError) -> Int {
        try check(key: key, nonce: nonce)
        guard sealed.count >= tagByteCount else { throw .authenticationFailed }
        return sealed.count - tagByteCount
    }

    private func decrypt(
        into out: UnsafeMutableRawBufferPointer, sealed: Data, key: SecureBytes, nonce: Data, associatedData: Data
    ) -> Bool {
        Sodium.ensureInitialized()
        return sealed.withUnsafeBytes { c in
            key.withUnsafeBytes { k in
                nonce.withUnsafeBytes { n in
                    associatedData.withUnsafeBytes { ad in
                        let m = out.baseAddress?.assumingMemoryBound(to: UInt8.self)
                        let cp = c.baseAddress!.assumingMemoryBound(to: UInt8.self)
                        let a = ad.baseAddress?.assumingMemoryBound(to: UInt8.self)
                        let npub = n.baseAddress!.assumingMemoryBound(to: UInt8.self)
                        let kp = k.baseAddress!.assumingMemoryBound(to: UInt8.self)
                        var length: UInt64 = 0
                        // libsodium verifies the tag before it writes any plaintext.
                        let status = switch self {
                        case .chaCha20Poly1305:
                            crypto_aead_chacha20poly1305_ietf_decrypt(m, &length, nil, cp, UInt64(c.count), a, UInt64(ad.count), npub, kp)
                        case .xChaCha20Poly1305:
                            crypto_aead_xchacha20poly1305_ietf_decrypt(m, &length, nil, cp, UInt64(c.count), a, UInt64(ad.count), npub, kp)
                        }
                        return status == 0
                    }
                }
            }
        }
    }
}
