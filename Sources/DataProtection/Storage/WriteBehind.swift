import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Starts writing dirty pages of a file to disk without waiting (Linux
/// `sync_file_range(…, SYNC_FILE_RANGE_WRITE)`), so that a large file written
/// sequentially reaches the disk while it is being written and its final
/// `fsync` has little left to do. Durability still comes only from `fsync`.
/// A no-op where the call does not exist (macOS) or fails (a pipe).
package enum WriteBehind {
    private typealias SyncFileRange = @convention(c) (Int32, Int64, Int64, UInt32) -> Int32
    /// `SYNC_FILE_RANGE_WRITE` (not exported to Swift by Glibc without `_GNU_SOURCE`).
    private static let syncFileRangeWrite: UInt32 = 2

    private static let syncFileRange: SyncFileRange? = {
        #if os(Linux)
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "sync_file_range") else { return nil }
        return unsafeBitCast(symbol, to: SyncFileRange.self)
        #else
        return nil
        #endif
    }()

    /// Starts the write-back of `count` bytes at `offset` of the open file `descriptor`.
    package static func start(descriptor: Int32, offset: Int64, count: Int64) {
        _ = syncFileRange?(descriptor, offset, count, syncFileRangeWrite)
    }
}
