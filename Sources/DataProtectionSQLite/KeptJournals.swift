import DataProtection
import SodiumBridge

/// SQLite's rollback journals, kept open between transactions.
///
/// In its default journal mode SQLite creates a database's journal at the start of every
/// write transaction and deletes it to commit. For a protected file each of those is a
/// durable change of the store's name space (a file created under a temporary name,
/// renamed, its directory `fsync`ed; an unlink, its directory `fsync`ed), and the first
/// growth of a new file allocates with one more `fsync`: four of the nine `fsync`s of a
/// one-row commit. So the storage keeps the journal instead: SQLite's close parks the
/// open handle here, SQLite's delete empties it (``ProtectedFileHandle/empty()``: one
/// header, one `fsync`, the space kept), an emptied journal is absent to SQLite's
/// existence check, and the next transaction's open takes the handle back. The commit
/// point stays what SQLite makes it: the journal durably gone, here durably empty (a
/// journal of length zero is never hot). The file itself goes when the database's last
/// connection closes.
///
/// A journal SQLite closed without deleting it (a hot journal whose rollback failed, the
/// `PERSIST` and `TRUNCATE` modes) is parked as it is and found by the existence check as
/// usual. A parked handle that the store closed meanwhile (a reboot) is dropped at the next
/// open, which opens the file again.
///
/// Journals are kept by their database's file (its identity), not by a path: connections
/// opened at a database's path before and after a move of it share one, and the storage
/// finds it beside the database where it is now.
final class KeptJournals: Sendable {
    private struct Parked {
        let handle: ProtectedFileHandle
        /// Emptied by SQLite's delete: absent to SQLite.
        var emptied: Bool
    }

    private struct State {
        /// Parked journals by the identity of their database's file.
        var parked: [ObjectIdentifier: Parked] = [:]
        /// Open main database files by identity (``SQLiteStorageFile/identity``, the same for
        /// connections opened at a path before and after a move): their journals are kept while any is open.
        var connections: [ObjectIdentifier: Int] = [:]
    }

    private let state = Locked(State())

    /// A main database file was opened (its file's identity `database`); true for its first
    /// connection (none other open).
    @discardableResult
    func databaseOpened(_ database: ObjectIdentifier) -> Bool {
        state.withLock { state in
            state.connections[database, default: 0] += 1
            return state.connections[database] == 1
        }
    }

    /// A main database file was closed: when it was the last, its parked journal is handed
    /// back (to be closed, and removed when emptied).
    func databaseClosed(_ database: ObjectIdentifier) -> (handle: ProtectedFileHandle, emptied: Bool)? {
        state.withLock { state in
            let count = (state.connections[database] ?? 1) - 1
            guard count == 0 else {
                state.connections[database] = count
                return nil
            }
            state.connections[database] = nil
            guard let parked = state.parked.removeValue(forKey: database) else { return nil }
            return (parked.handle, parked.emptied)
        }
    }

    /// Parks the handle of a journal SQLite closed (or one taken by ``take(of:)`` that could
    /// not be used now); false when one is parked there already (the caller closes its handle then).
    func park(_ handle: ProtectedFileHandle, emptied: Bool = false, of database: ObjectIdentifier) -> Bool {
        state.withLock { state in
            guard state.parked[database] == nil else { return false }
            state.parked[database] = Parked(handle: handle, emptied: emptied)
            return true
        }
    }

    /// Takes the journal parked for `database` for SQLite's open, if any.
    func take(of database: ObjectIdentifier) -> (handle: ProtectedFileHandle, emptied: Bool)? {
        state.withLock { state in
            state.parked.removeValue(forKey: database).map { ($0.handle, $0.emptied) }
        }
    }

    /// Takes the journal parked for `database` if it is emptied: a database that opens its WAL
    /// has left the rollback-journal mode, and its journal (emptied by the switch) is not needed.
    func takeEmptied(of database: ObjectIdentifier) -> ProtectedFileHandle? {
        state.withLock { state in
            guard let parked = state.parked[database], parked.emptied else { return nil }
            state.parked[database] = nil
            return parked.handle
        }
    }

    /// Whether the journal of `database` is parked and emptied (absent to SQLite).
    func isEmptied(of database: ObjectIdentifier) -> Bool {
        state.withLock { $0.parked[database]?.emptied ?? false }
    }

    /// SQLite's delete of a parked journal: empties it durably and parks it again, emptied.
    /// Returns false when no journal is parked for `database` (the file is then removed as
    /// usual); throws, having closed the handle, when emptying failed (the caller removes the file).
    func empty(of database: ObjectIdentifier) throws -> Bool {
        guard let parked = take(of: database) else { return false }
        if !parked.emptied {
            do {
                try parked.handle.empty()
            } catch {
                try? parked.handle.close()
                throw error
            }
        }
        if !park(parked.handle, emptied: true, of: database) { try? parked.handle.close() }
        return true
    }
}
