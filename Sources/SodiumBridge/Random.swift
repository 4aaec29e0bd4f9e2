import CSodium
import Foundation

/// Public (non-secret) randomness from libsodium's CSPRNG: nonces, salts, identifiers.
///
/// Secret random bytes come from ``SecureBytes/random(count:)`` instead, so they
/// never live in a `Data`.
package enum Random {
    /// `count` random bytes (`randombytes_buf`).
    package static func bytes(count: Int) -> Data {
        Sodium.ensureInitialized()
        var data = Data(count: count)
        data.withUnsafeMutableBytes { raw in
            if let base = raw.baseAddress { randombytes_buf(base, raw.count) }
        }
        return data
    }

    /// A uniformly random integer below `upperBound` (`randombytes_uniform`).
    package static func uniform(below upperBound: UInt32) -> UInt32 {
        Sodium.ensureInitialized()
        return randombytes_uniform(upperBound)
    }
}

/// Constant-time helpers over public data (MACs, tags).
package enum ConstantTime {
    /// Compares two byte strings in time independent of their content (`sodium_memcmp`).
    package static func equals(_ lhs: Data, _ rhs: Data) -> Bool {
        guard lhs.count == rhs.count else { return false }
        if lhs.isEmpty { return true }
        return lhs.withUnsafeBytes { l in
            rhs.withUnsafeBytes { r in
                sodium_memcmp(l.baseAddress!, r.baseAddress!, l.count) == 0
            }
        }
    }
}
