import COpenSSL
import Foundation
import SodiumBridge

/// Diffie-Hellman in RFC 2409's "Second Oakley Group" (1024-bit MODP, generator 2), as the
/// Secret Service's `dh-ietf1024-sha256-aes128-cbc-pkcs7` algorithm uses it, with libcrypto's
/// constant-time modular exponentiation. The private exponent lives in secure memory.
package struct ModularDiffieHellman: ~Copyable {
    /// The group's prime, big-endian (RFC 2409 §6.2).
    package static let primeHex = """
        FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD\
        EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED\
        EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF
        """
    /// The length of the prime, of public keys and of the shared secret, in bytes.
    package static let byteCount = 128

    /// The private exponent (128 random bytes, big-endian).
    private let privateKey: SecureBytes
    /// This side's public key, `2^x mod p`, big-endian, padded to 128 bytes.
    package let publicKey: [UInt8]

    /// A new key pair.
    package init() throws(CryptoError) {
        try self.init(privateKey: SecureBytes.random(count: Self.byteCount))
    }

    /// The key pair of `privateKey` (big-endian; known-answer tests).
    package init(privateKey: SecureBytes) throws(CryptoError) {
        self.privateKey = privateKey
        publicKey = try Self.withGroup { prime, context throws(CryptoError) -> [UInt8] in
            let generator = BN_new()!
            defer { BN_free(generator) }
            BN_set_word(generator, 2)
            return try Self.exponentiate(generator, privateKey, prime, context)
        }
    }

    /// The shared secret with the peer's public key (big-endian, unsigned, any length up to 128
    /// bytes), big-endian and padded with leading zeros to 128 bytes, in secure memory.
    ///
    /// - Throws: when the peer's key is not in 2…p−2 (a key of 0, 1 or p−1 would force the secret).
    package func sharedSecret(peerPublicKey: some Collection<UInt8>) throws(CryptoError) -> SecureBytes {
        let peerBytes = Array(peerPublicKey)
        guard !peerBytes.isEmpty, peerBytes.count <= Self.byteCount + 1 else { throw CryptoError("The peer's public key has \(peerBytes.count) bytes.") }
        let privateKey = privateKey
        return try Self.withGroup { prime, context throws(CryptoError) -> SecureBytes in
            let peer = BN_bin2bn(peerBytes, Int32(peerBytes.count), nil)!
            defer { BN_free(peer) }
            let limit = BN_dup(prime)!
            defer { BN_free(limit) }
            BN_sub_word(limit, 1)
            guard BN_cmp(peer, BN_value_one()) > 0, BN_cmp(peer, limit) < 0 else {
                throw CryptoError("The peer's public key is outside the group.")
            }
            let secret = try Self.exponentiate(peer, privateKey, prime, context, secure: true)
            return secret
        }
    }

    /// Runs `body` with the group's prime and a big-number context.
    private static func withGroup<R, E: Error>(_ body: (OpaquePointer, OpaquePointer) throws(E) -> R) throws(E) -> R {
        var prime: OpaquePointer? = nil
        _ = BN_hex2bn(&prime, primeHex)
        let context = BN_CTX_secure_new()!
        defer {
            BN_free(prime)
            BN_CTX_free(context)
        }
        return try body(prime!, context)
    }

    /// `base^exponent mod prime`, big-endian padded to 128 bytes (in secure memory when `secure`,
    /// else returned as public bytes through the overload below).
    private static func exponentiate(_ base: OpaquePointer, _ exponent: SecureBytes, _ prime: OpaquePointer, _ context: OpaquePointer,
                                     secure: Bool) throws(CryptoError) -> SecureBytes {
        let power = BN_secure_new()!
        let result = BN_secure_new()!
        defer {
            BN_clear_free(power)
            BN_clear_free(result)
        }
        exponent.withUnsafeBytes { bytes in
            _ = BN_bin2bn(bytes.bindMemory(to: UInt8.self).baseAddress, Int32(bytes.count), power)
        }
        BN_set_flags(power, BN_FLG_CONSTTIME)
        guard BN_mod_exp_mont_consttime(result, base, power, prime, context, nil) == 1 else {
            throw CryptoError("libcrypto's modular exponentiation failed.")
        }
        let output = SecureBytes(count: byteCount)
        let written = output.withUnsafeMutableBytes { buffer in
            BN_bn2binpad(result, buffer.bindMemory(to: UInt8.self).baseAddress, Int32(byteCount))
        }
        guard written == Int32(byteCount) else { throw CryptoError("The result does not fit in \(byteCount) bytes.") }
        return output
    }

    private static func exponentiate(_ base: OpaquePointer, _ exponent: SecureBytes, _ prime: OpaquePointer,
                                     _ context: OpaquePointer) throws(CryptoError) -> [UInt8] {
        let secure = try exponentiate(base, exponent, prime, context, secure: false)
        return secure.withUnsafeBytes { Array($0) }
    }
}

extension ModularDiffieHellman {
    /// libcrypto's own copy of the RFC 2409 1024-bit prime (`BN_get_rfc2409_prime_1024`), in
    /// hexadecimal: a test compares it with ``primeHex``.
    package static var libcryptoPrimeHex: String {
        let prime = BN_get_rfc2409_prime_1024(nil)!
        defer { BN_free(prime) }
        let text = BN_bn2hex(prime)!
        defer { CRYPTO_free(text, #fileID, #line) }
        return String(cString: text)
    }
}
