import Foundation
import SodiumBridge

/// The failed-passcode-attempt record, kept on disk so that it survives
/// restarts, and authenticated with a key derived from the device key.
///
/// File: `"DPAC" || 0x01 || failures u32 || flags u8 || last failure i64 ||
/// fingerprint(32) || MAC(32)`; see `Keys/key-hierarchy.md`, "The attempt counter".
package struct AttemptRecord: Sendable, Hashable {
    /// Consecutive counted failures.
    package var failures: UInt32 = 0
    /// When the last counted failure happened.
    package var lastFailure: DeviceInstant?
    /// Keyed fingerprint of the last counted wrong passcode.
    package var lastFailedFingerprint: Data?

    static let magic = Data("DPAC".utf8)
    static let version: UInt8 = 1
    static let fileByteCount = 4 + 1 + 4 + 1 + 8 + 32 + 32

    /// The record assumed when the file is missing or does not authenticate:
    /// the longest delay, starting now. Never a reset.
    package static func punitive(at now: DeviceInstant) -> AttemptRecord {
        AttemptRecord(failures: UInt32(PasscodePolicy.longestDelayFailures), lastFailure: now, lastFailedFingerprint: nil)
    }

    package func encoded(macKey: SecureBytes) -> Data {
        ByteWriter.data(byteCount: Self.fileByteCount) { writer in
            writer.append(Self.magic)
            writer.append(Self.version)
            writer.append(failures)
            writer.append(UInt8((lastFailure == nil ? 0 : 1) | (lastFailedFingerprint == nil ? 0 : 2)))
            writer.append(lastFailure?.nanoseconds ?? 0)
            writer.append(lastFailedFingerprint ?? Data(count: 32))
            writer.append(BLAKE2b.mac(key: macKey, [.data(Data(writer.written))]))
        }
    }

    package static func decode(_ file: Data, macKey: SecureBytes) throws(DataProtectionError) -> AttemptRecord {
        guard file.count == fileByteCount else {
            throw .integrity("The attempt counter is \(file.count) bytes long; it must be \(fileByteCount).")
        }
        let body = file.prefix(fileByteCount - 32)
        guard ConstantTime.equals(BLAKE2b.mac(key: macKey, [.data(Data(body))]), Data(file.suffix(32))) else {
            throw .integrity("The attempt counter does not authenticate.")
        }
        var reader = ByteReader(Data(body), what: "attempt counter")
        try reader.expect(ascii: "DPAC")
        guard try reader.uint8() == version else { throw .integrity("The attempt counter has an unknown version.") }
        let failures = try reader.uint32()
        let flags = try reader.uint8()
        let last = try reader.int64()
        let fingerprint = try reader.bytes(32)
        guard flags & ~3 == 0 else { throw .integrity("The attempt counter has unknown flags.") }
        return AttemptRecord(
            failures: failures,
            lastFailure: flags & 1 != 0 ? DeviceInstant(nanoseconds: last) : nil,
            lastFailedFingerprint: flags & 2 != 0 ? fingerprint : nil)
    }
}

/// Apple's escalating delays between passcode attempts.
public enum PasscodePolicy {
    /// The failure count from which the longest delay applies.
    public static let longestDelayFailures = 9

    /// The delay before the next attempt after `failures` consecutive failures:
    /// 1-4: none; 5: 1 min; 6: 5 min; 7-8: 15 min; 9 or more: 1 h.
    public static func delay(afterFailures failures: Int) -> Duration {
        switch failures {
        case ..<5: .zero
        case 5: .seconds(60)
        case 6: .seconds(5 * 60)
        case 7, 8: .seconds(15 * 60)
        default: .seconds(60 * 60)
        }
    }
}
