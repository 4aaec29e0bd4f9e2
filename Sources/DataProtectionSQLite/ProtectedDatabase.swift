import DataProtection
import Foundation
import SQLiteBridge
import SodiumBridge

@_exported import struct SQLiteBridge.SQLiteRow
@_exported import enum SQLiteBridge.SQLiteValue

/// A SQLite database that lives in a `ProtectedStore`.
///
/// Its file, and every file SQLite makes beside it (rollback journal, WAL), is a protected
/// file of the database's class, so the class rules apply to the database as to a handle:
/// once the device locks and a `complete` database's key is discarded, any statement that
/// needs the disk throws `protectedDataUnavailable`; a transaction it cuts is rolled back,
/// never half applied; after unlock the same connection works again with every committed
/// transaction there. An open `completeUnlessOpen` database keeps working while locked.
///
/// At the instant a `complete` (or `completeWhenUserInactive`) database's class key is
/// discarded, its connection rolls back an open transaction and drops SQLite's page cache
/// (wiped: SQLite's memory goes through a zeroing allocator); until the key is back every
/// statement throws `protectedDataUnavailable`, even one SQLite could answer from its cache
/// or without the file (`SELECT 1`, a syntax error, `COMMIT`). Erasing the device closes
/// the connection.
///
/// ```swift
/// let db = try ProtectedDatabase(atPath: "Library/app.db", in: store, create: true,
///                                protection: .complete, journalMode: .wal)
/// try db.execute("CREATE TABLE IF NOT EXISTS note(id INTEGER PRIMARY KEY, body TEXT)")
/// try db.execute("INSERT INTO note(body) VALUES (?)", [.text("hello")])
/// for row in try db.query("SELECT id, body FROM note") { print(row.values) }
/// ```
///
/// One connection, used from any thread (calls are serialized). Errors are
/// `DataProtectionError`s: the store's own code when the store refused (a missing key,
/// a tampered page, a missing file), else `sqliteError` with SQLite's extended code.
public final class ProtectedDatabase: Sendable {
    /// How the database keeps its transactions atomic.
    public enum JournalMode: String, Sendable, Hashable, CaseIterable {
        /// A rollback journal beside the database, deleted at each commit (SQLite's default).
        case rollback = "delete"
        /// A write-ahead log beside the database; its index lives in process memory.
        case wal
    }

    /// The database's path in the store, in canonical form (`/Library/app.db`).
    public let path: String
    /// The store the database lives in.
    public let store: ProtectedStore
    /// The database's class, as it was when the connection opened. A class whose key is
    /// discarded at a lock (`complete`, `completeWhenUserInactive`) takes the connection's
    /// plaintext with it (see the type's description).
    public let protectionClass: ProtectionClass
    /// Reached only under `serial`: that lock, not the type system, makes this class Sendable.
    nonisolated(unsafe) private let sqlite: SQLiteConnection
    /// Serializes every use of `sqlite`; an NSLock for its timed wait (``keyWillBeDiscarded()``).
    private let serial = NSLock()
    /// The key went while a statement held the connection: its rollback and page release are
    /// owed, and made by the next call that takes the connection.
    private let discardOwed = Locked(false)
    /// Releases the page cache when the device locks.
    private let memoryRelease = Locked<MemoryReleaseAtLock?>(nil)
    /// Rolls back and drops the cache when the class key goes; closes at erase.
    private let keyDiscard = Locked<DatabaseKeyDiscard?>(nil)

