import Foundation
import SodiumBridge

/// A handle on a protected file, shaped like Foundation's `FileHandle`.
///
/// Every operation that touches content checks the file's class key at the
/// moment of the call: on a `complete` file, reads and writes throw
/// `protectedDataUnavailable` once the device has locked (after the grace
/// period), and work again after unlock. What a handle has written is flushed
/// before the key goes, so an acknowledged write is never lost to a lock.
/// `completeUnlessOpen` handles keep working until closed. `seek`, `offset`,
/// `size`, `synchronize` and `close` need no key.
///
/// Writes past the end extend the file with zeros. Writes are visible to other
/// handles and whole-file reads once synchronized or closed (usually sooner).
/// A handle is closed by ``close()``, or when the device reboots; dropping the
/// last reference also closes it.
///
/// A handle follows its file, not its path: after a move of the file or of a
/// directory above it, it reads and writes the same file, and its flushes land
/// there. After the file is removed (or replaced by a whole-file write), the
/// handle goes on with the unlinked file until closed, as on POSIX, and nothing
/// it writes reaches any path.
public final class ProtectedFileHandle: Sendable {
    /// What a handle may do.
    public enum Mode: String, Sendable, Hashable, CaseIterable {
        /// Read only.
        case read
        /// Write only (does not truncate).
        case write
        /// Read and write.
        case update
        /// Write only, every write at the end.
        case append

        var canRead: Bool { self == .read || self == .update }
        var canWrite: Bool { self != .read }
    }

    /// The mode the handle was opened with.
    public let mode: Mode
    let store: ProtectedStore
    let file: OpenFile
    private let state = Locked(State())

    private struct State {
        var offset: UInt64 = 0
        var closed = false
    }

    init(store: ProtectedStore, file: OpenFile, mode: Mode) {
        self.store = store
        self.file = file
        self.mode = mode
    }

    deinit {
        if !state.withLock({ $0.closed }) { try? store.release(file, flushing: mode.canWrite) }
    }

    /// The file's protection class.
    public var protectionClass: ProtectionClass { file.protectionClass }

    /// Where the handle's file is now (`/`-prefixed, as ``ProtectedStore/standardizedPath(_:)``
    /// writes it): after a move of the file or of a directory above it, its new path; `nil`
    /// once the file was removed (or replaced) while open. What a file beside it (a
    /// database's journal) is found by.
    package func currentPath() throws(DataProtectionError) -> String? {
        try store.currentPath(of: file)?.description
    }

    /// Makes the files named like the handle's file plus each of `suffixes` (a database's
    /// `-journal` and `-wal`) belong to it while it is open: a move of the file through the
    /// store moves them along first, so they are beside it wherever it is.
    package func moveCompanions(withSuffixes suffixes: [String]) {
        file.companionSuffixes = suffixes
    }

    /// The identity of the handle's file: the same for every handle on one file (opened at
    /// whatever path, before or after a move) while any is open.
    package var fileIdentity: ObjectIdentifier { ObjectIdentifier(file) }

    // MARK: - Reading

    /// Reads up to `count` bytes at the offset and advances it; an empty `Data` at the end of the file.
    public func read(upToCount count: Int) throws(DataProtectionError) -> Data {
        guard count >= 0 else { throw .invalidArgument("Cannot read a negative number of bytes.") }
        return try advancing { offset throws(DataProtectionError) -> (Data, UInt64) in
            try requireReadable()
            let data = try file.read(at: offset, count: count)
            return (data, offset + UInt64(data.count))
        }
    }

    /// Reads from the offset to the end of the file.
    public func readToEnd() throws(DataProtectionError) -> Data {
        try advancing { offset throws(DataProtectionError) -> (Data, UInt64) in
            try requireReadable()
            let size = file.currentSize
            guard offset < size else {
                try file.checkAvailable()
                return (Data(), offset)
            }
            let data = try file.read(at: offset, count: Int(size - offset))
            return (data, offset + UInt64(data.count))
        }
    }

    /// Reads `count` bytes at `offset` without moving the handle's offset (positional, like `pread`).
    public func read(atOffset offset: UInt64, upToCount count: Int) throws(DataProtectionError) -> Data {
        try requireOpen()
        try requireReadable()
        return try file.read(at: offset, count: count)
    }

