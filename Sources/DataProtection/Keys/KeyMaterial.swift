import Foundation
import SodiumBridge

/// Secret bytes in secure memory (locked against swapping where the system allows,
/// between guard pages, zeroed when released): what a ``DeviceKeyProvider`` is given and
/// returns.
///
/// Read and fill it in place with ``withUnsafeBytes(_:)`` and ``withUnsafeMutableBytes(_:)``;
/// do not let the buffer escape the closure, and do not copy the bytes into a `Data` or an
/// array, which cannot be wiped. Its `description` never shows the bytes.
public final class KeyMaterial: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    package let bytes: SecureBytes

    package init(secure bytes: SecureBytes) {
        self.bytes = bytes
    }

    /// `count` zero bytes, to be filled with ``withUnsafeMutableBytes(_:)``.
    public convenience init(count: Int) {
        self.init(secure: SecureBytes(count: max(0, count)))
    }

    /// The number of bytes.
    public var count: Int { bytes.count }

    /// Calls `body` with the bytes. The buffer is valid only inside `body`.
    public func withUnsafeBytes<Result, Failure: Error>(
        _ body: (UnsafeRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try bytes.withUnsafeBytes(body)
    }

    /// Calls `body` with the bytes, writable. The buffer is valid only inside `body`.
    public func withUnsafeMutableBytes<Result, Failure: Error>(
        _ body: (UnsafeMutableRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try bytes.withUnsafeMutableBytes(body)
    }

    /// `KeyMaterial(n bytes)`: the length, never the bytes.
    public var description: String { "KeyMaterial(\(count) bytes)" }

    /// The same as ``description``.
    public var debugDescription: String { description }
}
