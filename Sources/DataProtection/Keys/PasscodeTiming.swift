import Foundation
import SodiumBridge

extension PasscodeCost {
    /// Times one Argon2id derivation with the given parameters on this machine
    /// (used by `dpctl demo` and the benchmarks to split unlock time into the
    /// KDF and the rest).
    public static func measureDerivation(operations: UInt64, memoryBytes: UInt64) throws(DataProtectionError) -> Duration {
        let passcode = SecureBytes(copyingUTF8: "timing")
        let clock = ContinuousClock()
        let start = clock.now
        do {
            _ = try Argon2id.deriveKey(passcode: passcode, salt: Data(count: Argon2id.saltByteCount),
                                       operations: operations, memory: memoryBytes)
        } catch {
            throw DataProtectionError(.ioFailure, "Argon2id could not run: \(error).")
        }
        return clock.now - start
    }
}
