import DataProtection
import Dispatch
import Foundation
import SodiumBridge

/// Writes pieces to a local file or standard output on a background queue, so
/// that the next piece is read and decrypted meanwhile. At most `depth` pieces
/// wait (constant memory); the first write error is kept, later pieces are
/// dropped, and ``finish()`` throws it.
final class PipelinedOutput: @unchecked Sendable {
    private let handle: FileHandle
    private let describe: String
    private let queue = DispatchQueue(label: "dpctl.output", qos: .userInitiated)
    private let slots: DispatchSemaphore
    private let lock = NSLock()
    private var failure: (any Error)?
    private var written: Int64 = 0

    /// Output to `handle`; `describe` names it in errors (`standard output`, a path).
    init(_ handle: FileHandle, describe: String, depth: Int = 3) {
        self.handle = handle
        self.describe = describe
        slots = DispatchSemaphore(value: depth)
    }

    deinit {
        queue.sync {}
    }

    /// Queues `piece`; throws an earlier write's error.
    func write(_ piece: Data) throws {
        slots.wait()
        if let failure = lock.withLock({ failure }) {
            slots.signal()
            throw failure
        }
        queue.async { [self] in
            if lock.withLock({ failure == nil }) {
                do {
                    try handle.write(contentsOf: piece)
                    // The final fsync of a file then waits for little more than the last pieces.
                    WriteBehind.start(descriptor: handle.fileDescriptor, offset: written, count: Int64(piece.count))
                    written += Int64(piece.count)
                } catch {
                    lock.withLock { if failure == nil { failure = error } }
                }
            }
            slots.signal()
        }
    }

    /// Waits for every queued piece, then throws the first write error.
    func finish() throws {
        queue.sync {}
        if let failure = lock.withLock({ failure }) {
            throw DataProtectionError(.ioFailure, "Cannot write to \(describe): \(failure.localizedDescription)")
        }
    }
}
