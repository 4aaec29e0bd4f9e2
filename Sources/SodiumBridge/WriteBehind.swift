import CSodium

/// Starts writing dirty pages of a file to disk without waiting (Linux
/// `sync_file_range(…, SYNC_FILE_RANGE_WRITE)`), so that a large file written
/// sequentially reaches the disk while it is being written and its final
/// `fsync` has little left to do. Durability still comes only from `fsync`.
/// A no-op where the call does not exist (macOS); errors (a pipe) are ignored.
///
/// It lives in the bridge because this module is the package's one door to C:
/// glibc declares `sync_file_range` only under `_GNU_SOURCE`, so the shim
/// declares it.
package enum WriteBehind {
    /// Starts the write-back of `count` bytes at `offset` of the open file `descriptor`.
    package static func start(descriptor: Int32, offset: Int64, count: Int64) {
        _ = dp_start_write_behind(descriptor, offset, count)
    }
}
