import CSQLite
import Foundation

/// One file SQLite opened through a ``SQLiteVFS``: the storage's file plus the VFS's
/// lock level and shared-memory holding for it. Retained by the `DPSQLiteFile` SQLite
/// allocated, and released by `xClose`. SQLite uses a file from one connection, and a
/// connection from one thread at a time, so the mutable state needs no lock of its own,
/// nor Swift's dynamic exclusivity check (a transaction's half a dozen `xShmLock`s each
/// passed ``sharedMemory`` inout through it).
final class SQLiteOpenFile {
    let vfs: SQLiteVFS
    let file: any SQLiteStorageFile
    let path: String?
    let deleteOnClose: Bool
    /// For a main database: the addresses of the names SQLite gives its journal and WAL
    /// (``SQLiteVFS/sideFiles``), forgotten when it closes.
    let sideNames: [UInt]
    /// The key of locks and shared memory: the storage file's identity (the file's, wherever
    /// it is; an anonymous file's own).
    let lockKey: ObjectIdentifier
    @exclusivity(unchecked) var lockLevel = SQLITE_LOCK_NONE
    @exclusivity(unchecked) var sharedMemory = SQLiteSharedMemory.Holding()

    init(vfs: SQLiteVFS, file: any SQLiteStorageFile, path: String?, deleteOnClose: Bool, sideNames: [UInt] = []) {
        self.vfs = vfs
        self.file = file
        self.path = path
        self.deleteOnClose = deleteOnClose
        self.sideNames = sideNames
        lockKey = file.identity
    }

    /// The holder identity for locks.
    var holder: ObjectIdentifier { ObjectIdentifier(self) }

    static func from(_ file: UnsafeMutablePointer<sqlite3_file>?) -> SQLiteOpenFile {
        let ours = UnsafeMutableRawPointer(file!).assumingMemoryBound(to: DPSQLiteFile.self)
        return Unmanaged<SQLiteOpenFile>.fromOpaque(ours.pointee.object!).takeUnretainedValue()
    }

    /// Runs `body`, turning a thrown storage error into its result code (`code` for errors
    /// that are neither a missing key nor an integrity failure).
    func perform(_ code: Int32, _ body: () throws -> Int32) -> Int32 {
        do {
            return try body()
        } catch {
            return vfs.fail(error, code)
        }
    }

    /// `SQLITE_OK` when the storage lets the file's content be used now, else the code for its refusal.
    func checkAccess(failing code: Int32) -> Int32 {
        perform(code) {
            try file.checkAccess()
            return SQLITE_OK
        }
    }

    /// The methods of every file of the VFS (version 2: with shared memory, without memory mapping).
    nonisolated(unsafe) static let methods: UnsafeMutablePointer<sqlite3_io_methods> = {
        let methods = UnsafeMutablePointer<sqlite3_io_methods>.allocate(capacity: 1)
        methods.initialize(to: sqlite3_io_methods())
        methods.pointee.iVersion = 2
        methods.pointee.xClose = fileClose
        methods.pointee.xRead = fileRead
        methods.pointee.xWrite = fileWrite
        methods.pointee.xTruncate = fileTruncate
        methods.pointee.xSync = fileSync
        methods.pointee.xFileSize = fileSize
        methods.pointee.xLock = fileLock
        methods.pointee.xUnlock = fileUnlock
        methods.pointee.xCheckReservedLock = fileCheckReservedLock
        methods.pointee.xFileControl = { _, _, _ in SQLITE_NOTFOUND }
        methods.pointee.xSectorSize = { _ in 4096 }
        methods.pointee.xDeviceCharacteristics = { file in
            SQLiteOpenFile.from(file).vfs.storage.writesAreAtomic ? SQLITE_IOCAP_SAFE_APPEND | SQLITE_IOCAP_POWERSAFE_OVERWRITE : 0
        }
        methods.pointee.xShmMap = fileShmMap
        methods.pointee.xShmLock = fileShmLock
        methods.pointee.xShmBarrier = { file in SQLiteOpenFile.from(file).vfs.sharedMemory.barrier() }
        methods.pointee.xShmUnmap = fileShmUnmap
        return methods
    }()
}

