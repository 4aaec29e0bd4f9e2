import DataProtection
import Foundation
import SQLiteBridge

extension ProtectedDatabase {
    /// Copies this database whole into `destination` (an empty database) as of one committed
    /// instant: SQLite's backup API in one step, so a WAL database comes with every frame
    /// committed before that instant, whatever other connections commit or checkpoint
    /// meanwhile (`Keys/backup-format.md` §4). Memory stays that of the two page caches.
    package func copyWhole(into destination: ProtectedDatabase) throws(DataProtectionError) {
        let outcome = try withSQLite { (source: SQLiteConnection) -> Result<Void, DataProtectionError> in
            do throws(DataProtectionError) {
                try destination.withSQLite { (target: SQLiteConnection) throws(SQLiteError) in try source.copyWholeDatabase(into: target) }
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try outcome.get()
    }
}
