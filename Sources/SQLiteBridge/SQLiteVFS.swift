import CSQLite
import Foundation
import SodiumBridge

/// A SQLite VFS whose files come from a ``SQLiteStorage``.
///
/// Registered under ``name`` for as long as the object lives; a connection opened with
/// that VFS name must be closed before the object is released. Locks and the WAL's
/// shared memory are process-local (one owner process per store), keyed by the main
/// database file's identity; a journal or WAL is found through its database's open file
/// (``SQLiteOpenRequest/database``). Both follow the database when it moves while open.
///
/// Time, randomness, sleeping and extension loading are the default VFS's.
public final class SQLiteVFS: @unchecked Sendable {
    /// The name connections select the VFS by (`sqlite3_open_v2`'s `zVfs`, or `?vfs=` in a URI).
    public let name: String
    let storage: any SQLiteStorage
    let locks = SQLiteLockTable()
    let sharedMemory = SQLiteSharedMemory()
    /// The open main databases by the addresses of the names SQLite gives their journal and
    /// WAL (`sqlite3_filename_journal` and `sqlite3_filename_wal` of the name the database was
    /// opened with: the pager's own strings, which it passes to `xOpen`, `xDelete` and
    /// `xAccess`). A side file is found through its database's open file, wherever that is
    /// now, never through the name: the connection derived it from the path it was opened
    /// at, which a move of the database (or of a directory above it) has left. Matched by
    /// address only (no name from elsewhere, a super-journal's list say, is ever walked).
    private let sideFiles = Locked<[UInt: any SQLiteStorageFile]>([:])
    // Owned by this object and handed to SQLite; freed in deinit after unregistering.
    private let vfs: UnsafeMutablePointer<sqlite3_vfs>
    private let cName: UnsafeMutablePointer<CChar>

    /// Registers a VFS named `name` (not the default one) serving `storage`.
    public init(name: String, storage: any SQLiteStorage) throws(SQLiteError) {
        try SQLiteConnection.initializeLibrary()
        guard let base = sqlite3_vfs_find(nil) else {
            throw SQLiteError(code: SQLITE_ERROR, message: "SQLite has no default VFS to take time and randomness from.")
        }
        guard let cName = strdup(name) else { throw SQLiteError(code: SQLITE_NOMEM, message: "Out of memory.") }
        self.name = name
        self.storage = storage
        self.cName = cName
        vfs = .allocate(capacity: 1)
        vfs.initialize(to: sqlite3_vfs())
        vfs.pointee.iVersion = 2
        vfs.pointee.szOsFile = Int32(MemoryLayout<DPSQLiteFile>.size)
        vfs.pointee.mxPathname = Self.maximumPathLength
        vfs.pointee.zName = UnsafePointer(cName)
        vfs.pointee.xOpen = sqliteOpen
        vfs.pointee.xDelete = sqliteDelete
        vfs.pointee.xAccess = sqliteAccess
        vfs.pointee.xFullPathname = sqliteFullPathname
        // The unix VFS's implementations of these ignore their VFS argument.
        vfs.pointee.xDlOpen = base.pointee.xDlOpen
        vfs.pointee.xDlError = base.pointee.xDlError
        vfs.pointee.xDlSym = base.pointee.xDlSym
        vfs.pointee.xDlClose = base.pointee.xDlClose
        vfs.pointee.xRandomness = base.pointee.xRandomness
        vfs.pointee.xSleep = base.pointee.xSleep
        vfs.pointee.xCurrentTime = base.pointee.xCurrentTime
        vfs.pointee.xGetLastError = base.pointee.xGetLastError
        vfs.pointee.xCurrentTimeInt64 = base.pointee.xCurrentTimeInt64
        vfs.pointee.pAppData = Unmanaged.passUnretained(self).toOpaque()
        let status = sqlite3_vfs_register(vfs, 0)
        guard status == SQLITE_OK else {
            vfs.deallocate()
            free(cName)
            throw SQLiteError(code: status, message: "Could not register the VFS \(name).")
        }
    }

    deinit {
        sqlite3_vfs_unregister(vfs)
        vfs.deinitialize(count: 1)
        vfs.deallocate()
        free(cName)
    }

    static let maximumPathLength: Int32 = 1024

    /// The storage error behind the last failing VFS call made on this thread, forgotten
    /// once taken: the `DataProtectionError` behind a `SQLITE_IOERR_AUTH`, for instance.
    /// For callers that run SQLite through another library (GRDB), on the thread that ran
    /// the failing statement.
    public static func takeLastStorageError() -> (any Error)? {
        SQLiteStorageErrorSlot.take()
    }

    static func from(_ pointer: UnsafeMutablePointer<sqlite3_vfs>?) -> SQLiteVFS {
        Unmanaged<SQLiteVFS>.fromOpaque(pointer!.pointee.pAppData).takeUnretainedValue()
    }

    /// Records `error` for this thread and returns the result code SQLite gets for it.
    func fail(_ error: any Error, _ code: Int32, notFound: Int32? = nil) -> Int32 {
        SQLiteStorageErrorSlot.record(error)
        switch storage.failure(of: error) {
        case .unavailable: return SQLiteResultCode.ioErrorAuthorization
        case .integrity: return SQLiteResultCode.ioErrorData
        case .notFound: return notFound ?? code
        case .other: return code
        }
    }

    /// The open main database whose journal or WAL SQLite names with `name` (the pager's string), if any.
    func database(ofSideFile name: UnsafePointer<CChar>?) -> (any SQLiteStorageFile)? {
        guard let name else { return nil }
        return sideFiles.withLock { $0[UInt(bitPattern: name)] }
    }

