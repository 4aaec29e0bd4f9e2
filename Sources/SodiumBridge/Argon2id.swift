import CSodium
import Foundation

/// Argon2id v1.3 (`crypto_pwhash` with `crypto_pwhash_ALG_ARGON2ID13`).
package enum Argon2id {
    /// Salt size: 16 bytes.
    package static let saltByteCount = Int(crypto_pwhash_SALTBYTES)
    /// Smallest operations limit libsodium accepts for Argon2id (1).
    package static let minimumOperations = UInt64(crypto_pwhash_argon2id_OPSLIMIT_MIN)
    /// Smallest memory limit libsodium accepts for Argon2id, in bytes (8 KiB).
    package static let minimumMemory = UInt64(crypto_pwhash_argon2id_MEMLIMIT_MIN)
    /// Largest operations limit libsodium accepts.
    package static let maximumOperations = UInt64(crypto_pwhash_argon2id_OPSLIMIT_MAX)

    /// Derives `byteCount` bytes from `passcode` into secure memory.
    ///
    /// - Parameters:
    ///   - operations: `opslimit`, the number of passes.
    ///   - memory: `memlimit` in bytes.
    package static func deriveKey(
        byteCount: Int = 32, passcode: SecureBytes, salt: Data, operations: UInt64, memory: UInt64
    ) throws(SodiumError) -> SecureBytes {
        Sodium.ensureInitialized()
        guard salt.count == saltByteCount else {
            throw .invalidLength(what: "Argon2id salt", expected: saltByteCount, actual: salt.count)
        }
        guard operations >= minimumOperations, operations <= maximumOperations else {
            throw .invalidParameter("Argon2id operations limit \(operations) out of range")
        }
        guard memory >= minimumMemory, memory <= UInt64(Int.max) else {
            throw .invalidParameter("Argon2id memory limit \(memory) out of range")
        }
        let output = SecureBytes(count: byteCount)
        let status = output.withUnsafeMutableBytes { out in
            passcode.withUnsafeBytes { pw in
                salt.withUnsafeBytes { s in
                    crypto_pwhash(
                        out.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(byteCount),
                        pw.baseAddress!.assumingMemoryBound(to: CChar.self), UInt64(pw.count),
                        s.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        operations, Int(memory),
                        crypto_pwhash_ALG_ARGON2ID13)
                }
            }
        }
        guard status == 0 else { throw .keyDerivationFailed }
        return output
    }
}
