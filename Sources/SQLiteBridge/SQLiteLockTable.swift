import CSQLite
import SodiumBridge

/// The file locks of SQLite's locking protocol (`xLock`, `xUnlock`, `xCheckReservedLock`),
/// held in process memory: a store has one owner process, so the only contention is
/// between connections of this process (a pool's readers and its writer, say).
///
/// The rules are those of SQLite's own unix VFS: any number of SHARED holders; one
/// RESERVED holder beside them; PENDING keeps new readers out while the writer waits for
/// the last ones; EXCLUSIVE once no one else holds SHARED. A file is identified by its
/// storage's ``SQLiteStorageFile/identity`` (never by a path: a database moved while
/// open keeps its locks, and a connection opened at its new path meets them), and a
/// holder by the identity of its open file.
final class SQLiteLockTable: Sendable {
    private struct Entry {
        var sharedCount = 0
        var reserved: ObjectIdentifier?
        var pending: ObjectIdentifier?
        var exclusive: ObjectIdentifier?

        var isUnused: Bool { sharedCount == 0 && reserved == nil && pending == nil && exclusive == nil }
    }

    private let entries = Locked<[ObjectIdentifier: Entry]>([:])

    /// Raises `holder`'s lock on `file` from `current` towards `wanted`; returns the level
    /// reached, which is below `wanted` when another holder is in the way (`SQLITE_BUSY`).
    func lock(_ file: ObjectIdentifier, holder: ObjectIdentifier, from current: Int32, to wanted: Int32) -> Int32 {
        guard wanted > current else { return current }
        return entries.withLock { entries in
            var entry = entries[file, default: Entry()]
            defer { entries[file] = entry.isUnused ? nil : entry }
            var level = current
            if level < SQLITE_LOCK_SHARED {
                if let other = entry.pending ?? entry.exclusive, other != holder { return level }
                entry.sharedCount += 1
                level = SQLITE_LOCK_SHARED
            }
            guard wanted > level else { return level }
            if wanted == SQLITE_LOCK_RESERVED {
                if let other = entry.reserved, other != holder { return level }
                entry.reserved = holder
                return SQLITE_LOCK_RESERVED
            }
            // PENDING, then EXCLUSIVE once the other readers are gone.
            if let other = entry.pending, other != holder { return level }
            entry.pending = holder
            level = SQLITE_LOCK_PENDING
            guard wanted == SQLITE_LOCK_EXCLUSIVE, entry.sharedCount == 1 else { return level }
            if let other = entry.exclusive, other != holder { return level }
            entry.exclusive = holder
            return SQLITE_LOCK_EXCLUSIVE
        }
    }

    /// Lowers `holder`'s lock on `file` from `current` to `wanted` (SHARED or NONE).
    func unlock(_ file: ObjectIdentifier, holder: ObjectIdentifier, from current: Int32, to wanted: Int32) {
        guard wanted < current else { return }
        entries.withLock { entries in
            guard var entry = entries[file] else { return }
            if current > SQLITE_LOCK_SHARED {
                if entry.reserved == holder { entry.reserved = nil }
                if entry.pending == holder { entry.pending = nil }
                if entry.exclusive == holder { entry.exclusive = nil }
            }
            if wanted < SQLITE_LOCK_SHARED, current >= SQLITE_LOCK_SHARED { entry.sharedCount -= 1 }
            entries[file] = entry.isUnused ? nil : entry
        }
    }

    /// Whether anyone holds RESERVED or more on `file` (as the unix VFS answers, the asker included).
    func isReserved(_ file: ObjectIdentifier) -> Bool {
        entries.withLock { entries in
            guard let entry = entries[file] else { return false }
            return entry.reserved != nil || entry.pending != nil || entry.exclusive != nil
        }
    }
}
