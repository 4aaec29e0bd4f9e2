import SodiumBridge

/// Wiped chunk buffers kept for reuse by every open file of the process.
///
/// A chunk buffer is secure memory: allocating one costs `mmap`, two `mprotect`s,
/// `mlock` and `madvise`, and freeing it as many again. Files that are written in
/// short bursts and synchronised after each (a database and its journal, which SQLite
/// creates and deletes for every transaction) would pay that for every chunk of every
/// transaction. Buffers come back here wiped, and at most ``limit`` bytes of them are
/// kept (2 MiB): beyond that they are freed.
enum ChunkBufferPool {
    /// At most this many bytes of buffers are kept.
    static let limit = 2 << 20

    private struct Kept {
        var buffers: [Int: [SecureBytes]] = [:]
        var bytes = 0
    }

    private static let kept = Locked(Kept())

    /// A zeroed buffer of `count` bytes: a kept one if there is one.
    static func take(count: Int) -> SecureBytes {
        let reused = kept.withLock { kept -> SecureBytes? in
            guard let buffer = kept.buffers[count]?.popLast() else { return nil }
            kept.bytes -= count
            return buffer
        }
        return reused ?? SecureBytes(count: count)
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
