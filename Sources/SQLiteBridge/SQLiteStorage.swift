import Foundation

/// What SQLite asks a VFS to open, from the `SQLITE_OPEN_*` flags of `xOpen`.
public enum SQLiteFileKind: String, Sendable, Hashable {
    /// The database file itself.
    case mainDatabase
    /// Its rollback journal (`<db>-journal`).
    case mainJournal
    /// Its write-ahead log (`<db>-wal`).
    case writeAheadLog
    /// The super-journal of a transaction across attached databases.
    case superJournal
    /// A statement journal, temporary database, transient table or other scratch file.
    case temporary
}

/// One `xOpen` call.
public struct SQLiteOpenRequest: Sendable {
    /// The canonical path (from ``SQLiteStorage/fullPath(_:)``); `nil` for an anonymous
    /// temporary file, which SQLite deletes on close and never names. For a journal or WAL,
    /// the name SQLite derived from the one its connection was opened with: where the
    /// database was then, not necessarily where it is now (see ``database``).
    public let path: String?
    /// What the file is for.
    public let kind: SQLiteFileKind
    /// Create the file when it is missing.
    public let create: Bool
    /// Open for reading only.
    public let readOnly: Bool
    /// Remove the file when it is closed.
    public let deleteOnClose: Bool
    /// The URI query parameters of the main database's filename (`file:/a.db?class=complete`),
    /// for the main database only; empty otherwise.
    public let parameters: [String: String]
    /// For a journal or WAL: the open main database file it belongs to. A side file follows
    /// its database: the storage finds it beside the database where the database is now
    /// (it may have been moved since the connection opened it), never at ``path``.
    public let database: (any SQLiteStorageFile)?
}

/// How a storage error reaches SQLite: the extended result code the VFS returns.
public enum SQLiteIOFailure: Sendable, Hashable {
    /// The data is there but may not be used now (a class key is not in memory):
    /// `SQLITE_IOERR_AUTH`, which SQLite reserves for extensions and never uses itself.
    case unavailable
    /// The data was tampered with or is corrupt: `SQLITE_IOERR_DATA`, the code SQLite's
    /// own checksum VFS uses for a page that fails its check.
    case integrity
    /// No such file: `SQLITE_CANTOPEN` from `xOpen`, `SQLITE_IOERR_DELETE_NOENT` from `xDelete`.
    case notFound
    /// Anything else: the operation's own `SQLITE_IOERR_*` code.
    case other
}

/// A file system for SQLite: what a ``SQLiteVFS`` serves its files from.
///
/// The VFS calls these synchronously on the thread running the SQLite statement.
/// Locking and shared memory are the VFS's own (in process memory), not the storage's,
/// keyed by each main database file's ``SQLiteStorageFile/identity``, never by its path.
public protocol SQLiteStorage: AnyObject, Sendable {
    /// Opens (or creates) a file.
    func open(_ request: SQLiteOpenRequest) throws -> any SQLiteStorageFile
    /// Removes a file. For a journal or WAL, `database` is its open main database file
    /// (as in ``SQLiteOpenRequest/database``): the file beside the database where it is
    /// now goes, whatever `path` says.
    func delete(path: String, database: (any SQLiteStorageFile)?) throws
    /// Whether a file exists at `path` (for a journal or WAL with its `database` given:
    /// beside the database where it is now).
    func exists(path: String, database: (any SQLiteStorageFile)?) throws -> Bool
    /// The canonical form of a path SQLite was given (or derived, as `<db>-journal`).
    func fullPath(_ path: String) throws -> String
    /// How `error`, thrown by this storage, is reported to SQLite.
    func failure(of error: any Error) -> SQLiteIOFailure
    /// Whether every change to a file is atomic across a crash: after one, a file holds
    /// whole writes only (never garbage past its end, never a torn range, never bytes
    /// outside a write changed). The VFS then tells SQLite so (`SQLITE_IOCAP_SAFE_APPEND`
    /// and `SQLITE_IOCAP_POWERSAFE_OVERWRITE`), and SQLite skips the work that guards
    /// against those failures: rewriting and syncing the rollback journal's header a
    /// second time in every commit, padding the WAL to a sector at every commit.
    var writesAreAtomic: Bool { get }
}

/// An open file of a ``SQLiteStorage``.
public protocol SQLiteStorageFile: AnyObject, Sendable {
    /// Reads up to `buffer.count` bytes at `offset` into `buffer` (SQLite's own page buffer)
    /// and returns how many; fewer only at the end of the file.
    func read(into buffer: UnsafeMutableRawBufferPointer, atOffset offset: UInt64) throws -> Int
    /// Writes `data` at `offset`, extending the file (with zeros) as needed. `data` wraps
    /// SQLite's buffer without a copy and is valid only during the call: keep a copy of
    /// what must outlive it.
    func write(_ data: Data, atOffset offset: UInt64) throws
    /// Sets the file's size.
    func truncate(to size: UInt64) throws
    /// Makes everything written so far durable.
    func synchronize() throws
    /// The file's size.
    func size() throws -> UInt64
    /// The file's identity: the same for every open file of one file, whatever path each
    /// was opened at and wherever the file has moved since. SQLite's locks and a WAL's
    /// shared memory are the file's, keyed by it (two connections, one opened before a
    /// move and one after, exclude each other).
    var identity: ObjectIdentifier { get }
    /// Closes the file (flushing it).
    func close() throws
    /// Throws when the file's content may not be used now, without reading it. The VFS
    /// asks before SQLite starts a transaction on the main database (its file lock, or in
    /// WAL mode its shared-memory locks), so that SQLite's page cache is never served
    /// while the storage itself would refuse.
    func checkAccess() throws
}