    /// Opens the database at `path` in `store`.
    ///
    /// - Parameters:
    ///   - path: the database's path in the store.
    ///   - store: the store that holds it.
    ///   - create: create a missing database (and missing parent directories).
    ///   - protectionChoice: the class of a database created now (else its directory's);
    ///     ignored for an existing one, which keeps its class.
    ///   - journalMode: `nil` keeps the database's own (SQLite's default for a new one is
    ///     ``JournalMode/rollback``).
    /// - Throws: `fileNotFound`, `protectedDataUnavailable` (an existing database whose
    ///   class key is not in memory; creating a `completeUnlessOpen` one while locked
    ///   works), `integrityFailure`, or `sqliteError`.
    public init(
        atPath path: String, in store: ProtectedStore, create: Bool = false, protection protectionChoice: ProtectionChoice = .inherited,
        journalMode: JournalMode? = nil
    ) throws(DataProtectionError) {
        let protection = protectionChoice.protectionClass
        let canonical = try ProtectedStore.standardizedPath(path)
        let vfs = try DatabaseVFSRegistry.vfs(for: store)
        let opened: SQLiteConnection
        do {
            opened = try SQLiteConnection(filename: Self.uri(canonical, protection: protection, vfs: nil), vfs: vfs.name, create: create)
        } catch {
            throw DataProtectionError(error)
        }
        self.path = canonical
        self.store = store
        sqlite = opened
        do throws(DataProtectionError) {
            protectionClass = try store.attributesOfItem(atPath: canonical).protectionClass ?? .completeUntilFirstUserAuthentication
        } catch {
            opened.close()
            throw error
        }
        do throws(DataProtectionError) {
            // Reads the header now, so that a database that cannot be read fails here, not at its first statement.
            _ = try query("PRAGMA schema_version")
            if let journalMode {
                let mode = try query("PRAGMA journal_mode = \(journalMode.rawValue)").first?.texts.first ?? nil
                guard mode == journalMode.rawValue else {
                    throw DataProtectionError(.sqliteError, "SQLite kept journal mode \(mode ?? "none") instead of \(journalMode.rawValue).")
                }
            }
        } catch {
            close()
            throw error
        }
        // SQLite's page cache holds decrypted pages; at the lock it goes (wiped by the zeroing allocator).
        let release = MemoryReleaseAtLock(device: store.device) { [weak self] in
            self?.releaseMemory()
            return self != nil
        }
        memoryRelease.withLock { $0 = release }
        let discard = DatabaseKeyDiscard(database: self)
        keyDiscard.withLock { $0 = discard }
        store.device.addLifecycleObserver(discard, first: true)
    }

    /// Whether the key of this database's class goes at a lock (after the grace or inactivity
    /// period), taking the connection's plaintext with it.
    private var locksWithDevice: Bool {
        protectionClass == .complete || protectionClass == .completeWhenUserInactive
    }

    /// The class key is about to be discarded (it is still present): an open transaction is
    /// rolled back, while the database's files can still be written, and SQLite's page cache
    /// freed (wiped). A statement holding the connection for more than a moment (it may be
    /// waiting for the device) leaves this owed to the next call.
    func keyWillBeDiscarded() {
        guard locksWithDevice else { return }
        guard serial.lock(before: Date(timeIntervalSinceNow: 2)) else {
            discardOwed.withLock { $0 = true }
            return
        }
        defer { serial.unlock() }
        discardOwed.withLock { $0 = false }
        Self.discardPlaintext(of: sqlite)
    }

    /// Rolls back an open transaction, overwrites the last record SQLite assembled (kept in
    /// the clear until the connection closes) and frees every page SQLite caches for
    /// `connection`.
    private static func discardPlaintext(of connection: SQLiteConnection) {
        guard !connection.isClosed else { return }
        if connection.isInTransaction { try? connection.execute("ROLLBACK") }
        connection.scrubInsertScratch()
        connection.releaseMemory()
    }

    /// The bytes SQLite's page cache holds for this connection: decrypted pages, in SQLite's
    /// own memory. Released (and wiped) when the device locks and by ``releaseMemory()``.
    public var cachedBytes: Int { withConnection { $0.cachedBytes } }

    /// Frees the pages SQLite caches for this connection outside a transaction, wiping them.
    /// Called by itself shortly after the device locks.
    public func releaseMemory() {
        withConnection { $0.releaseMemory() }
    }

    /// A `file:` URI that opens the database at `path` in `store` through its VFS, for
    /// libraries that open SQLite connections themselves (GRDB: see DataProtectionGRDB).
    /// `protection` is the class of a database created by that open.
    public static func uri(forPath path: String, in store: ProtectedStore, protection protectionChoice: ProtectionChoice = .inherited) throws(DataProtectionError) -> String {
        let protection = protectionChoice.protectionClass
        let canonical = try ProtectedStore.standardizedPath(path)
        return uri(canonical, protection: protection, vfs: try DatabaseVFSRegistry.vfs(for: store).name)
    }

