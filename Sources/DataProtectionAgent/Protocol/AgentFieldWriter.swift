import DataProtection
import Foundation
import SodiumBridge

/// Builds a frame's payload: big-endian integers, length-prefixed strings and bytes.
struct AgentFieldWriter {
    private(set) var bytes: [UInt8] = []

    init() {}

    mutating func u8(_ value: UInt8) { bytes.append(value) }

    mutating func bool(_ value: Bool) { bytes.append(value ? 1 : 0) }

    mutating func u32(_ value: UInt32) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func u64(_ value: UInt64) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func i64(_ value: Int64) { u64(UInt64(bitPattern: value)) }

    mutating func string(_ value: String) { data(Array(value.utf8)) }

    /// A passcode's bytes, from secure memory straight into the frame (wiped once sent).
    mutating func passcode(_ value: Passcode) {
        value.bytes.withUnsafeBytes { data($0) }
    }

    mutating func data<D: Collection<UInt8>>(_ value: D) {
        u32(UInt32(value.count))
        bytes.append(contentsOf: value)
    }

    /// Appends what `other` wrote.
    mutating func append(_ other: AgentFieldWriter) { bytes.append(contentsOf: other.bytes) }

    mutating func optional<T>(_ value: T?, _ write: (inout AgentFieldWriter, T) -> Void) {
        guard let value else { return u8(0) }
        u8(1)
        write(&self, value)
    }

    mutating func protectionClass(_ value: ProtectionClass?) {
        u8(value.map { UInt8(AgentWireFormat.classes.firstIndex(of: $0)! + 1) } ?? 0)
    }

    mutating func milliseconds(_ value: Duration?) {
        optional(value) { writer, duration in
            // Whole milliseconds, never negative, at most ``AgentWireFormat/maximumMilliseconds``.
            let (seconds, attoseconds) = duration.components
            let whole = UInt64(max(0, seconds)).multipliedReportingOverflow(by: 1000)
            let milliseconds = whole.overflow ? UInt64.max : whole.partialValue &+ UInt64(max(0, attoseconds) / 1_000_000_000_000_000)
            writer.u64(min(milliseconds, AgentWireFormat.maximumMilliseconds))
        }
    }

    /// Overwrites the payload with zeros (frames that carried a passcode).
    mutating func wipe() {
        Sodium.wipe(&bytes)
    }
}
