import DataProtection
import DataProtectionSQLite
import GRDB

extension DatabaseQueue {
    /// A GRDB database queue on the protected database at `path` in `store`, created when
    /// missing (with `protection`, else its directory's class).
    ///
    /// The database and its journal are protected files: once the device locks and the
    /// class key is discarded, a statement that needs the disk throws a `DatabaseError`
    /// with `SQLITE_IOERR_AUTH`, which `DataProtectionError/init(grdb:)`
    /// turns into `protectedDataUnavailable`; after unlock the queue works again.
    public convenience init(
        protectedAtPath path: String, in store: ProtectedStore, protection protectionChoice: ProtectionChoice = .inherited,
        configuration: Configuration = Configuration()
    ) throws {
        try self.init(path: ProtectedDatabase.uri(forPath: path, in: store, protection: protectionChoice), configuration: configuration)
        // GRDB's releaseMemory(): SQLite's page caches (wiped by the zeroing allocator) and its statement caches.
        _ = MemoryReleaseAtLock(device: store.device) { [weak self] in
            self?.releaseMemory()
            return self != nil
        }
    }
}

extension DatabasePool {
    /// A GRDB database pool (WAL mode: one writer, concurrent readers) on the protected
    /// database at `path` in `store`, created when missing (with `protection`, else its
    /// directory's class). The WAL is a protected file of the same class; its index is
    /// process memory, never a file.
    public convenience init(
        protectedAtPath path: String, in store: ProtectedStore, protection protectionChoice: ProtectionChoice = .inherited,
        configuration: Configuration = Configuration()
    ) throws {
        try self.init(path: ProtectedDatabase.uri(forPath: path, in: store, protection: protectionChoice), configuration: configuration)
        // GRDB's releaseMemory(): SQLite's page caches (wiped by the zeroing allocator) and its statement caches.
        _ = MemoryReleaseAtLock(device: store.device) { [weak self] in
            self?.releaseMemory()
            return self != nil
        }
    }
}

extension DataProtectionError {
    /// The DataProtection error behind an error GRDB threw, if the store caused it: a
    /// `DatabaseError` with `SQLITE_IOERR_AUTH` is `protectedDataUnavailable` (the class key
    /// is not in memory), one with `SQLITE_IOERR_DATA` is `integrityFailure`; `nil` for
    /// SQLite's own errors (constraints, syntax, …) and anything else.
    ///
    /// ```swift
    /// do { try queue.write { db in try note.insert(db) } }
    /// catch where DataProtectionError(grdb: error)?.code == .protectedDataUnavailable {
    ///     // the device locked: keep the note for later
    /// }
    /// ```
    public init?(grdb error: any Error) {
        if let error = error as? DataProtectionError {
            self = error
            return
        }
        guard let error = error as? DatabaseError else { return nil }
        switch error.extendedResultCode {
        case .SQLITE_IOERR_AUTH:
            self.init(.protectedDataUnavailable, "SQLite: \(error.message ?? "disk I/O error").",
                      hint: "Unlock the device, then try again.")
        case .SQLITE_IOERR_DATA:
            self.init(.integrityFailure, "SQLite: \(error.message ?? "disk I/O error").")
        default:
            return nil
        }
    }
}