    private static func uri(_ canonical: String, protection: ProtectionClass?, vfs: String?) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "/-._~")
        let encoded = canonical.addingPercentEncoding(withAllowedCharacters: allowed) ?? canonical
        var query: [String] = []
        if let vfs { query.append("vfs=\(vfs)") }
        if let protection { query.append("class=\(protection.rawValue)") }
        return "file:" + encoded + (query.isEmpty ? "" : "?" + query.joined(separator: "&"))
    }

    deinit { close() }

    // MARK: - Statements

    /// Runs every statement of `sql` in turn; `arguments` bind the `?` parameters of the
    /// first statement. Rows go to `forEachRow` as they are read (as `sqlite3` prints the
    /// rows of every statement it runs), or are discarded.
    ///
    /// When the store refuses in the middle of an explicit transaction (the device locked),
    /// the transaction is rolled back before the error is thrown, so it is never half applied.
    public func execute(
        _ sql: String, _ arguments: [SQLiteValue] = [], forEachRow: ((SQLiteRow) -> Void)? = nil
    ) throws(DataProtectionError) {
        try run { connection throws(SQLiteError) in try connection.execute(sql, arguments: arguments, forEachRow: forEachRow) }
    }

    /// Whether `sql` ends with a complete statement: a semicolon outside any string, identifier,
    /// comment or trigger body (`sqlite3_complete`). A reader of SQL line by line (a shell, a
    /// script runner) runs what it gathered once this is true, as `sqlite3` does.
    public static func isComplete(_ sql: String) -> Bool {
        SQLiteConnection.isComplete(sql)
    }

    /// Every row of the one statement `sql`.
    public func query(_ sql: String, _ arguments: [SQLiteValue] = []) throws(DataProtectionError) -> [SQLiteRow] {
        try run { connection throws(SQLiteError) in try connection.query(sql, arguments: arguments) }
    }

    /// Calls `body` with each row of the one statement `sql` as it is read (constant memory);
    /// `body` returns `false` to stop.
    public func enumerateRows(
        _ sql: String, _ arguments: [SQLiteValue] = [], _ body: (SQLiteRow) -> Bool
    ) throws(DataProtectionError) {
        try run { connection throws(SQLiteError) in try connection.enumerateRows(sql, arguments: arguments) { row in body(row) } }
    }

    /// The column names of the one statement `sql`.
    public func columnNames(_ sql: String) throws(DataProtectionError) -> [String] {
        try run { connection throws(SQLiteError) in try connection.columnNames(sql) }
    }

    /// Whether a transaction is open.
    public var isInTransaction: Bool { withConnection { $0.isInTransaction } }

    /// The rows changed by the last INSERT, UPDATE or DELETE.
    public var changes: Int { withConnection { $0.changes } }

    /// The rowid of the last successful INSERT.
    public var lastInsertRowID: Int64 { withConnection { $0.lastInsertRowID } }

    /// Whether ``close()`` has been called.
    public var isClosed: Bool { withConnection { $0.isClosed } }

    /// Closes the connection (an open transaction is rolled back); later calls throw
    /// `handleClosed`. Closing twice is harmless.
    public func close() {
        memoryRelease.withLock { $0?.cancel(); $0 = nil }
        keyDiscard.withLock { $0 = nil }
        withConnection { $0.close() }
    }

    /// Runs `body` holding the connection, after a rollback and page release the key's
    /// discard left owed.
    private func withConnection<R>(_ body: (SQLiteConnection) -> R) -> R {
        serial.lock()
        defer { serial.unlock() }
        if discardOwed.withLock({ owed in defer { owed = false }; return owed }) {
            Self.discardPlaintext(of: sqlite)
        }
        return body(sqlite)
    }

    /// Runs `body` on the connection with the class rules of ``execute(_:_:forEachRow:)`` (the
    /// keychain's statements that bind or read secrets in secure memory).
    func withSQLite<R>(_ body: (SQLiteConnection) throws(SQLiteError) -> R) throws(DataProtectionError) -> R {
        try run(body)
    }

    private func run<R>(_ body: (SQLiteConnection) throws(SQLiteError) -> R) throws(DataProtectionError) -> R {
        // Asked before the connection is taken: the question may fire a due discard, whose
        // observer takes the connection.
        let available = !locksWithDevice || store.device.isAvailable(protectionClass)
        let result = withConnection { connection -> Result<R, DataProtectionError> in
            guard !connection.isClosed else {
                return .failure(DataProtectionError(.handleClosed, "The database connection is closed.",
                                                    hint: "Open the database again (connections close at reboot and erase)."))
            }
            guard available else {
                // Whatever SQLite could answer from its cache or without the file: the lock took it away.
                return .failure(DataProtectionError(.protectedDataUnavailable,
                                                    "The database \(path) is \(protectionClass.rawValue) and the device is locked.",
                                                    hint: "Unlock the device, then try again."))
            }
            do throws(SQLiteError) {
                return .success(try body(connection))
            } catch {
                let mapped = DataProtectionError(error)
                if mapped.code != .sqliteError, connection.isInTransaction {
                    // Cut by the store (a lock, a tampered page): never leave it half applied.
                    try? connection.execute("ROLLBACK")
                }
                return .failure(mapped)
            }
        }
        return try result.get()
    }
}
