import Dispatch
import Foundation
import SodiumBridge
import SystemPackage

/// Writes pieces to a local file, standard output or a client's descriptor (`dpctl get`,
/// the agent's `readFile`) on a background queue, so
/// that the next piece is read and decrypted meanwhile. At most `depth` pieces
/// wait (constant memory); the first write error is kept, later pieces are
/// dropped, and ``write(_:)`` or ``finish()`` throws it.
///
/// Every write error is a ``DataProtectionError`` (`ioFailure`), except a reader
/// that went away (`EPIPE`: `dpctl cat big | head`), which is ``OutputClosed``.
package final class PipelinedOutput: @unchecked Sendable {
    private let descriptor: FileDescriptor
    private let describe: String
    private let queue = DispatchQueue(label: "DataProtection.output", qos: .userInitiated)
    private let slots: DispatchSemaphore
    private let lock = NSLock()
    private var failure: (any Error)?
    private var written: Int64 = 0
    /// Writes one piece's bytes, all of them.
    private let writeAll: @Sendable (FileDescriptor, UnsafeRawBufferPointer) throws -> Void

    /// Output to `descriptor`; `describe` names it in errors (`standard output`, a path).
    /// `write` writes one piece's bytes, all of them (default: `writeAll`); a
    /// ``DataProtectionError`` it throws is reported as it is, and later pieces are dropped.
    package init(
        _ descriptor: FileDescriptor, describe: String, depth: Int = 3,
        write: @escaping @Sendable (FileDescriptor, UnsafeRawBufferPointer) throws -> Void = { _ = try $0.writeAll($1) }
    ) {
        self.descriptor = descriptor
        self.describe = describe
        slots = DispatchSemaphore(value: depth)
        writeAll = write
    }

    // No wait in deinit: every queued piece holds the output, so none is pending once it is being
    // released, and the last release may happen on the queue itself (a piece that failed after the
    // caller gave up), where a `queue.sync` would wait for itself: libdispatch traps (SIGILL).

    /// Queues `piece`; throws an earlier write's error.
    package func write(_ piece: Data) throws {
        slots.wait()
        if let failure = lock.withLock({ failure }) {
            slots.signal()
            throw failure
        }
        queue.async { [self] in
            if lock.withLock({ failure == nil }) {
                do {
                    try piece.withUnsafeBytes { try writeAll(descriptor, $0) }
                    // The final fsync of a file then waits for little more than the last pieces.
                    WriteBehind.start(descriptor: descriptor.rawValue, offset: written, count: Int64(piece.count))
                    written += Int64(piece.count)
                } catch {
                    let reported = Self.report(error, describe: describe)
                    lock.withLock { if failure == nil { failure = reported } }
                }
            }
            slots.signal()
        }
    }

    /// Waits for every queued piece, then throws the first write error.
    package func finish() throws {
        queue.sync {}
        if let failure = lock.withLock({ failure }) { throw failure }
    }

    private static func report(_ error: any Error, describe: String) -> any Error {
        if error is DataProtectionError { return error }
        guard let errno = error as? Errno else {
            return DataProtectionError(.ioFailure, "Cannot write to \(describe): \(error.localizedDescription)")
        }
        if errno == .brokenPipe { return OutputClosed() }
        return DataProtectionError(.ioFailure, "Cannot write to \(describe): \(errno.description).")
    }
}

/// The reader of standard output went away (`EPIPE`): the command stops quietly, with status 0,
/// as one whose reader has all it wanted (`dpctl cat big | head -c 10`).
package struct OutputClosed: Error {
    package init() {}
}
