import CSQLite
import SodiumBridge

/// The page where SQLite's B-tree layer assembles every record it inserts (a row, an index
/// entry, a schema row: `BtShared.pTmpSpace`), one per open database of a connection,
/// allocated at the first write and freed only when the connection closes. Between
/// statements it still holds the last record written, in the clear; SQLite has no call that
/// frees or clears it. A connection that stays open over a lock would keep that record past
/// the key's discard, so the discard overwrites it: inside a transaction that is rolled back
/// at once, it creates a table whose schema row, a page long, is assembled in that same page.
/// Nothing reaches the database (the rollback undoes the schema change), the connection
/// keeps its settings, statements and temporary tables.
package enum SQLiteInsertScratch {
    /// Overwrites the insert scratch page of `connection`'s main database. Call it with the
    /// class key still there, no statement running and no transaction open (roll back
    /// first), on the thread that owns the connection. With `busyTimeout` (milliseconds, the
    /// connection's own), it waits for no lock held elsewhere (the key is about to go) and
    /// sets that timeout back; `nil` leaves the connection's busy handler as it is.
    ///
    /// - Returns: whether the page was overwritten (or needed nothing: a read-only
    ///   connection never writes a record); `false` when the transaction could not start
    ///   (a lock held elsewhere) or the connection is inside a transaction.
    @discardableResult
    package static func scrub(_ connection: OpaquePointer, busyTimeout: Int32?) -> Bool {
        guard sqlite3_db_readonly(connection, "main") == 0 else { return true }
        guard sqlite3_get_autocommit(connection) != 0 else { return false }
        let pageSize = pageSize(of: connection)
        if busyTimeout != nil { sqlite3_busy_timeout(connection, 0) }
        defer { if let busyTimeout { sqlite3_busy_timeout(connection, busyTimeout) } }
        guard sqlite3_exec(connection, "BEGIN IMMEDIATE", nil, nil, nil) == SQLITE_OK else { return false }
        // A name nobody uses (a clash would only make the CREATE fail: then nothing is overwritten).
        let name = "dataprotection-scratch-" + Random.bytes(count: 8).map { String($0, radix: 16) }.joined()
        // The comment stays in the stored schema text, so the record fills the page.
        let statement = "CREATE TABLE main.\"\(name)\"(x /*" + String(repeating: "-", count: pageSize) + "*/)"
        let created = sqlite3_exec(connection, statement, nil, nil, nil) == SQLITE_OK
        _ = sqlite3_exec(connection, "ROLLBACK", nil, nil, nil)
        return created
    }

    /// The main database's page size (4096 when SQLite does not say).
    private static func pageSize(of connection: OpaquePointer) -> Int {
        var statement: OpaquePointer?
        defer { sqlite3_finalize(statement) }
        guard sqlite3_prepare_v2(connection, "PRAGMA main.page_size", -1, &statement, nil) == SQLITE_OK,
              sqlite3_step(statement) == SQLITE_ROW else { return 4096 }
        let size = Int(sqlite3_column_int64(statement, 0))
        return (512...65536).contains(size) ? size : 4096
    }
}
