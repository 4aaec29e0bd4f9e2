import DataProtection
import DataProtectionSQLite
import GRDB
import SQLiteBridge

extension DatabaseQueue {
    /// A GRDB database queue on the protected database at `path` in `store`, created when
    /// missing (with `protection`, else its directory's class).
    ///
    /// The database and its journal are protected files. When the class key is discarded
    /// (a `complete` database after the lock's grace period), its open transaction is rolled
    /// back and SQLite's page cache freed, and every statement fails until the key is back,
    /// even one SQLite could answer from its cache or without the file (`SELECT 1`,
    /// `COMMIT`): GRDB throws a `DatabaseError` (`SQLITE_INTERRUPT`, or `SQLITE_IOERR_AUTH`
    /// from the file), which `DataProtectionError/init(grdb:)` turns into
    /// `protectedDataUnavailable`; after unlock the queue works again. After an erase it
    /// answers nothing again (`handleClosed`). A syntax error is still SQLite's own
    /// (`sqliteError`): SQLite finds it before any statement runs.
    public convenience init(
        protectedAtPath path: String, in store: ProtectedStore, protection protectionChoice: ProtectionChoice = .inherited,
        configuration: Configuration = Configuration()
    ) throws {
        let connections = ProtectedConnections(store: store, path: try ProtectedStore.standardizedPath(path))
        try self.init(path: ProtectedDatabase.uri(forPath: path, in: store, protection: protectionChoice),
                      configuration: connections.guarding(configuration))
        try connections.start(writer: self)
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
        let connections = ProtectedConnections(store: store, path: try ProtectedStore.standardizedPath(path))
        try self.init(path: ProtectedDatabase.uri(forPath: path, in: store, protection: protectionChoice),
                      configuration: connections.guarding(configuration))
        try connections.start(writer: self)
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
        if error.resultCode == .SQLITE_INTERRUPT, let refusal = SQLiteStatementGate.refusal {
            // A protected database's gate refused the statement (no caller of this process
            // interrupts its own statements while a protected database is locked, or erased).
            switch refusal {
            case .erased:
                self.init(.handleClosed, "The device was erased: this database connection answers nothing again.",
                          hint: "Open the database again.")
            case .keyAway, .open:
                self.init(.protectedDataUnavailable, "SQLite: the database's class key is away (the device is locked).",
                          hint: "Unlock the device, then try again.")
            }
            return
        }
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