// MARK: - The file callbacks (C calling convention; no captures)

private let fileClose: @convention(c) (UnsafeMutablePointer<sqlite3_file>?) -> Int32 = { file in
    guard let file else { return SQLITE_MISUSE }
    let ours = UnsafeMutableRawPointer(file).assumingMemoryBound(to: DPSQLiteFile.self)
    guard let object = ours.pointee.object else { return SQLITE_OK }
    ours.pointee.object = nil
    let open = Unmanaged<SQLiteOpenFile>.fromOpaque(object).takeRetainedValue()
    open.vfs.sharedMemory.unmap(open.lockKey, holding: &open.sharedMemory, holder: open.holder)
    open.vfs.locks.unlock(open.lockKey, holder: open.holder, from: open.lockLevel, to: SQLITE_LOCK_NONE)
    open.lockLevel = SQLITE_LOCK_NONE
    open.vfs.forgetSideNames(open.sideNames)
    return open.perform(SQLiteResultCode.ioErrorClose) {
        try open.file.close()
        if open.deleteOnClose, let path = open.path {
            try? open.vfs.storage.delete(path: path, database: nil)
        }
        return SQLITE_OK
    }
}

private let fileRead: @convention(c) (UnsafeMutablePointer<sqlite3_file>?, UnsafeMutableRawPointer?, Int32, sqlite3_int64) -> Int32 = {
    file, buffer, amount, offset in
    guard let buffer, amount >= 0, offset >= 0 else { return SQLITE_MISUSE }
    let open = SQLiteOpenFile.from(file)
    return open.perform(SQLiteResultCode.ioErrorRead) {
        // Straight into SQLite's buffer: no copy of the page left in ordinary memory.
        let count = min(try open.file.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: Int(amount)), atOffset: UInt64(offset)),
                        Int(amount))
        guard count == Int(amount) else {
            // SQLite requires the rest of the buffer zeroed on a short read.
            (buffer + count).initializeMemory(as: UInt8.self, repeating: 0, count: Int(amount) - count)
            return SQLiteResultCode.ioErrorShortRead
        }
        return SQLITE_OK
    }
}

private let fileWrite: @convention(c) (UnsafeMutablePointer<sqlite3_file>?, UnsafeRawPointer?, Int32, sqlite3_int64) -> Int32 = {
    file, buffer, amount, offset in
    guard let buffer, amount >= 0, offset >= 0 else { return SQLITE_MISUSE }
    let open = SQLiteOpenFile.from(file)
    return open.perform(SQLiteResultCode.ioErrorWrite) {
        // SQLite's buffer itself, valid for the call (the storage copies what it keeps): a
        // copy would cost a pass over the page and leave its plaintext in freed memory.
        let data = Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: buffer), count: Int(amount), deallocator: .none)
        try open.file.write(data, atOffset: UInt64(offset))
        return SQLITE_OK
    }
}

private let fileTruncate: @convention(c) (UnsafeMutablePointer<sqlite3_file>?, sqlite3_int64) -> Int32 = { file, size in
    guard size >= 0 else { return SQLITE_MISUSE }
    let open = SQLiteOpenFile.from(file)
    return open.perform(SQLiteResultCode.ioErrorTruncate) {
        try open.file.truncate(to: UInt64(size))
        return SQLITE_OK
    }
}

private let fileSync: @convention(c) (UnsafeMutablePointer<sqlite3_file>?, Int32) -> Int32 = { file, _ in
    let open = SQLiteOpenFile.from(file)
    return open.perform(SQLiteResultCode.ioErrorFsync) {
        try open.file.synchronize()
        return SQLITE_OK
    }
}

