import DataProtection
import Foundation

/// Reads a frame's payload field by field; any read past the end, or a value out of
/// range, is an ``AgentProtocolViolation``.
struct AgentFieldReader {
    private let bytes: [UInt8]
    private var offset: Int

    init(_ bytes: [UInt8], from offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    var isAtEnd: Bool { offset == bytes.count }

    private mutating func take(_ count: Int) throws(AgentProtocolViolation) -> ArraySlice<UInt8> {
        guard count >= 0, bytes.count - offset >= count else {
            throw AgentProtocolViolation("a field runs past the end of the frame")
        }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    mutating func u8() throws(AgentProtocolViolation) -> UInt8 { try take(1).first! }

    mutating func bool() throws(AgentProtocolViolation) -> Bool {
        switch try u8() {
        case 0: return false
        case 1: return true
        case let other: throw AgentProtocolViolation("a boolean of \(other)")
        }
    }

    mutating func u32() throws(AgentProtocolViolation) -> UInt32 {
        try take(4).reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func u64() throws(AgentProtocolViolation) -> UInt64 {
        try take(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    mutating func i64() throws(AgentProtocolViolation) -> Int64 { Int64(bitPattern: try u64()) }

    mutating func data(limit: Int = AgentWireFormat.maximumInlineData) throws(AgentProtocolViolation) -> ArraySlice<UInt8> {
        let count = Int(try u32())
        guard count <= limit else { throw AgentProtocolViolation("a field of \(count) bytes (limit \(limit))") }
        return try take(count)
    }

    mutating func string() throws(AgentProtocolViolation) -> String {
        guard let text = String(validating: try data(limit: AgentWireFormat.maximumStringLength), as: UTF8.self) else {
            throw AgentProtocolViolation("a string that is not UTF-8")
        }
        return text
    }

    /// A passcode: any bytes, at most a string's length, copied straight into secure memory
    /// (the frame they came in is wiped by its reader).
    mutating func passcode() throws(AgentProtocolViolation) -> Passcode {
        Passcode(bytes: try data(limit: AgentWireFormat.maximumStringLength))
    }

    mutating func optional<T>(_ read: (inout AgentFieldReader) throws(AgentProtocolViolation) -> T) throws(AgentProtocolViolation) -> T? {
        try bool() ? try read(&self) : nil
    }

    mutating func protectionClass() throws(AgentProtocolViolation) -> ProtectionClass? {
        let raw = Int(try u8())
        guard raw <= AgentWireFormat.classes.count else { throw AgentProtocolViolation("protection class \(raw)") }
        return raw == 0 ? nil : AgentWireFormat.classes[raw - 1]
    }

    mutating func requiredClass() throws(AgentProtocolViolation) -> ProtectionClass {
        guard let value = try protectionClass() else { throw AgentProtocolViolation("a protection class is required") }
        return value
    }

    mutating func milliseconds() throws(AgentProtocolViolation) -> Duration? {
        try optional { reader throws(AgentProtocolViolation) in
            let value = try reader.u64()
            guard value <= AgentWireFormat.maximumMilliseconds else { throw AgentProtocolViolation("a duration of \(value) ms") }
            return .milliseconds(Int64(value))
        }
    }

    mutating func element<T>(of table: [T], _ what: String) throws(AgentProtocolViolation) -> T {
        let raw = Int(try u8())
        guard raw < table.count else { throw AgentProtocolViolation("\(what) \(raw)") }
        return table[raw]
    }

    /// Requires that nothing is left (trailing bytes are a violation).
    func finish() throws(AgentProtocolViolation) {
        guard isAtEnd else { throw AgentProtocolViolation("\(bytes.count - offset) bytes after the last field") }
    }
}
