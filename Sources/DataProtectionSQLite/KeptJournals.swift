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
final class KeptJournals: Sendable {
    private struct Parked {
        let handle: ProtectedFileHandle
        /// Emptied by SQLite's delete: absent to SQLite.
        var emptied: Bool
    }

    private struct State {
        /// Parked journals by path.
        var parked: [String: Parked] = [:]
        /// Open main database files by path: their journals are kept while any is open.
        var connections: [String: Int] = [:]
    }

    private let state = Locked(State())

    /// The path of the rollback journal of the database at `path`, as SQLite names it.
    static func journalPath(ofDatabase path: String) -> String { path + "-journal" }

    /// A main database file was opened at `path`.
    func databaseOpened(at path: String) {
        state.withLock { $0.connections[path, default: 0] += 1 }
    }

    /// A main database file at `path` was closed: when it was the last, its parked journal is
    /// handed back (to be closed, and removed when emptied).
    func databaseClosed(at path: String) -> (handle: ProtectedFileHandle, emptied: Bool, path: String)? {
        state.withLock { state in
            let count = (state.connections[path] ?? 1) - 1
            guard count == 0 else {
                state.connections[path] = count
                return nil
            }
            state.connections[path] = nil
            let journal = Self.journalPath(ofDatabase: path)
            guard let parked = state.parked.removeValue(forKey: journal) else { return nil }
            return (parked.handle, parked.emptied, journal)
        }
    }

    /// Parks the handle of a journal SQLite closed (or one taken by ``take(at:)`` that could
    /// not be used now); false when one is parked there already (the caller closes its handle then).
    func park(_ handle: ProtectedFileHandle, emptied: Bool = false, at path: String) -> Bool {
        state.withLock { state in
            guard state.parked[path] == nil else { return false }
            state.parked[path] = Parked(handle: handle, emptied: emptied)
            return true
        }
    }

    /// Takes the parked journal at `path` for SQLite's open, if any.
    func take(at path: String) -> (handle: ProtectedFileHandle, emptied: Bool)? {
        state.withLock { state in
            state.parked.removeValue(forKey: path).map { ($0.handle, $0.emptied) }
        }
    }

    /// Takes the journal parked at `path` if it is emptied: a database that opens its WAL
    /// has left the rollback-journal mode, and its journal (emptied by the switch) is not needed.
    func takeEmptied(at path: String) -> ProtectedFileHandle? {
        state.withLock { state in
            guard let parked = state.parked[path], parked.emptied else { return nil }
            state.parked[path] = nil
            return parked.handle
        }
    }

    /// Whether the journal at `path` is parked and emptied (absent to SQLite).
    func isEmptied(at path: String) -> Bool {
        state.withLock { $0.parked[path]?.emptied ?? false }
    }

    /// SQLite's delete of a parked journal: empties it durably and parks it again, emptied.
    /// Returns false when no journal is parked at `path` (the file is then removed as usual);
    /// throws, having closed the handle, when emptying failed (the caller removes the file).
    func empty(at path: String) throws -> Bool {
        guard let parked = take(at: path) else { return false }
        if !parked.emptied {
            do {
                try parked.handle.empty()
            } catch {
                try? parked.handle.close()
                throw error
            }
        }
        if !park(parked.handle, emptied: true, at: path) { try? parked.handle.close() }
        return true
    }
}
