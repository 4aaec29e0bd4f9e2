import SodiumBridge

/// Wiped chunk buffers kept for reuse by every open file of the process.
///
/// A chunk buffer is secure memory: allocating one costs `mmap`, two `mprotect`s,
/// `mlock` and `madvise`, and freeing it as many again. Files that are written in
/// short bursts and synchronised after each (a database and its journal, which SQLite
/// creates and deletes for every transaction) would pay that for every chunk of every
/// transaction. Buffers are allocated a batch at a time, come back here wiped, and at most
/// ``limit`` bytes of them are kept (2 MiB): beyond that they are released (a batch's
/// memory is freed with the last of its buffers).
enum ChunkBufferPool {
    /// At most this many bytes of buffers are kept.
    static let limit = 2 << 20

    private struct Kept {
        var buffers: [Int: [SecureBytes]] = [:]
        var bytes = 0
    }

    private static let kept = Locked(Kept())

    /// Buffers allocated together when none is kept: one secure allocation (and its system
    /// calls) per this many chunks. A database's read caches fill with thousands of chunks,
    /// each of which was a `mmap`, three `mprotect`s, an `mlock` and a `madvise`, and as many
    /// again to free it.
    static let allocationBatch = 8

    /// A zeroed buffer of `count` bytes: a kept one if there is one, else the first of a new
    /// batch (the others kept, within the limit).
    static func take(count: Int) -> SecureBytes {
        let reused = kept.withLock { kept -> SecureBytes? in
            guard let buffer = kept.buffers[count]?.popLast() else { return nil }
            kept.bytes -= count
            return buffer
        }
        if let reused { return reused }
        var batch = SecureBytes.allocatingTogether(Array(repeating: count, count: allocationBatch))
        let first = batch.removeFirst()
        give(batch)
        return first
    }

    /// Keeps `released` for reuse, up to the limit (the rest are freed). Every buffer must
    /// already be wiped.
    static func give(_ released: [SecureBytes]) {
        guard !released.isEmpty else { return }
        kept.withLock { kept in
            for buffer in released where kept.bytes + buffer.count <= limit {
                kept.buffers[buffer.count, default: []].append(buffer)
                kept.bytes += buffer.count
            }
        }
    }
}
