import CSodium
import Foundation

/// scrypt (RFC 7914), libsodium's `crypto_pwhash_scryptsalsa208sha256_ll`: the passphrase KDF
/// of age's `scrypt` recipient stanza (r = 8, p = 1).
package enum Scrypt {
    /// `scrypt(password, salt, N = 2^logN, r, p)` of `byteCount` bytes into secure memory.
    /// Needs about `128 × r × 2^logN` bytes of memory (256 MiB at age's default logN 18).
    package static func deriveKey(
        password: SecureBytes, salt: Data, logN: Int, r: UInt32 = 8, p: UInt32 = 1, byteCount: Int = 32
    ) throws(SodiumError) -> SecureBytes {
        guard (1...30).contains(logN) else { throw .invalidParameter("scrypt log2(N) \(logN) is outside 1...30") }
        Sodium.ensureInitialized()
        let key = SecureBytes(count: byteCount)
        let status = key.withUnsafeMutableBytes { out in
            password.withUnsafeBytes { pw in
                salt.withUnsafeBytes { s in
                    // An empty passphrase still needs a valid pointer.
                    var empty: UInt8 = 0
                    return withUnsafePointer(to: &empty) { nothing in
                    crypto_pwhash_scryptsalsa208sha256_ll(
                        pw.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? nothing, pw.count,
                        s.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? nothing, s.count,
                        UInt64(1) << UInt64(logN), r, p,
                        out.baseAddress!.assumingMemoryBound(to: UInt8.self), byteCount)
                    }
                }
            }
        }
        guard status == 0 else {
            key.wipe()
            throw .keyDerivationFailed
        }
        return key
    }
}
