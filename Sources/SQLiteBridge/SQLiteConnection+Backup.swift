import CSQLite
import Foundation

extension SQLiteConnection {
    /// Copies the whole `main` database of this connection into `destination`'s with SQLite's
    /// online backup API, in ONE step: the copy is one read transaction of this connection, so
    /// it is the database as of one committed instant, whatever other connections (of this
    /// process or another) commit or checkpoint meanwhile; a WAL database is copied with
    /// every frame committed before that instant.
    ///
    /// The destination's pages go through its page cache to its file, so memory stays that
    /// of the two caches, whatever the database's size. Both connections must be serialized
    /// by their owners for the call.
    public func copyWholeDatabase(into destination: SQLiteConnection) throws(SQLiteError) {
        let source = try handleForBackup()
        let target = try destination.handleForBackup()
        guard let backup = sqlite3_backup_init(target, "main", source, "main") else {
            throw destination.lastError()
        }
        // -1: every page in one step, under one read lock of the source.
        // A writer that holds the source (a rollback journal's commit) is waited for, at most 10 s, as `busy_timeout`.
        var status = sqlite3_backup_step(backup, -1)
        var waits = 0
        while status == SQLITE_BUSY || status == SQLITE_LOCKED, waits < 1000 {
            waits += 1
            sqlite3_sleep(10)
            status = sqlite3_backup_step(backup, -1)
        }
        let finished = sqlite3_backup_finish(backup)
        guard status == SQLITE_DONE else {
            throw SQLiteError(code: status, message: "The backup of the database stopped: \(String(cString: sqlite3_errstr(status))).")
        }
        guard finished == SQLITE_OK else { throw destination.lastError() }
    }
}