private let fileSize: @convention(c) (UnsafeMutablePointer<sqlite3_file>?, UnsafeMutablePointer<sqlite3_int64>?) -> Int32 = {
    file, size in
    guard let size else { return SQLITE_MISUSE }
    let open = SQLiteOpenFile.from(file)
    return open.perform(SQLiteResultCode.ioErrorFstat) {
        size.pointee = sqlite3_int64(clamping: try open.file.size())
        return SQLITE_OK
    }
}

private let fileLock: @convention(c) (UnsafeMutablePointer<sqlite3_file>?, Int32) -> Int32 = { file, wanted in
    let open = SQLiteOpenFile.from(file)
    if open.lockLevel == SQLITE_LOCK_NONE {
        // A transaction starts: not from the page cache if the storage refuses now.
        let status = open.checkAccess(failing: SQLiteResultCode.ioErrorLock)
        guard status == SQLITE_OK else { return status }
    }
    open.lockLevel = open.vfs.locks.lock(open.lockKey, holder: open.holder, from: open.lockLevel, to: wanted)
    return open.lockLevel >= wanted ? SQLITE_OK : SQLITE_BUSY
}

private let fileUnlock: @convention(c) (UnsafeMutablePointer<sqlite3_file>?, Int32) -> Int32 = { file, wanted in
    let open = SQLiteOpenFile.from(file)
    open.vfs.locks.unlock(open.lockKey, holder: open.holder, from: open.lockLevel, to: wanted)
    open.lockLevel = min(open.lockLevel, wanted)
    return SQLITE_OK
}

private let fileCheckReservedLock: @convention(c) (UnsafeMutablePointer<sqlite3_file>?, UnsafeMutablePointer<Int32>?) -> Int32 = {
    file, result in
    guard let result else { return SQLITE_MISUSE }
    let open = SQLiteOpenFile.from(file)
    result.pointee = open.vfs.locks.isReserved(open.lockKey) ? 1 : 0
    return SQLITE_OK
}

private let fileShmMap: @convention(c) (
    UnsafeMutablePointer<sqlite3_file>?, Int32, Int32, Int32, UnsafeMutablePointer<UnsafeMutableRawPointer?>?
) -> Int32 = { file, index, size, extend, result in
    guard let result, index >= 0, size > 0 else { return SQLITE_MISUSE }
    let open = SQLiteOpenFile.from(file)
    guard open.path != nil else { return SQLiteResultCode.ioErrorShmMap }
    result.pointee = open.vfs.sharedMemory.map(open.lockKey, holding: &open.sharedMemory, index: Int(index),
                                               size: Int(size), extend: extend != 0)
    return SQLITE_OK
}

private let fileShmLock: @convention(c) (UnsafeMutablePointer<sqlite3_file>?, Int32, Int32, Int32) -> Int32 = {
    file, offset, count, flags in
    guard offset >= 0, count > 0, offset + count <= SQLITE_SHM_NLOCK else { return SQLITE_MISUSE }
    let open = SQLiteOpenFile.from(file)
    if flags & SQLITE_SHM_LOCK != 0, open.sharedMemory.shared == 0, open.sharedMemory.exclusive == 0 {
        // WAL mode starts its transactions here, without reading the database file: the first
        // lock of a connection holding none (a read transaction, which a write one extends,
        // or a checkpoint) asks the storage. The locks taken inside a transaction do not ask
        // again: its reads and writes do.
        let status = open.checkAccess(failing: SQLiteResultCode.ioErrorShmLock)
        guard status == SQLITE_OK else { return status }
    }
    let granted = open.vfs.sharedMemory.lock(holding: &open.sharedMemory, holder: open.holder,
                                             offset: Int(offset), count: Int(count), flags: flags)
    return granted ? SQLITE_OK : SQLITE_BUSY
}

private let fileShmUnmap: @convention(c) (UnsafeMutablePointer<sqlite3_file>?, Int32) -> Int32 = { file, _ in
    let open = SQLiteOpenFile.from(file)
    open.vfs.sharedMemory.unmap(open.lockKey, holding: &open.sharedMemory, holder: open.holder)
    return SQLITE_OK
}
