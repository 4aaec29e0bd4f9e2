import Foundation
import SodiumBridge
import SystemPackage

/// A passcode: any bytes, held in secure memory (locked against swapping where the system
/// allows, between guard pages, zeroed when released) from the moment it is read until the
/// key derivation.
///
/// A `String` cannot be wiped: once a passcode has been one, copies of it may stay in freed
/// memory. The initialisers that read (a file descriptor, an environment variable) never make
/// one. The `String` overloads of ``Device``'s passcode methods remain for convenience and
/// for passcodes that are `String`s already.
///
/// A passcode is its bytes, not text: two byte sequences are two passcodes, whatever their
/// encoding (`Keys/key-hierarchy.md` §8.1). Its `description` never shows them.
public final class Passcode: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The most bytes ``init(reading:limit:stoppingAtNewline:)`` reads by default.
    public static let defaultReadLimit = 4096

    /// The bytes, in secure memory (the agent writes them into its frames from here).
    package let bytes: SecureBytes

    package init(secure bytes: SecureBytes) {
        self.bytes = bytes
    }

    /// The UTF-8 bytes of `string`.
    public convenience init(_ string: String) {
        self.init(secure: SecureBytes(copyingUTF8: string))
    }

    /// A copy of `bytes` (any bytes: a passcode need not be text). Wiping the caller's own
    /// copy is the caller's business.
    public convenience init(bytes: some Collection<UInt8>) {
        let count = bytes.count
        self.init(secure: SecureBytes(count: count) { buffer in
            _ = buffer.initializeMemory(as: UInt8.self, from: bytes)
        })
    }

    /// Reads a passcode from `descriptor` straight into secure memory: to the end of input, or
    /// with `stoppingAtNewline` to the first `\n` or `\r` (a terminal line, read a byte at a
    /// time so that nothing after it is consumed). One trailing newline (`\n` or `\r\n`) is
    /// not part of the passcode.
    ///
    /// - Throws: `invalidArgument` when there are more than `limit` bytes; `ioFailure` when
    ///   reading fails.
    public convenience init(
        reading descriptor: FileDescriptor, limit: Int = Passcode.defaultReadLimit, stoppingAtNewline: Bool = false
    ) throws(DataProtectionError) {
        // Room for a trailing "\r\n", and one byte more: a full buffer is input past the limit.
        let buffer = SecureBytes(count: limit + 3)
        var filled = 0
        let capacity = buffer.count
        while filled < capacity {
            let count: Int
            do {
                count = try buffer.withUnsafeMutableBytes { bytes throws(Errno) -> Int in
                    let wanted = stoppingAtNewline ? filled..<filled + 1 : filled..<capacity
                    do {
                        return try descriptor.read(into: UnsafeMutableRawBufferPointer(rebasing: bytes[wanted]), retryOnInterrupt: true)
                    } catch let error as Errno {
                        throw error
                    } catch {
                        throw Errno.ioError
                    }
                }
            } catch {
                throw DataProtectionError(.ioFailure, "Cannot read the passcode: \(error).")
            }
            if count == 0 { break }
            if stoppingAtNewline {
                let byte = buffer.withUnsafeBytes { $0[filled] }
                if byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") { break }
            }
            filled += count
        }
        guard filled < capacity else {
            throw DataProtectionError(.invalidArgument, "The passcode is longer than \(limit) bytes.")
        }
        // One trailing newline, `\n` or `\r\n`, is the end of the line, not the passcode.
        var length = filled
        buffer.withUnsafeBytes { bytes in
            if length > 0, bytes[length - 1] == UInt8(ascii: "\n") {
                length -= 1
                if length > 0, bytes[length - 1] == UInt8(ascii: "\r") { length -= 1 }
            }
        }
        guard length <= limit else {
            throw DataProtectionError(.invalidArgument, "The passcode is longer than \(limit) bytes.")
        }
        self.init(secure: SecureBytes(copying: buffer, offset: 0, count: length))
    }

    /// Moves the environment variable `name` into a passcode: the variable is zeroed in place
    /// in the environment and unset, so that it is neither in this process's memory nor in its
    /// children's. `nil` when it is not set; an empty value is returned as it is (the caller
    /// decides what an empty variable means).
    ///
    /// Call it at the start of `main`, before anything reads the environment
    /// (`ProcessInfo.processInfo.environment` copies every variable into `String`s) and before
    /// other threads start.
    public static func takingEnvironmentVariable(_ name: String) -> Passcode? {
        SecureBytes.takingEnvironmentVariable(name).map(Passcode.init(secure:))
    }

    /// How many bytes the passcode has.
    public var byteCount: Int { bytes.count }

    /// Whether `other` is the same passcode (compared in constant time).
    public func matches(_ other: Passcode) -> Bool {
        bytes.constantTimeEquals(other.bytes)
    }

    /// Two passcodes are equal when their bytes are (compared in constant time).
    public static func == (lhs: Passcode, rhs: Passcode) -> Bool { lhs.matches(rhs) }

    /// Hashes the length only: the bytes never feed anything but the key derivation.
    public func hash(into hasher: inout Hasher) { hasher.combine(bytes.count) }

    /// Zeroes the passcode now (it is zeroed anyway when released).
    public func wipe() {
        bytes.wipe()
    }

    public var description: String { "Passcode(\(bytes.count) bytes)" }
    public var debugDescription: String { description }
}
