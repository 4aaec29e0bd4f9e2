import CSQLite
import Foundation

/// A SQLite database connection: open, run statements, read rows, close.
///
/// Not thread-safe by itself: the owner serializes its use (as ``ProtectedDatabase`` does), so
/// SQLite opens it in multi-thread mode, without a mutex of its own to take at every call.
/// Every error carries SQLite's extended result code and message, and the storage error
/// that caused it when a VFS call failed.
public final class SQLiteConnection {
    private var handle: OpaquePointer?

    /// Opens `filename` (a path, or a `file:` URI) through the VFS named `vfs` (`nil`: the default).
    public init(filename: String, vfs: String?, create: Bool, readOnly: Bool = false) throws(SQLiteError) {
        try Self.initializeLibrary()
        var flags = readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE
        if create, !readOnly { flags |= SQLITE_OPEN_CREATE }
        flags |= SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX | 0x0200_0000  // SQLITE_OPEN_EXRESCODE (3.37)
        SQLiteStorageErrorSlot.clear()
        var opened: OpaquePointer?
        let status = sqlite3_open_v2(filename, &opened, flags, vfs)
        guard status == SQLITE_OK, let opened else {
            let message = opened.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(status))
            let code = opened.map { sqlite3_extended_errcode($0) } ?? status
            sqlite3_close_v2(opened)
            throw SQLiteError(code: code, message: message, storageError: Self.storageError(for: code))
        }
        handle = opened
        sqlite3_extended_result_codes(opened, 1)
        sqlite3_busy_timeout(opened, Self.busyTimeoutMilliseconds)
    }

    deinit { close() }

    /// Prepares SQLite once per process (idempotent): installs the zeroing allocator first
    /// when SQLite is not yet initialised, then initialises it.
    static func initializeLibrary() throws(SQLiteError) {
        _ = wipingAllocatorInstalled
        let status = sqlite3_initialize()
        guard status == SQLITE_OK else { throw SQLiteError(code: status, message: String(cString: sqlite3_errstr(status))) }
    }

    /// Whether SQLite wipes every block of memory it frees in this process (a zeroing
    /// allocator: page cache, rows, statements). Installed by the first use of this module,
    /// which must come before anything else in the process initialises SQLite (opening any
    /// database, with GRDB or otherwise); false if something did.
    public static var freedMemoryIsWiped: Bool { wipingAllocatorInstalled }

    private static let wipingAllocatorInstalled: Bool = dp_sqlite_install_wiping_allocator() == SQLITE_OK

    /// Sets the C function the zeroing allocator calls with every block it has wiped, for
    /// ``SQLiteFreedMemoryAudit``. Here, in the file that installs the allocator: each Swift file
    /// compiled apart has its own copy of the shim's static functions and variables.
    static func observeFreedBlocks(_ observer: (@convention(c) (UnsafeRawPointer?, Int64) -> Void)?) {
        dp_sqlite_set_free_observer(observer)
    }

    /// SQLite's version, as `sqlite3_libversion()` gives it.
    public static var libraryVersion: String { String(cString: sqlite3_libversion()) }

    /// Closes the connection, rolling back an open transaction; later calls throw `SQLITE_MISUSE`.
    public func close() {
        guard let handle else { return }
        self.handle = nil
        SQLiteStorageErrorSlot.clear()
        sqlite3_close_v2(handle)
        SQLiteStorageErrorSlot.clear()
    }

    /// How long a statement waits for a lock another connection holds.
    static let busyTimeoutMilliseconds: Int32 = 5_000

    /// Overwrites the page where SQLite assembled the last record this connection wrote,
    /// which it keeps in the clear until the connection closes (``SQLiteInsertScratch``).
    /// Call it outside a transaction, with the database's key still there.
    @discardableResult
    public func scrubInsertScratch() -> Bool {
        guard let handle else { return true }
        return SQLiteInsertScratch.scrub(handle, busyTimeout: Self.busyTimeoutMilliseconds)
    }

    /// Frees what the connection's page cache holds outside a transaction (through the zeroing
    /// allocator: wiped).
    public func releaseMemory() {
        guard let handle else { return }
        sqlite3_db_release_memory(handle)
    }

    /// The bytes of the connection's page cache (`SQLITE_DBSTATUS_CACHE_USED`).
    public var cachedBytes: Int {
        guard let handle else { return 0 }
        return Self.cachedBytes(ofConnection: handle)
    }

    /// The bytes of the page cache of a connection another library opened (GRDB's
    /// `Database.sqliteConnection`), on the thread that may use it.
    public static func cachedBytes(ofConnection handle: OpaquePointer) -> Int {
        var current: Int32 = 0, highest: Int32 = 0
        sqlite3_db_status(handle, SQLITE_DBSTATUS_CACHE_USED, &current, &highest, 0)
        return Int(current)
    }

    /// Whether the connection is closed.
    public var isClosed: Bool { handle == nil }

    /// Whether a transaction is open (`sqlite3_get_autocommit` is 0).
    public var isInTransaction: Bool {
        guard let handle else { return false }
        return sqlite3_get_autocommit(handle) == 0
    }

    /// The rows changed by the last INSERT, UPDATE or DELETE.
    public var changes: Int {
        guard let handle else { return 0 }
        return Int(sqlite3_changes(handle))
    }

    /// The rowid of the last successful INSERT.
    public var lastInsertRowID: Int64 {
        guard let handle else { return 0 }
        return sqlite3_last_insert_rowid(handle)
    }

    /// Whether `sql` ends with a complete statement: a semicolon outside any string, identifier,
    /// comment or trigger body (`sqlite3_complete`; how `sqlite3` knows, reading line by line,
    /// when to run what it has read). Blanks and comments after that semicolon are allowed.
    public static func isComplete(_ sql: String) -> Bool {
        sql.withCString { sqlite3_complete($0) != 0 }
    }

    /// Runs every statement of `sql` in turn, passing each row to `body` (when given) as it
    /// is stepped; `arguments` bind the parameters of the first statement.
    public func execute(_ sql: String, arguments: [SQLiteValue] = [], forEachRow body: ((SQLiteRow) -> Void)? = nil) throws(SQLiteError) {
        try forEachStatement(sql) { (statement: OpaquePointer, index: Int) throws(SQLiteError) in
            if index == 0 { try bind(arguments, to: statement) }
            let columns = body == nil ? [] : Self.columnNames(of: statement)
            while try step(statement) {
                body?(row(of: statement, columns: columns))
            }
        }
    }

    static func columnNames(of statement: OpaquePointer) -> [String] {
        (0..<sqlite3_column_count(statement)).map { String(cString: sqlite3_column_name(statement, $0)) }
    }

    /// Runs the one statement of `sql` with `arguments`, calling `body` with each row as it
    /// is stepped (constant memory); `body` returns `false` to stop early.
    public func enumerateRows(
        _ sql: String, arguments: [SQLiteValue] = [], _ body: (SQLiteRow) throws(SQLiteError) -> Bool
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
                guard try body(row(of: statement, columns: columns)) else { return }
            }
        }
    }

    /// The column names of the one statement of `sql`.
    public func columnNames(_ sql: String) throws(SQLiteError) -> [String] {
        var names: [String] = []
        try forEachStatement(sql) { (statement: OpaquePointer, _: Int) throws(SQLiteError) in
            names = Self.columnNames(of: statement)
        }
        return names
    }

    /// Every row of the one statement of `sql`.
    public func query(_ sql: String, arguments: [SQLiteValue] = []) throws(SQLiteError) -> [SQLiteRow] {
        var rows: [SQLiteRow] = []
        try enumerateRows(sql, arguments: arguments) { row in
            rows.append(row)
            return true
        }
        return rows
    }

    // MARK: - Statements

    /// The open handle, for the backup API (``copyWholeDatabase(into:)``).
    func handleForBackup() throws(SQLiteError) -> OpaquePointer { try open() }

    /// The connection's last error.
    func lastError() -> SQLiteError {
        guard let handle else { return SQLiteError(code: SQLITE_MISUSE, message: "The database connection is closed.") }
        return error(sqlite3_errcode(handle))
    }

    private func open() throws(SQLiteError) -> OpaquePointer {
        guard let handle else { throw SQLiteError(code: SQLITE_MISUSE, message: "The database connection is closed.") }
        return handle
    }

    /// Prepares each statement of `sql` in turn (skipping empty ones), runs `body` on it and finalizes it.
    func forEachStatement(_ sql: String, _ body: (OpaquePointer, Int) throws(SQLiteError) -> Void) throws(SQLiteError) {
        let handle = try open()
        var failure: SQLiteError?
        sql.withCString { start in  // the string's own bytes (no copy of a native string)
            var cursor: UnsafePointer<CChar>? = start
            var index = 0
            while let current = cursor, current.pointee != 0 {
                var statement: OpaquePointer?
                var tail: UnsafePointer<CChar>?
                SQLiteStorageErrorSlot.clear()
                let status = sqlite3_prepare_v2(handle, current, -1, &statement, &tail)
                guard status == SQLITE_OK else {
                    failure = error(status)
                    return
                }
                cursor = tail
                guard let statement else { continue }  // only whitespace or a comment
                defer { sqlite3_finalize(statement) }
                do throws(SQLiteError) {
                    try body(statement, index)
                } catch {
                    failure = error
                    return
                }
                index += 1
            }
        }
        if let failure { throw failure }
    }

    /// Steps once: `true` with a row ready, `false` when done.
    func step(_ statement: OpaquePointer) throws(SQLiteError) -> Bool {
        SQLiteStorageErrorSlot.clear()
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let status: throw error(status)
        }
    }

    func bind(_ arguments: [SQLiteValue], to statement: OpaquePointer, leaving unbound: Int = 0) throws(SQLiteError) {
        let expected = Int(sqlite3_bind_parameter_count(statement)) - unbound
        guard arguments.count == expected else {
            throw SQLiteError(code: SQLITE_RANGE, message: "The statement has \(expected) parameters; \(arguments.count) values were given.")
        }
        for (offset, argument) in arguments.enumerated() {
            let index = Int32(offset + 1)
            let status: Int32
            switch argument {
            case .null: status = sqlite3_bind_null(statement, index)
            case .integer(let value): status = sqlite3_bind_int64(statement, index, value)
            case .real(let value): status = sqlite3_bind_double(statement, index, value)
            case .text(let value): status = sqlite3_bind_text(statement, index, value, -1, dp_sqlite_transient())
            case .blob(let value):
                status = value.withUnsafeBytes { bytes in
                    sqlite3_bind_blob64(statement, index, bytes.baseAddress, sqlite3_uint64(bytes.count), dp_sqlite_transient())
                }
            }
            guard status == SQLITE_OK else { throw error(status) }
        }
    }

    func row(of statement: OpaquePointer, columns: [String], skipping skipped: Int? = nil) -> SQLiteRow {
        var values: [SQLiteValue] = []
        var texts: [String?] = []
        for column in 0..<sqlite3_column_count(statement) {
            if let skipped, Int(column) == skipped {
                values.append(.null)
                texts.append(nil)
                continue
            }
            switch sqlite3_column_type(statement, column) {
            case SQLITE_INTEGER:
                values.append(.integer(sqlite3_column_int64(statement, column)))
                texts.append(String(cString: sqlite3_column_text(statement, column)))
            case SQLITE_FLOAT:
                values.append(.real(sqlite3_column_double(statement, column)))
                texts.append(String(cString: sqlite3_column_text(statement, column)))
            case SQLITE_TEXT:
                let text = String(cString: sqlite3_column_text(statement, column))
                values.append(.text(text))
                texts.append(text)
            case SQLITE_BLOB:
                let count = Int(sqlite3_column_bytes(statement, column))
                let data = sqlite3_column_blob(statement, column).map { Data(bytes: $0, count: count) } ?? Data()
                values.append(.blob(data))
                texts.append(nil)
            default:
                values.append(.null)
                texts.append(nil)
            }
        }
        return SQLiteRow(values: values, texts: texts, columns: columns)
    }

    /// The connection's error for `status`, with the storage error behind it when the VFS failed.
    private func error(_ status: Int32) -> SQLiteError {
        guard let handle else { return SQLiteError(code: status, message: String(cString: sqlite3_errstr(status))) }
        var code = sqlite3_extended_errcode(handle)
        if code & 0xFF != status & 0xFF { code = status }
        return SQLiteError(code: code, message: String(cString: sqlite3_errmsg(handle)), storageError: Self.storageError(for: code))
    }

    /// This thread's last storage error when `code` is one a VFS failure produces.
    private static func storageError(for code: Int32) -> (any Error)? {
        let error = SQLiteStorageErrorSlot.take()
        switch code & 0xFF {
        case SQLITE_IOERR, SQLITE_CANTOPEN, SQLITE_FULL, SQLITE_CORRUPT, SQLITE_NOTADB: return error
        default: return nil
        }
    }
}
