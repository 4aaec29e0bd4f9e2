import DataProtection
import SQLiteBridge
import SodiumBridge

/// One SQLite VFS per store, registered the first time a database of the store is opened
/// and kept for as long as the store lives (its connections hold the store).
enum DatabaseVFSRegistry {
    private struct Registration {
        weak var store: ProtectedStore?
        let vfs: SQLiteVFS
    }

    private static let registrations = Locked<(next: Int, byStore: [ObjectIdentifier: Registration])>((0, [:]))

    /// The VFS that serves `store`'s files to SQLite.
    static func vfs(for store: ProtectedStore) throws(DataProtectionError) -> SQLiteVFS {
        let result = registrations.withLock { registrations -> Result<SQLiteVFS, DataProtectionError> in
            registrations.byStore = registrations.byStore.filter { $0.value.store != nil }
            if let existing = registrations.byStore[ObjectIdentifier(store)], existing.store === store {
                return .success(existing.vfs)
            }
            registrations.next += 1
            do throws(SQLiteError) {
                let vfs = try SQLiteVFS(name: "dataprotection-\(registrations.next)", storage: StoreSQLiteStorage(store: store))
                registrations.byStore[ObjectIdentifier(store)] = Registration(store: store, vfs: vfs)
                return .success(vfs)
            } catch {
                return .failure(DataProtectionError(error))
            }
        }
        return try result.get()
    }
}
