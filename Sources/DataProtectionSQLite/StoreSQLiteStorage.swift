import DataProtection
import Foundation
import SQLiteBridge
import SodiumBridge

/// The store as SQLite's file system: every named file SQLite opens for a database is a
/// protected file of the database's class, read and written through a
/// `ProtectedFileHandle`, so the class rules, the flush before a key is discarded, crash
/// safety and integrity checks apply to it unchanged.
///
/// The main database takes the class its URI names (`?class=`), else its directory's; a
/// journal or WAL takes its database's. A database follows its file as a handle does: its
/// journal and WAL are made and found beside the database where it is now (through its
/// open file, ``SQLiteOpenRequest/database``), never at the path the connection was opened
/// with, and SQLite's locks are the file's, not a path's. SQLite's anonymous temporary files (statement
/// journals, sorter spills, temporary tables) live in process memory and never touch the disk.
///
/// The store is held weakly: the VFS stays registered for the life of the process, and
/// must not keep the store (and with it the ownership of its directory) alive once its
/// last user and its last open database are gone. Open files hold the store through
/// their handles.
final class StoreSQLiteStorage: SQLiteStorage {
    private weak let weakStore: ProtectedStore?
    /// Rollback journals kept open between transactions.
    fileprivate let journals = KeptJournals()

    init(store: ProtectedStore) {
        weakStore = store
    }

    /// The decrypted chunks a database file keeps for reads: 8 MiB.
    static let databaseReadCache = 8 << 20
    /// The decrypted chunks its WAL keeps for reads: 4 MiB.
    static let writeAheadLogReadCache = 4 << 20

    private var store: ProtectedStore {
        get throws {
            guard let store = weakStore else {
                throw DataProtectionError(.handleClosed, "The store of this database was released.",
                                          hint: "Keep the ProtectedStore alive while its databases are used.")
            }
            return store
        }
    }

    // The VFS reaches the store's reserved directory (the keychain's item databases live
    // there): the paths it is given come from `ProtectedDatabase`, which refuses a reserved
    // path of a caller's, or from SQLite beside such a database.
    func open(_ request: SQLiteOpenRequest) throws -> any SQLiteStorageFile {
        try ReservedStoreArea.withAccess { () throws -> any SQLiteStorageFile in try openInStore(request) }
    }

    func delete(path: String, database: (any SQLiteStorageFile)?) throws {
        try ReservedStoreArea.withAccess { () throws in try deleteInStore(path: path, database: database) }
    }

    func exists(path: String, database: (any SQLiteStorageFile)?) throws -> Bool {
        try ReservedStoreArea.withAccess { () throws -> Bool in try existsInStore(path: path, database: database) }
    }

    func fullPath(_ path: String) throws -> String {
        try ReservedStoreArea.withAccess { () throws -> String in try fullPathInStore(path) }
    }

