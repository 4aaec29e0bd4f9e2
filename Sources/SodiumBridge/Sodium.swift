import CSodium

/// One-time libsodium initialisation.
///
/// Every entry point of the bridge calls ``Sodium/ensureInitialized()`` first;
/// `sodium_init` is idempotent and thread-safe, and a failure means the
/// process cannot do cryptography at all, so it traps.
package enum Sodium {
    private static let initialized: Bool = {
        sodium_init() >= 0
    }()

    /// Initialises libsodium once per process.
    @inline(__always)
    package static func ensureInitialized() {
        precondition(initialized, "libsodium failed to initialise (sodium_init)")
    }

    /// The version string of the linked libsodium, e.g. `1.0.18`.
    package static var versionString: String {
        ensureInitialized()
        return String(cString: sodium_version_string())
    }

    /// Zeroes `bytes` in a way the compiler cannot drop (`sodium_memzero`): for transient
    /// buffers that held a secret, such as a frame that carried a passcode.
    package static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { sodium_memzero(base, buffer.count) }
        }
    }
}