    /// Forgets the side-file names of a main database that closes.
    func forgetSideNames(_ names: [UInt]) {
        guard !names.isEmpty else { return }
        sideFiles.withLock { sideFiles in
            for name in names { sideFiles[name] = nil }
        }
    }

    // MARK: - xOpen

    fileprivate func open(_ name: sqlite3_filename?, file: UnsafeMutablePointer<DPSQLiteFile>, flags: Int32,
                          outFlags: UnsafeMutablePointer<Int32>?) -> Int32 {
        let kind = Self.kind(of: flags)
        var parameters: [String: String] = [:]
        if kind == .mainDatabase, let name {
            var index: Int32 = 0
            while let key = sqlite3_uri_key(name, index) {
                if let value = sqlite3_uri_parameter(name, key) { parameters[String(cString: key)] = String(cString: value) }
                index += 1
            }
        }
        let request = SQLiteOpenRequest(
            path: name.map { String(cString: $0) }, kind: kind,
            create: flags & SQLITE_OPEN_CREATE != 0, readOnly: flags & SQLITE_OPEN_READONLY != 0,
            deleteOnClose: flags & SQLITE_OPEN_DELETEONCLOSE != 0, parameters: parameters,
            database: kind == .mainJournal || kind == .writeAheadLog ? database(ofSideFile: name) : nil)
        let opened: any SQLiteStorageFile
        do {
            opened = try storage.open(request)
        } catch {
            return fail(error, SQLITE_CANTOPEN, notFound: SQLITE_CANTOPEN)
        }
        var sideNames: [UInt] = []
        if kind == .mainDatabase, let name {
            sideNames = [sqlite3_filename_journal(name), sqlite3_filename_wal(name)].compactMap { $0 }.map { UInt(bitPattern: $0) }
            sideFiles.withLock { sideFiles in
                for side in sideNames { sideFiles[side] = opened }
            }
        }
        let object = SQLiteOpenFile(vfs: self, file: opened, path: request.path, deleteOnClose: request.deleteOnClose,
                                    sideNames: sideNames)
        file.pointee.object = Unmanaged.passRetained(object).toOpaque()
        file.pointee.base.pMethods = UnsafePointer(SQLiteOpenFile.methods)
        outFlags?.pointee = flags
        return SQLITE_OK
    }

    private static func kind(of flags: Int32) -> SQLiteFileKind {
        if flags & SQLITE_OPEN_MAIN_DB != 0 { return .mainDatabase }
        if flags & SQLITE_OPEN_MAIN_JOURNAL != 0 { return .mainJournal }
        if flags & SQLITE_OPEN_WAL != 0 { return .writeAheadLog }
        if flags & SQLITE_OPEN_SUPER_JOURNAL != 0 { return .superJournal }
        return .temporary
    }
}

// MARK: - The VFS callbacks (C calling convention; no captures)

private let sqliteOpen: @convention(c) (
    UnsafeMutablePointer<sqlite3_vfs>?, sqlite3_filename?, UnsafeMutablePointer<sqlite3_file>?, Int32, UnsafeMutablePointer<Int32>?
) -> Int32 = { vfs, name, file, flags, outFlags in
    guard let file else { return SQLITE_MISUSE }
    let ours = UnsafeMutableRawPointer(file).assumingMemoryBound(to: DPSQLiteFile.self)
    ours.pointee.base.pMethods = nil  // SQLite calls no xClose on a file whose open failed
    ours.pointee.object = nil
    return SQLiteVFS.from(vfs).open(name, file: ours, flags: flags, outFlags: outFlags)
}

private let sqliteDelete: @convention(c) (UnsafeMutablePointer<sqlite3_vfs>?, UnsafePointer<CChar>?, Int32) -> Int32 = { vfs, name, _ in
    let owner = SQLiteVFS.from(vfs)
    guard let name else { return SQLITE_MISUSE }
    do {
        try owner.storage.delete(path: String(cString: name), database: owner.database(ofSideFile: name))
        return SQLITE_OK
    } catch {
        return owner.fail(error, SQLiteResultCode.ioErrorDelete, notFound: SQLiteResultCode.ioErrorDeleteNoEntry)
    }
}

private let sqliteAccess: @convention(c) (
    UnsafeMutablePointer<sqlite3_vfs>?, UnsafePointer<CChar>?, Int32, UnsafeMutablePointer<Int32>?
) -> Int32 = { vfs, name, _, result in
    let owner = SQLiteVFS.from(vfs)
    guard let name, let result else { return SQLITE_MISUSE }
    do {
        result.pointee = try owner.storage.exists(path: String(cString: name), database: owner.database(ofSideFile: name)) ? 1 : 0
        return SQLITE_OK
    } catch {
        return owner.fail(error, SQLiteResultCode.ioErrorAccess)
    }
}

private let sqliteFullPathname: @convention(c) (
    UnsafeMutablePointer<sqlite3_vfs>?, UnsafePointer<CChar>?, Int32, UnsafeMutablePointer<CChar>?
) -> Int32 = { vfs, name, capacity, output in
    let owner = SQLiteVFS.from(vfs)
    guard let name, let output, capacity > 0 else { return SQLITE_MISUSE }
    let full: String
    do {
        full = try owner.storage.fullPath(String(cString: name))
    } catch {
        return owner.fail(error, SQLITE_CANTOPEN)
    }
    let bytes = Array(full.utf8)
    guard bytes.count < Int(capacity) else { return SQLITE_CANTOPEN }
    for (index, byte) in bytes.enumerated() { output[index] = CChar(bitPattern: byte) }
    output[bytes.count] = 0
    return SQLITE_OK
}