    private func openInStore(_ request: SQLiteOpenRequest) throws -> any SQLiteStorageFile {
        guard let path = request.path else { return MemorySQLiteFile() }
        let mode: ProtectedFileHandle.Mode = request.readOnly ? .read : .update
        switch request.kind {
        case .mainDatabase:
            var protection: ProtectionClass?
            if let name = request.parameters["class"] {
                guard let named = ProtectionClass(rawValue: name) else {
                    throw DataProtectionError(.invalidArgument, "No protection class is named \(name).",
                                              hint: "Use one of: " + ProtectionClass.allCases.map(\.rawValue).joined(separator: ", ") + ".")
                }
                protection = named
            }
            let handle = try store.openFile(atPath: path, mode: mode, create: request.create, protection: ProtectionChoice(protection),
                                            chunkShift: ProtectedStore.databaseChunkShift)
            // SQLite reads its pages at random: plaintext chunks kept in secure memory stand in for the
            // operating system's page cache that an ordinary database file would be read from.
            handle.reserveReadCache(bytes: Self.databaseReadCache)
            // Its journal and WAL move with it (a directory's move takes them along anyway).
            handle.moveCompanions(withSuffixes: [Self.journalSuffix, Self.writeAheadLogSuffix])
            if journals.databaseOpened(handle.fileIdentity) {
                // The first connection: a move of the database that a crash cut may have left its
                // journal or WAL a second name (where the database was, or was going).
                do {
                    try store.removeStrayLinks(besideFileAt: path, suffixes: [Self.journalSuffix, Self.writeAheadLogSuffix])
                } catch {
                    _ = journals.databaseClosed(handle.fileIdentity)
                    try? handle.close()
                    throw error
                }
            }
            return StoreSQLiteFile(handle: handle, role: .database(storage: self))
        case .mainJournal:
            guard let database = request.database as? StoreSQLiteFile else {
                return StoreSQLiteFile(handle: try openBeside(path, mode: mode, create: request.create))
            }
            guard let path = try sidePath(of: database, suffix: Self.journalSuffix) else {
                // The database was removed while open: its journal lives and dies with the connection,
                // in memory (nothing is written back to any path; the unlinked database does not
                // survive a restart either).
                return MemorySQLiteFile()
            }
            let identity = database.handle.fileIdentity
            if let kept = try takeKeptJournal(of: identity, at: path) {
                do {
                    try kept.handle.checkAvailability()
                    return StoreSQLiteFile(handle: kept.handle, role: .journal(identity, storage: self))
                } catch where error.code == .handleClosed {
                    // Closed by the store meanwhile (a reboot): open the file again.
                } catch {
                    if !journals.park(kept.handle, emptied: kept.emptied, of: identity) { try? kept.handle.close() }
                    throw error
                }
            }
            let handle = try store.openFile(atPath: path, mode: mode, create: request.create,
                                            protection: ProtectionChoice(database.handle.protectionClass))
            return StoreSQLiteFile(handle: handle, role: .journal(identity, storage: self))
        case .writeAheadLog:
            // Chunks of a page, as the database's: a commit of one page regrows one or two small
            // chunks (frames of a page and 24 bytes straddle them) rather than a 16 KiB one, which
            // its journal holds and its `fsync` writes; a page read from the WAL opens 8 KiB, not 16.
            guard let database = request.database as? StoreSQLiteFile else {
                return StoreSQLiteFile(handle: try openBeside(path, mode: mode, create: request.create, chunkShift: ProtectedStore.databaseChunkShift),
                                       role: .writeAheadLog)
            }
            guard let path = try sidePath(of: database, suffix: Self.writeAheadLogSuffix) else {
                throw DataProtectionError(.fileNotFound, "The database was removed while open: it has no place for a write-ahead log.",
                                          hint: "Close the connection; a removed database cannot be written in WAL mode.")
            }
            let handle = try store.openFile(atPath: path, mode: mode, create: request.create,
                                            protection: ProtectionChoice(database.handle.protectionClass),
                                            chunkShift: ProtectedStore.databaseChunkShift)
            // In WAL mode the rollback journal is not used: the one kept (emptied by the switch) goes.
            if let kept = journals.takeEmptied(of: database.handle.fileIdentity) {
                let place = try? kept.currentPath()
                try? kept.close()
                if let place { try? store.removeItem(atPath: place) }
            }
            // Pages committed to the WAL and not yet checkpointed are read from it, at random
            // (up to about 4 MiB with SQLite's default checkpoint of 1000 pages).
            handle.reserveReadCache(bytes: Self.writeAheadLogReadCache)
            return StoreSQLiteFile(handle: handle, role: .writeAheadLog)
        case .superJournal, .temporary:
            return StoreSQLiteFile(handle: try openBeside(path, mode: mode, create: request.create))
        }
    }

    static let journalSuffix = "-journal"
    static let writeAheadLogSuffix = "-wal"

    /// Where the side file of `database` with `suffix` belongs now: beside the database
    /// wherever it is (a move of it, or of a directory above it, takes its side files'
    /// place along), never beside the path the connection was opened with. `nil` when the
    /// database was removed while open.
    private func sidePath(of database: StoreSQLiteFile, suffix: String) throws -> String? {
        try database.handle.currentPath().map { $0 + suffix }
    }

    /// The journal kept for the database `identity`, if any, found where it belongs now
    /// (`path`). A journal left behind by a move of the database alone (it does not follow
    /// the database's file as a directory's move takes it along) is moved to `path` when it
    /// still holds a transaction, and removed when it was emptied (SQLite's "no journal").
    private func takeKeptJournal(of identity: ObjectIdentifier, at path: String) throws -> (handle: ProtectedFileHandle, emptied: Bool)? {
        guard let kept = journals.take(of: identity) else { return nil }
        let place: String?
        do {
            place = try kept.handle.currentPath()
        } catch where error.code == .handleClosed {
            return kept  // the open that follows finds it closed
        }
        if place == path { return kept }
        let store = try store
        guard kept.emptied else {
            if let place, !store.fileExists(atPath: path) { try store.moveItem(atPath: place, toPath: path) }
            return kept
        }
        try? kept.handle.close()
        if let place { try? store.removeItem(atPath: place) }
        return nil
    }