    /// Reads up to `destination.count` bytes at `offset` straight into `destination`
    /// (fewer only at the end of the file) and returns how many, without moving the
    /// handle's offset: no copy of the plaintext is left in ordinary memory on the way.
    /// For a layer that owns the buffer (SQLite's page reads).
    package func read(atOffset offset: UInt64, into destination: UnsafeMutableRawBufferPointer) throws(DataProtectionError) -> Int {
        try requireOpen()
        try requireReadable()
        return try file.read(at: offset, into: destination)
    }

    /// Lets the file keep up to `bytes` of clean decrypted chunks for reads at random (secure
    /// memory, wiped like the rest of its plaintext); the default is 512 KiB. For a database
    /// file, whose pages are read at random and re-read often.
    package func reserveReadCache(bytes: Int) {
        file.reserveReadCache(bytes: bytes)
    }

    /// Throws what a read or write would throw at this instant, without touching the
    /// content: `handleClosed`, or `protectedDataUnavailable` when the class key is not in
    /// memory. For layers that cache plaintext above the handle (SQLite's page cache) and
    /// must not serve it once the handle itself would refuse.
    public func checkAvailability() throws(DataProtectionError) {
        try requireOpen()
        try file.checkAvailable()
    }

    // MARK: - Writing

    /// Writes `data` at the offset (in append mode: at the end) and advances the offset past it.
    public func write<D: DataProtocol>(contentsOf data: D) throws(DataProtectionError) {
        var converted = data is Data ? Data() : Data(data)  // a copy of plaintext, wiped
        defer { Memory.wipe(&converted) }
        let bytes = data as? Data ?? converted
        try advancing { offset throws(DataProtectionError) -> ((), UInt64) in
            try requireWritable()
            let at = mode == .append ? file.currentSize : offset
            try file.write(bytes, at: at)
            return ((), at + UInt64(bytes.count))
        }
    }

    /// Writes `data` at `offset` without moving the handle's offset (positional, like `pwrite`).
    public func write<D: DataProtocol>(contentsOf data: D, atOffset offset: UInt64) throws(DataProtectionError) {
        try requireOpen()
        try requireWritable()
        var converted = data is Data ? Data() : Data(data)  // a copy of plaintext, wiped
        defer { Memory.wipe(&converted) }
        try file.write(data as? Data ?? converted, at: mode == .append ? file.currentSize : offset)
    }

    /// Sets the file's size (extending with zeros) and moves the offset there, as Foundation does.
    public func truncate(atOffset offset: UInt64) throws(DataProtectionError) {
        try advancing { _ throws(DataProtectionError) -> ((), UInt64) in
            try requireWritable()
            try file.truncate(to: offset)
            return ((), offset)
        }
    }

    /// Empties the file (size zero, durable on return) and moves the offset to 0, keeping its
    /// space on disk for the next growth: one header and one `fsync`, where
    /// ``truncate(atOffset:)`` to zero cuts the file in three ordered steps and a regrowth
    /// allocates again. For a file refilled soon after: SQLite's rollback journal, which the
    /// database layer keeps between transactions.
    package func empty() throws(DataProtectionError) {
        try advancing { _ throws(DataProtectionError) -> ((), UInt64) in
            try requireWritable()
            try file.empty()
            return ((), 0)
        }
    }

    /// Makes everything written through the file so far durable.
    public func synchronize() throws(DataProtectionError) {
        try requireOpen()
        try file.flush(durable: true)
    }

    // MARK: - Position

    /// The current offset.
    public func offset() throws(DataProtectionError) -> UInt64 {
        try state.withLock { state throws(DataProtectionError) -> UInt64 in
            guard !state.closed, !file.isClosed else { throw Self.closedError }
            return state.offset
        }
    }

    /// Moves the offset (past the end is allowed: a later write fills the gap with zeros).
    public func seek(toOffset offset: UInt64) throws(DataProtectionError) {
        try advancing { _ throws(DataProtectionError) -> ((), UInt64) in ((), offset) }
    }

    /// Moves the offset to the end of the file and returns it.
    @discardableResult
    public func seekToEnd() throws(DataProtectionError) -> UInt64 {
        try advancing { _ throws(DataProtectionError) -> (UInt64, UInt64) in
            let size = file.currentSize
            return (size, size)
        }
    }

    /// The file's size, including writes not yet synchronized.
    public func size() throws(DataProtectionError) -> UInt64 {
        try requireOpen()
        return file.currentSize
    }

    // MARK: - Closing

