import DataProtection
import Foundation
import SodiumBridge
import SystemPackage

/// An item's secret: any bytes, held in secure memory (between guard pages, locked against
/// swapping where the system allows, zeroed when released). It becomes a `String` only when
/// asked (``secretString``); it is neither `Codable` nor shown by `description`.
public final class ItemSecret: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The most bytes ``init(reading:limit:)`` reads by default (1 MiB).
    public static let defaultReadLimit = 1 << 20

    /// The bytes, in secure memory.
    package let bytes: SecureBytes

    package init(secure bytes: SecureBytes) {
        self.bytes = bytes
    }

    /// The UTF-8 bytes of `string` (a `String` cannot be wiped: prefer the other initialisers
    /// for secrets that are not `String`s already).
    public convenience init(_ string: String) {
        self.init(secure: SecureBytes(copyingUTF8: string))
    }

    /// A copy of `bytes`. Wiping the caller's own copy is the caller's business.
    public convenience init(bytes: some Collection<UInt8>) {
        let count = bytes.count
        self.init(secure: SecureBytes(count: count) { buffer in
            _ = buffer.initializeMemory(as: UInt8.self, from: bytes)
        })
    }

    /// Reads a secret from `descriptor` to the end of input, straight into secure memory.
    /// Every byte is the secret's, a trailing newline included.
    ///
    /// - Throws: `invalidArgument` for more than `limit` bytes; `ioFailure` when reading fails.
    public convenience init(reading descriptor: FileDescriptor, limit: Int = ItemSecret.defaultReadLimit) throws(DataProtectionError) {
        var buffer = SecureBytes(count: min(limit + 1, 4096))
        var filled = 0
        while true {
            if filled == buffer.count {
                guard buffer.count <= limit else { break }
                let larger = SecureBytes(count: min(buffer.count * 2, limit + 1))
                let old = buffer
                larger.withUnsafeMutableBytes { target in
                    old.withUnsafeBytes { source in target.copyMemory(from: source) }
                }
                old.wipe()
                buffer = larger
            }
            let count: Int
            do {
                count = try buffer.withUnsafeMutableBytes { bytes throws(Errno) -> Int in
                    do {
                        return try descriptor.read(into: UnsafeMutableRawBufferPointer(rebasing: bytes[filled...]), retryOnInterrupt: true)
                    } catch let error as Errno {
                        throw error
                    } catch {
                        throw Errno.ioError
                    }
                }
            } catch {
                throw DataProtectionError(.ioFailure, "Cannot read the secret: \(error).")
            }
            if count == 0 { break }
            filled += count
        }
        guard filled <= limit else {
            throw DataProtectionError(.invalidArgument, "The secret is longer than \(limit) bytes.")
        }
        self.init(secure: SecureBytes(copying: buffer, offset: 0, count: filled))
    }

    /// How many bytes the secret has.
    public var byteCount: Int { bytes.count }

    /// The secret as UTF-8 text, `nil` when its bytes are not UTF-8. Asking makes a `String`,
    /// which cannot be wiped.
    public var secretString: String? {
        bytes.withUnsafeBytes { String(validating: $0.bindMemory(to: UInt8.self), as: UTF8.self) }
    }

    /// Calls `body` with the secret's bytes (valid only during the call).
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try bytes.withUnsafeBytes(body)
    }

    /// Writes the secret's bytes, exactly, to `descriptor` (straight from secure memory).
    ///
    /// - Throws: `ioFailure` when writing fails.
    public func write(to descriptor: FileDescriptor) throws(DataProtectionError) {
        do {
            try bytes.withUnsafeBytes { buffer throws(Errno) in
                var written = 0
                while written < buffer.count {
                    do {
                        written += try descriptor.write(UnsafeRawBufferPointer(rebasing: buffer[written...]), retryOnInterrupt: true)
                    } catch let error as Errno {
                        throw error
                    } catch {
                        throw Errno.ioError
                    }
                }
            }
        } catch {
            throw DataProtectionError(.ioFailure, "Cannot write the secret: \(error).")
        }
    }

    /// Whether `other` holds the same bytes (compared in constant time).
    public func matches(_ other: ItemSecret) -> Bool {
        bytes.constantTimeEquals(other.bytes)
    }

    /// Two secrets are equal when their bytes are (compared in constant time).
    public static func == (lhs: ItemSecret, rhs: ItemSecret) -> Bool { lhs.matches(rhs) }

    /// Hashes the length only: the bytes never feed a hash table.
    public func hash(into hasher: inout Hasher) { hasher.combine(bytes.count) }

    /// Zeroes the secret now (it is zeroed anyway when released).
    public func wipe() {
        bytes.wipe()
    }

    public var description: String { "ItemSecret(\(bytes.count) bytes)" }
    public var debugDescription: String { description }
}
