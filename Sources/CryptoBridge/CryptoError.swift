/// A failure of libcrypto or a value it refuses (a peer's public key out of range, a
/// ciphertext whose padding does not check out).
package struct CryptoError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What failed, in words (never any secret).
    package let message: String

    package init(_ message: String) {
        self.message = message
    }

    package var description: String { message }
}
