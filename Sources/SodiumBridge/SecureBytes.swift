import CSodium
import Foundation

/// A fixed-size buffer of secret bytes in `sodium_malloc`ed memory.
///
/// The memory sits between guard pages, is locked against swapping where the
/// system permits, and is zeroed when the buffer is released (`sodium_free`)
/// or explicitly ``wipe()``d. The bytes are reachable only through
/// ``withUnsafeBytes(_:)``; `description` never shows them; the type is
/// neither `Codable` nor convertible to an `Array`.
///
/// Thread safety: a `SecureBytes` is filled once when created and only read
/// afterwards, except for ``wipe()`` and ``withUnsafeMutableBytes(_:)``, which
/// the owner must serialise against readers (the device and handles do so under
/// their own locks).
package final class SecureBytes: @unchecked Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    private let pointer: UnsafeMutableRawPointer
    /// The number of bytes.
    package let count: Int
    /// The allocation this buffer is a part of (``allocatingTogether(_:)``), kept alive by it
    /// and freed with the last of its parts; `nil` when the buffer is an allocation of its own.
    private let region: SecureBytes?

    /// Allocates `count` zeroed secret bytes.
    package init(count: Int) {
        precondition(count >= 0, "negative SecureBytes size")
        Sodium.ensureInitialized()
        guard let pointer = sodium_malloc(max(count, 1)) else {
            fatalError("sodium_malloc(\(count)) failed: out of memory")
        }
        sodium_memzero(pointer, max(count, 1))
        MemoryLocking.verify(pointer, count: max(count, 1))
        self.pointer = pointer
        self.count = count
        self.region = nil
    }

    private init(part region: SecureBytes, offset: Int, count: Int) {
        self.pointer = region.pointer + offset
        self.count = count
        self.region = region
    }

    /// Buffers of `counts` bytes (each at least one), zeroed, in one secure allocation: one
    /// set of guard pages, one `mlock` and one `sodium_free` instead of one each (some ten
    /// system calls per allocation). Each buffer is zeroed by its own ``wipe()`` and when it is
    /// released; the whole allocation is zeroed again and freed when the last of them is.
    package static func allocatingTogether(_ counts: [Int]) -> [SecureBytes] {
        precondition(counts.allSatisfy { $0 > 0 }, "every part of a secure allocation holds at least one byte")
        let region = SecureBytes(count: counts.reduce(0, +))
        var offset = 0
        return counts.map { count in
            defer { offset += count }
            return SecureBytes(part: region, offset: offset, count: count)
        }
    }

    /// Allocates `count` bytes and lets `initializer` fill them.
    package convenience init(count: Int, initializer: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        self.init(count: count)
        do {
            try initializer(UnsafeMutableRawBufferPointer(start: pointer, count: count))
        } catch {
            wipe()
            throw error
        }
    }

    /// `count` bytes from libsodium's CSPRNG (`randombytes_buf`).
    package static func random(count: Int) -> SecureBytes {
        SecureBytes(count: count) { buffer in
            if let base = buffer.baseAddress { randombytes_buf(base, buffer.count) }
        }
    }

    /// Copies the UTF-8 bytes of `string` (a passcode) into secure memory.
    ///
    /// The `String` itself cannot be wiped by Swift; callers keep it short-lived.
    package convenience init(copyingUTF8 string: String) {
        let utf8 = string.utf8
        self.init(count: utf8.count)
        for (index, byte) in utf8.enumerated() {
            pointer.storeBytes(of: byte, toByteOffset: index, as: UInt8.self)
        }
    }

    /// Moves the value of the environment variable `name` into secure memory: its bytes are
    /// copied, then zeroed in place in the environment block and the variable unset, so that
    /// neither this process's memory nor its children keep it. `nil` when it is not set.
    ///
    /// Call it before anything reads the environment (`ProcessInfo.environment` copies every
    /// variable into `String`s) and before threads start (`getenv`/`unsetenv` are not
    /// thread-safe).
    package static func takingEnvironmentVariable(_ name: String) -> SecureBytes? {
        guard let value = getenv(name) else { return nil }
        let length = strlen(value)
        let bytes = SecureBytes(count: length) { buffer in
            if let base = buffer.baseAddress, length > 0 { base.copyMemory(from: value, byteCount: length) }
        }
        sodium_memzero(value, length)
        unsetenv(name)
        return bytes
    }

    /// Copies `count` bytes of `other` starting at `offset`.
    package convenience init(copying other: SecureBytes, offset: Int = 0, count: Int? = nil) {
        let length = count ?? (other.count - offset)
        precondition(offset >= 0 && length >= 0 && offset + length <= other.count, "SecureBytes slice out of range")
        self.init(count: length)
        if length > 0 {
            pointer.copyMemory(from: other.pointer + offset, byteCount: length)
        }
    }

    /// Concatenates secret buffers into one new buffer.
    package convenience init(concatenating parts: [SecureBytes]) {
        self.init(count: parts.reduce(0) { $0 + $1.count })
        var offset = 0
        for part in parts where part.count > 0 {
            (pointer + offset).copyMemory(from: part.pointer, byteCount: part.count)
            offset += part.count
        }
    }

    deinit {
        // A part is zeroed now (its region may outlive it by long, kept by other parts), and
        // freed with its region.
        if region == nil { sodium_free(pointer) } else { sodium_memzero(pointer, count) }
    }

    /// Fills the bytes from libsodium's CSPRNG (`randombytes_buf`).
    package func randomize() {
        if count > 0 { randombytes_buf(pointer, count) }
    }

    /// Zeroes the bytes now (`sodium_memzero`); the buffer stays allocated.
    package func wipe() {
        sodium_memzero(pointer, max(count, 1))
    }

    /// Calls `body` with a read-only view of the bytes. Do not let the pointer escape.
    package func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// Calls `body` with a writable view of the bytes. Do not let the pointer escape.
    package func withUnsafeMutableBytes<R, E: Error>(_ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeMutableRawBufferPointer(start: pointer, count: count))
    }

    /// Constant-time comparison (`sodium_memcmp`); different sizes compare unequal.
    package func constantTimeEquals(_ other: SecureBytes) -> Bool {
        guard count == other.count else { return false }
        if count == 0 { return true }
        return sodium_memcmp(pointer, other.pointer, count) == 0
    }

    /// Whether every byte is zero (`sodium_is_zero`), in constant time.
    package var isZero: Bool {
        count == 0 || sodium_is_zero(pointer.assumingMemoryBound(to: UInt8.self), count) == 1
    }

    package var description: String { "SecureBytes(\(count) bytes, redacted)" }
    package var debugDescription: String { description }
}

extension SecureBytes {
    /// Whether the bytes start with `prefix` (compared in constant time).
    package func hasPrefix(_ prefix: Data) -> Bool {
        guard prefix.count <= count else { return false }
        let head = SecureBytes(copying: self, offset: 0, count: prefix.count)
        let expected = SecureBytes(count: prefix.count) { $0.copyBytes(from: prefix) }
        return head.constantTimeEquals(expected)
    }
}
