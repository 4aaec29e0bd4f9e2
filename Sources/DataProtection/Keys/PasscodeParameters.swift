import Foundation
import SodiumBridge

/// How the passcode is stretched, as stored in the keybag.
package enum PasscodeParameters: Sendable, Hashable {
    /// No passcode is set: passcode classes are wrapped with a device-only key.
    case none
    /// Argon2id v1.3 with a 16-byte salt, `operations` passes and `memory` bytes.
    case argon2id(salt: Data, operations: UInt64, memory: UInt64)

    /// The largest memory limit a keybag may name (4 GiB): anything larger is corrupt.
    static let maximumMemory: UInt64 = 4 << 30
}

/// How expensive the passcode key derivation is made when a passcode is set.
public enum PasscodeCost: Sendable, Hashable {
    /// Measure Argon2id on this machine and pick parameters that take about `target`
    /// (3 passes; memory scaled to the target, between 16 MiB and 1 GiB).
    case calibrated(target: Duration)
    /// Fixed Argon2id parameters: `operations` passes over `memoryBytes` bytes.
    case fixed(operations: UInt64, memoryBytes: UInt64)

    /// The default: calibrated to about 90 ms, within the 80-100 ms the contract asks for.
    public static let standard = PasscodeCost.calibrated(target: .milliseconds(90))

    /// The cheapest parameters libsodium accepts (1 pass, 8 KiB). For tests only:
    /// it offers no resistance to guessing.
    public static let minimal = PasscodeCost.fixed(operations: 1, memoryBytes: 8 * 1024)

    /// Fresh parameters (with a new random salt) for a passcode being set.
    func parameters() throws(DataProtectionError) -> PasscodeParameters {
        let salt = Random.bytes(count: Argon2id.saltByteCount)
        switch self {
        case .fixed(let operations, let memory):
            return .argon2id(salt: salt, operations: operations, memory: memory)
        case .calibrated(let target):
            let (operations, memory) = try Self.calibrate(target: target)
            return .argon2id(salt: salt, operations: operations, memory: memory)
        }
    }

    /// Three timed runs at 3 passes over 64 MiB, the fastest kept (a busy
    /// machine only ever slows a run down), then memory scaled linearly to the
    /// target: Argon2id's cost is proportional to passes × memory.
    static func calibrate(target: Duration) throws(DataProtectionError) -> (operations: UInt64, memory: UInt64) {
        let operations: UInt64 = 3
        let probeMemory: UInt64 = 64 << 20
        var fastest = Duration.seconds(3600)
        for _ in 0..<3 {
            fastest = min(fastest, try measureDerivation(operations: operations, memoryBytes: probeMemory))
        }
        let elapsed = max(Double(fastest.nanoseconds), 1)
        let scaled = Double(probeMemory) * Double(target.nanoseconds) / elapsed
        let mebibyte = Double(1 << 20)
        let clamped = min(max(scaled, 16 * mebibyte), 1024 * mebibyte)
        return (operations, UInt64(clamped / mebibyte) << 20)
    }
}
