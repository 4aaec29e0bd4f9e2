import Synchronization

/// For tests: watches the blocks SQLite frees through the zeroing allocator
/// (``SQLiteConnection/freedMemoryIsWiped``) and counts those not wiped to zero when freed.
/// The check runs inside every free while started; it is not for production use.
package enum SQLiteFreedMemoryAudit {
    private static let blocks = Atomic<Int>(0)
    private static let unwiped = Atomic<Int>(0)

    /// Starts counting (from zero).
    package static func start() {
        blocks.store(0, ordering: .sequentiallyConsistent)
        unwiped.store(0, ordering: .sequentiallyConsistent)
        SQLiteConnection.observeFreedBlocks { block, size in
            guard let block else { return }
            let bytes = UnsafeRawBufferPointer(start: block, count: Int(size))
            SQLiteFreedMemoryAudit.blocks.add(1, ordering: .relaxed)
            if bytes.contains(where: { $0 != 0 }) { SQLiteFreedMemoryAudit.unwiped.add(1, ordering: .relaxed) }
        }
    }

    /// Stops counting and returns how many blocks were freed, and how many of them held a nonzero byte.
    package static func stop() -> (blocks: Int, unwiped: Int) {
        SQLiteConnection.observeFreedBlocks(nil)
        return (blocks.load(ordering: .sequentiallyConsistent), unwiped.load(ordering: .sequentiallyConsistent))
    }
}