    /// Flushes (durably) and closes; later calls throw `handleClosed`. Closing twice is harmless.
    public func close() throws(DataProtectionError) {
        let wasOpen = state.withLock { state in
            defer { state.closed = true }
            return !state.closed
        }
        guard wasOpen, !file.isClosed else { return }
        try store.release(file, flushing: mode.canWrite)
    }

    // MARK: - Checks, in the contract's order: closed, mode, key (in `OpenFile`)

    private static let closedError = DataProtectionError(.handleClosed, "The handle is closed.",
                                                         hint: "Open the file again (handles close at reboot).")

    private func requireOpen() throws(DataProtectionError) {
        guard !state.withLock({ $0.closed }), !file.isClosed else { throw Self.closedError }
    }

    private func requireReadable() throws(DataProtectionError) {
        guard mode.canRead else { throw DataProtectionError(.notPermitted, "The handle was opened for \(mode.rawValue), not reading.") }
    }

    private func requireWritable() throws(DataProtectionError) {
        guard mode.canWrite else { throw DataProtectionError(.notPermitted, "The handle was opened for reading only.") }
    }

    /// Runs `body` with the offset under the handle's lock and stores the new offset it returns.
    private func advancing<R>(_ body: (UInt64) throws(DataProtectionError) -> (R, UInt64)) throws(DataProtectionError) -> R {
        try state.withLock { state throws(DataProtectionError) -> R in
            guard !state.closed, !file.isClosed else { throw Self.closedError }
            let (result, offset) = try body(state.offset)
            state.offset = offset
            return result
        }
    }
}

extension ProtectedStore {
    /// Opens a handle on the file at `path`.
    ///
    /// With `create`, a missing file is created (with `protection`, else the
    /// directory's class) along with missing parent directories; on an existing
    /// file `create` and `protection` are ignored.
    ///
    /// - Throws: `fileNotFound`, `isADirectory`, or `protectedDataUnavailable` when
    ///   the file's class key is not available (creating a `completeUnlessOpen`
    ///   file works while locked).
    public func openFile(
        atPath path: String, mode: ProtectedFileHandle.Mode = .update, create: Bool = false, protection protectionChoice: ProtectionChoice = .inherited
    ) throws(DataProtectionError) -> ProtectedFileHandle {
        try openFile(atPath: path, mode: mode, create: create, protection: protectionChoice, chunkShift: Self.defaultChunkShift)
    }

    /// Opens a handle as ``openFile(atPath:mode:create:protection:)`` does; a file created now
    /// has chunks of `2^chunkShift` bytes (12 to 20; `Keys/file-format.md` §13): a database
    /// created through the SQLite VFS has chunks of its pages' size, 4 KiB.
    package func openFile(
        atPath path: String, mode: ProtectedFileHandle.Mode, create: Bool, protection protectionChoice: ProtectionChoice, chunkShift: UInt8
    ) throws(DataProtectionError) -> ProtectedFileHandle {
        let protection = protectionChoice.protectionClass
        let storePath = try StorePath(path)
        return try namespace.locked { () throws(DataProtectionError) -> ProtectedFileHandle in
            if create {
                try storePath.requireCreatable(rootByteCount: root.string.utf8.count)
                try checkCreatableBeforeMakingParents(storePath, protection: protection)
                try makeDirectories(storePath.parent, protection: nil)
            }
            let location = try locate(storePath)
            switch location.kind {
            case .directory:
                throw DataProtectionError(.isADirectory, "\(storePath) is a directory.")
            case .missing:
                guard create else { throw DataProtectionError(.fileNotFound, "No such file: \(storePath).") }
                let parent = location.parent
                let writer = try ProtectedFileWriter(target: location.disk, place: location.place, storePath: storePath,
                                                     protectionClass: protection ?? parent.protectionClass ?? .default,
                                                     chunkShift: chunkShift, device: device)
                // Opened with the key it was written with: a class B file created while locked has no other way in.
                let file = try register(try writer.commitAndOpen(device: device))
                return ProtectedFileHandle(store: self, file: file, mode: mode)
            case .file:
                let file = try acquire(location)
                return ProtectedFileHandle(store: self, file: file, mode: mode)
            }
        }
    }

    // `fileHandle(forReadingAtPath:)`, `…forWritingAtPath:` and `…forUpdatingAtPath:` come
    // from ProtectedFileSystem, for this store and an agent's alike.
}