    /// Opens a file SQLite named without its database (a super-journal, or a side file of no
    /// open database), in its database's class.
    private func openBeside(_ path: String, mode: ProtectedFileHandle.Mode, create: Bool,
                            chunkShift: UInt8 = ProtectedStore.defaultChunkShift) throws -> ProtectedFileHandle {
        try store.openFile(atPath: path, mode: mode, create: create, protection: try ProtectionChoice(databaseClass(of: path)),
                           chunkShift: chunkShift)
    }

    /// The class of the database a journal, WAL or other file beside it belongs to.
    private func databaseClass(of path: String) throws -> ProtectionClass? {
        for suffix in [Self.journalSuffix, Self.writeAheadLogSuffix] where path.hasSuffix(suffix) {
            let database = String(path.dropLast(suffix.count))
            let store = try store
            if store.fileExists(atPath: database) { return try store.attributesOfItem(atPath: database).protectionClass }
        }
        return nil
    }

    private func deleteInStore(path: String, database: (any SQLiteStorageFile)?) throws {
        guard let database = database as? StoreSQLiteFile else {
            try store.removeItem(atPath: path)
            return
        }
        let suffix = path.hasSuffix(Self.writeAheadLogSuffix) ? Self.writeAheadLogSuffix : Self.journalSuffix
        if suffix == Self.journalSuffix {
            // The kept journal (found beside the database when its transaction opened it) is emptied.
            do {
                if try journals.empty(of: database.handle.fileIdentity) { return }
            } catch {
                // Emptying failed (the class key went, an I/O error) and the handle is closed:
                // the file goes as SQLite asked, which commits the transaction all the same.
            }
        }
        guard let path = try sidePath(of: database, suffix: suffix) else { return }  // in memory: gone with its close
        try store.removeItem(atPath: path)
    }

    private func existsInStore(path: String, database: (any SQLiteStorageFile)?) throws -> Bool {
        var path = path
        if let database = database as? StoreSQLiteFile {
            let isJournal = !path.hasSuffix(Self.writeAheadLogSuffix)
            if isJournal, journals.isEmptied(of: database.handle.fileIdentity) { return false }
            guard let beside = try sidePath(of: database, suffix: isJournal ? Self.journalSuffix : Self.writeAheadLogSuffix) else { return false }
            path = beside
        }
        var isDirectory = false
        return try store.fileExists(atPath: path, isDirectory: &isDirectory) && !isDirectory
    }

    /// After a main database file closed: when it was the database's last connection, closes
    /// its kept journal, and removes it (wherever it is now) when SQLite had deleted it
    /// (emptied). A failure leaves an empty journal, which SQLite never takes for a hot one.
    fileprivate func closeJournal(ofDatabase identity: ObjectIdentifier) {
        guard let kept = journals.databaseClosed(identity) else { return }
        let place = kept.emptied ? try? kept.handle.currentPath() : nil
        try? kept.handle.close()
        if let place { try? store.removeItem(atPath: place) }
    }

    private func fullPathInStore(_ path: String) throws -> String {
        try ProtectedStore.standardizedPath(path)
    }

    /// True: a protected file changes only by whole commits (Keys/file-format.md §8.2): its
    /// length never covers records not yet written, and an overwrite is redone from the
    /// file's own journal after a crash, so a torn or garbage range is never read back.
    /// (Temporary files live in memory and do not survive a crash at all.)
    var writesAreAtomic: Bool { true }

    func failure(of error: any Error) -> SQLiteIOFailure {
        guard let error = error as? DataProtectionError else { return .other }
        switch error.code {
        case .protectedDataUnavailable: return .unavailable
        case .integrityFailure: return .integrity
        case .fileNotFound: return .notFound
        default: return .other
        }
    }
}

/// A protected file SQLite reads and writes, through its handle.
final class StoreSQLiteFile: SQLiteStorageFile {
    /// What closing the file involves beyond closing its handle.
    enum Role {
        /// A main database: its last close closes (and removes, when emptied) its kept journal.
        case database(storage: StoreSQLiteStorage)
        /// A rollback journal of the database whose file is the identity: closing parks it for
        /// the next transaction (``KeptJournals``).
        case journal(ObjectIdentifier, storage: StoreSQLiteStorage)
        /// A write-ahead log: its header written at offset 0 over older frames starts it anew.
        case writeAheadLog
        case other
    }

    let handle: ProtectedFileHandle
    let role: Role

    init(handle: ProtectedFileHandle, role: Role = .other) {
        self.handle = handle
        self.role = role
    }

    func read(into buffer: UnsafeMutableRawBufferPointer, atOffset offset: UInt64) throws -> Int {
        try handle.read(atOffset: offset, into: buffer)
    }

