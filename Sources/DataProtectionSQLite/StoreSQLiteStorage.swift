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
/// journal or WAL takes its database's. SQLite's anonymous temporary files (statement
/// journals, sorter spills, temporary tables) live in process memory and never touch the disk.
///
/// The store is held weakly: the VFS stays registered for the life of the process, and
/// must not keep the store (and with it the ownership of its directory) alive once its
/// last user and its last open database are gone. Open files hold the store through
/// their handles.
final class StoreSQLiteStorage: SQLiteStorage {
    private weak let weakStore: ProtectedStore?
    /// The class of each main database opened through this storage, for its journals.
    private let classes = Locked<[String: ProtectionClass]>([:])

    init(store: ProtectedStore) {
        weakStore = store
    }

    /// The decrypted chunks a database file keeps for reads: 8 MiB.
    static let databaseReadCache = 8 << 20

    private var store: ProtectedStore {
        get throws {
            guard let store = weakStore else {
                throw DataProtectionError(.handleClosed, "The store of this database was released.",
                                          hint: "Keep the ProtectedStore alive while its databases are used.")
            }
            return store
        }
    }

    func open(_ request: SQLiteOpenRequest) throws -> any SQLiteStorageFile {
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
            let handle = try store.openFile(atPath: path, mode: mode, create: request.create, protection: ProtectionChoice(protection))
            // SQLite reads its pages at random: plaintext chunks kept in secure memory stand in for the
            // operating system's page cache that an ordinary database file would be read from.
            handle.reserveReadCache(bytes: Self.databaseReadCache)
            classes.withLock { $0[path] = handle.protectionClass }
            return StoreSQLiteFile(handle: handle)
        case .mainJournal, .writeAheadLog, .superJournal, .temporary:
            let handle = try store.openFile(atPath: path, mode: mode, create: request.create, protection: try ProtectionChoice(databaseClass(of: path)))
            return StoreSQLiteFile(handle: handle)
        }
    }

    /// The class of the database a journal, WAL or other file beside it belongs to.
    private func databaseClass(of path: String) throws -> ProtectionClass? {
        for suffix in ["-journal", "-wal"] where path.hasSuffix(suffix) {
            let database = String(path.dropLast(suffix.count))
            if let known = classes.withLock({ $0[database] }) { return known }
            let store = try store
            if store.fileExists(atPath: database) { return try store.attributesOfItem(atPath: database).protectionClass }
        }
        return nil
    }

    func delete(path: String) throws {
        try store.removeItem(atPath: path)
    }

    func exists(path: String) throws -> Bool {
        var isDirectory = false
        return try store.fileExists(atPath: path, isDirectory: &isDirectory) && !isDirectory
    }

    func fullPath(_ path: String) throws -> String {
        try ProtectedStore.standardizedPath(path)
    }

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
    let handle: ProtectedFileHandle

    init(handle: ProtectedFileHandle) {
        self.handle = handle
    }

    func read(count: Int, atOffset offset: UInt64) throws -> Data {
        try handle.read(atOffset: offset, upToCount: count)
    }

    func write(_ data: Data, atOffset offset: UInt64) throws {
        try handle.write(contentsOf: data, atOffset: offset)
    }

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
        try handle.close()
    }

    func checkAccess() throws {
        try handle.checkAvailability()
    }
}

/// An anonymous temporary file of SQLite, in process memory (never on the disk).
final class MemorySQLiteFile: SQLiteStorageFile {
    private let bytes = Locked(Data())

    func read(count: Int, atOffset offset: UInt64) throws -> Data {
        bytes.withLock { bytes in
            guard offset < UInt64(bytes.count) else { return Data() }
            let start = Int(offset)
            return Data(bytes[start..<min(bytes.count, start + count)])
        }
    }

    func write(_ data: Data, atOffset offset: UInt64) throws {
        guard offset <= UInt64(Int.max - data.count) else {
            throw DataProtectionError(.invalidArgument, "A temporary file of SQLite cannot grow past \(Int.max) bytes.")
        }
        bytes.withLock { bytes in
            let start = Int(offset)
            if bytes.count < start + data.count { bytes.append(Data(count: start + data.count - bytes.count)) }
            bytes.replaceSubrange(start..<(start + data.count), with: data)
        }
    }

    func truncate(to size: UInt64) throws {
        guard size <= UInt64(Int.max) else {
            throw DataProtectionError(.invalidArgument, "A temporary file of SQLite cannot grow past \(Int.max) bytes.")
        }
        bytes.withLock { bytes in
            if bytes.count > Int(size) {
                bytes.removeSubrange(Int(size)...)
            } else {
                bytes.append(Data(count: Int(size) - bytes.count))
            }
        }
    }

    func synchronize() throws {}

    func size() throws -> UInt64 { UInt64(bytes.withLock { $0.count }) }

    func close() throws {
        bytes.withLock { $0 = Data() }
    }

    func checkAccess() throws {}
}
