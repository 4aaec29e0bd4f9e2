import CSQLite
import SodiumBridge

extension SQLiteConnection {
    /// Runs the one statement `sql` with `arguments` bound to its first parameters and
    /// `secret` to the parameter after them, copied by SQLite straight from secure memory
    /// into its own (whose blocks are zeroed when freed): the secret never becomes a Swift
    /// array or `Data`.
    package func execute(_ sql: String, arguments: [SQLiteValue], secret: SecureBytes) throws(SQLiteError) {
        var statements = 0
        try forEachStatement(sql) { (statement: OpaquePointer, _: Int) throws(SQLiteError) in
            statements += 1
            guard statements == 1 else {
                throw SQLiteError(code: SQLITE_MISUSE, message: "A statement with a secret runs alone.")
            }
            try bind(arguments, to: statement, leaving: 1)
            let index = Int32(arguments.count + 1)
            let status = secret.withUnsafeBytes { bytes in
                sqlite3_bind_blob64(statement, index, bytes.baseAddress, sqlite3_uint64(bytes.count), dp_sqlite_transient())
            }
            guard status == SQLITE_OK else {
                throw SQLiteError(code: status, message: String(cString: sqlite3_errstr(status)))
            }
            while try step(statement) {}
        }
    }

    /// Runs the one statement `sql` and calls `body` with each row, the column at
    /// `secretColumn` left out of the row (`NULL` there) and handed over instead in secure
    /// memory, copied from SQLite's own; `body` returns `false` to stop.
    package func enumerateRows(
        _ sql: String, arguments: [SQLiteValue], secretColumn: Int,
        _ body: (SQLiteRow, SecureBytes?) throws(SQLiteError) -> Bool
    ) throws(SQLiteError) {
        var statements = 0
        try forEachStatement(sql) { (statement: OpaquePointer, _: Int) throws(SQLiteError) in
            statements += 1
            guard statements == 1 else {
                throw SQLiteError(code: SQLITE_MISUSE, message: "A query runs one statement; use execute for several.")
            }
            try bind(arguments, to: statement)
            let columns = Self.columnNames(of: statement)
            while try step(statement) {
                let column = Int32(secretColumn)
                var secret: SecureBytes?
                if sqlite3_column_type(statement, column) == SQLITE_BLOB {
                    let count = Int(sqlite3_column_bytes(statement, column))
                    let source = sqlite3_column_blob(statement, column)
                    secret = SecureBytes(count: count) { buffer in
                        if let source, count > 0, let base = buffer.baseAddress { base.copyMemory(from: source, byteCount: count) }
                    }
                }
                let row = row(of: statement, columns: columns, skipping: secretColumn)
                guard try body(row, secret) else { return }
            }
        }
    }
}