    func write(_ data: Data, atOffset offset: UInt64) throws {
        if case .writeAheadLog = role, offset == 0, data.count == Self.walHeaderByteCount, try handle.size() > offset + UInt64(data.count) {
            // SQLite restarts its WAL (every frame is in the database, made durable by the
            // checkpoint, and no reader uses one): it writes a new header (new salts) and then
            // frames from the start, and never reads an older frame again (each is checked
            // against the header's salts). The older frames go first, as SQLite's own
            // `journal_size_limit` would drop them after the next commit: the frames that follow
            // are appended, not laid over older chunks (each of which would be opened to keep
            // the bytes a frame does not cover: frames of a page and 24 bytes straddle them).
            try handle.truncate(atOffset: 0)
        }
        try handle.write(contentsOf: data, atOffset: offset)
    }

    /// The size of SQLite's WAL header (`WAL_HDRSIZE`), which it writes alone at offset 0.
    static let walHeaderByteCount = 32

    func truncate(to size: UInt64) throws {
        try handle.truncate(atOffset: size)
    }

    func synchronize() throws {
        try handle.synchronize()
    }

    func size() throws -> UInt64 {
        try handle.size()
    }

    func close() throws {
        switch role {
        case .journal(let database, let storage):
            // A journal opened for reading (SQLite's check for a hot one) is not kept: the
            // transaction that takes it would need to write.
            if handle.mode != .read, storage.journals.park(handle, of: database) { return }
            try handle.close()
        case .database(let storage):
            let identity = handle.fileIdentity
            defer { storage.closeJournal(ofDatabase: identity) }
            try handle.close()
        case .writeAheadLog, .other:
            try handle.close()
        }
    }

    func checkAccess() throws {
        try handle.checkAvailability()
    }

    /// The protected file's identity: every connection to one database shares its locks,
    /// wherever each opened it.
    var identity: ObjectIdentifier { handle.fileIdentity }
}

/// An anonymous temporary file of SQLite, in process memory (never on the disk). Its
/// plaintext (statement journals, sorter spills, temporary tables) is wiped wherever it
/// stops being used: a growth copies into a new buffer and wipes the old one, a shrink
/// zeroes the tail, closing wipes the rest; nothing is left in freed memory.
final class MemorySQLiteFile: SQLiteStorageFile {
    private struct Contents {
        /// The buffer, `length` bytes of it in use (the rest zeros).
        var storage = Data()
        var length = 0
    }

    private let contents = Locked(Contents())

    func read(into buffer: UnsafeMutableRawBufferPointer, atOffset offset: UInt64) throws -> Int {
        contents.withLock { contents in
            guard offset < UInt64(contents.length) else { return 0 }
            let start = Int(offset)
            let end = min(contents.length, start + buffer.count)
            return contents.storage.withUnsafeBytes { source in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[start..<end]))
                return end - start
            }
        }
    }

    func write(_ data: Data, atOffset offset: UInt64) throws {
        guard offset <= UInt64(Int.max / 2 - data.count) else {
            throw DataProtectionError(.invalidArgument, "A temporary file of SQLite cannot grow past \(Int.max / 2) bytes.")
        }
        contents.withLock { contents in
            let start = Int(offset)
            Self.reserve(start + data.count, in: &contents)
            contents.storage.replaceSubrange(start..<(start + data.count), with: data)
            contents.length = max(contents.length, start + data.count)
        }
    }

    func truncate(to size: UInt64) throws {
        guard size <= UInt64(Int.max / 2) else {
            throw DataProtectionError(.invalidArgument, "A temporary file of SQLite cannot grow past \(Int.max / 2) bytes.")
        }
        contents.withLock { contents in
            let size = Int(size)
            if contents.length > size {
                contents.storage.resetBytes(in: size..<contents.length)
            } else {
                Self.reserve(size, in: &contents)
            }
            contents.length = size
        }
    }

    func synchronize() throws {}

    func size() throws -> UInt64 { UInt64(contents.withLock { $0.length }) }

    func close() throws {
        contents.withLock { contents in
            Memory.wipe(&contents.storage)
            contents = Contents()
        }
    }

    func checkAccess() throws {}

    var identity: ObjectIdentifier { ObjectIdentifier(self) }

    /// Makes the buffer hold at least `count` bytes: a larger one (doubling), the old one wiped.
    private static func reserve(_ count: Int, in contents: inout Contents) {
        guard count > contents.storage.count else { return }
        var grown = Data(count: max(count, contents.storage.count * 2, 4096))
        grown.replaceSubrange(0..<contents.length, with: contents.storage.prefix(contents.length))
        Memory.wipe(&contents.storage)
        contents.storage = grown
    }
}
