/// Failures reported by the libsodium bridge.
///
/// Kept apart so that a wrong length can never pass for a forgery: callers map
/// ``authenticationFailed`` to an integrity failure and the rest to programming
/// or resource errors.
package enum SodiumError: Error, Equatable, Sendable {
    /// An AEAD tag did not verify: wrong key, wrong associated data, or tampering.
    case authenticationFailed
    /// An input had the wrong size for the primitive.
    case invalidLength(what: String, expected: Int, actual: Int)
    /// An X25519 public key produced an all-zero shared secret (low-order point).
    case invalidPublicKey
    /// Argon2id could not run with these parameters (usually: not enough memory).
    case keyDerivationFailed
    /// Parameters outside what the primitive accepts.
    case invalidParameter(String)
}
