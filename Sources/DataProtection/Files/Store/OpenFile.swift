import Foundation
import SodiumBridge
import SystemPackage

/// One protected file opened by the store, shared by every handle on it (and
/// by whole-file reads while handles are open).
///
/// It holds the file's keys and a small cache of plaintext chunks in secure
/// memory. Writes land in the cache; a flush decides which chunks to seal into
/// records and hands them to the file's ``CommittedFile``, whose flush protocol
/// writes and commits them in the order that survives a power cut (a crash leaves
/// the old committed state or the new one, each chunk old or new).
///
/// A non-durable flush that only appends writes its records and stops there (a
/// deferred append): they are read back from disk and committed by the next
/// durable flush.
///
/// Reading is in OpenFile+Reading.swift, writing and choosing what to seal in
/// OpenFile+Flush.swift. The mutable state below is reached only under `lock`, which is
/// what makes the class `Sendable`; it is internal only so that those files reach it. For
/// the same reason its properties skip Swift's dynamic exclusivity check
/// (`@exclusivity(unchecked)`): with the lock held no two accesses overlap, and the check
/// cost some 20,000 instructions of a SQLite commit's 175,000.
final class OpenFile: @unchecked Sendable {
    /// Plaintext chunks cached before a flush is forced.
    static let cacheLimit = 64
    /// A write covering at least this many whole chunks seals them straight from
    /// the caller's data into records (no copy into the cache), at most
    /// ``cacheLimit`` chunks per commit.
    static let directChunks = 32
    /// At most this many committed chunks changed by writes stay cached through a
    /// deferred append (more are committed with a journal at once).
    static let retainedLimit = 8
    /// By default at most this many clean chunks are kept for reads (``readCache``): 512 KiB.
    static let readCacheLimit = 32
    /// The most bytes one read returns: more cannot be allocated (the machine's memory).
    static let readLimit = ProcessInfo.processInfo.physicalMemory

    let device: Device
    /// The on-disk file's identity (a re-encrypting class change moves the file to a new one).
    var identity: FileIdentity { lock.locked { currentIdentity } }
    @exclusivity(unchecked) var currentIdentity: FileIdentity
    let lock = NSLock()
    /// The file on disk: descriptor, committed header, and the flush protocol.
    @exclusivity(unchecked) var disk: CommittedFile
    @exclusivity(unchecked) var keys: FileKeys?
    /// The logical size, including writes not yet flushed.
    @exclusivity(unchecked) var size: UInt64
    /// Cached plaintext chunks (full chunk-size buffers; bytes past the logical size are zero).
    @exclusivity(unchecked) var cache: [UInt64: (buffer: SecureBytes, dirty: Bool)] = [:]
    /// Zeroed chunk buffers kept for reuse (a `sodium_malloc` costs several system calls),
    /// at most one cache's worth; released by a durable flush and on close.
    @exclusivity(unchecked) var spares: [SecureBytes] = []
    /// Clean chunks that partial reads decrypted, kept for the next reads (least recently
    /// used last out): a database reads 4 KiB pages at random and its header at every
    /// transaction, and without them each read decrypts a whole chunk. Plaintext in secure
    /// memory, dropped (wiped) for every chunk a write or truncation changes, at key
    /// discard, on close and at recovery.
    @exclusivity(unchecked) var readCache = ChunkReadCache()
    /// How many chunks ``readCache`` may hold (``readCacheLimit`` unless a user of the file asked for more).
    @exclusivity(unchecked) var readCapacity = OpenFile.readCacheLimit
    /// The length the records on disk were sealed for: the committed length, or
    /// more after a deferred append (records past the committed length, written in
    /// place but not yet committed: read back from there, committed by the next
    /// durable flush or any flush that needs a journal).
    @exclusivity(unchecked) var recordedLength: UInt64
    @exclusivity(unchecked) var closed = false
    /// The suffixes of the files beside this one that belong to it while it is open (a
    /// database's `-journal` and `-wal`): a move of the file through the store takes them along.
    var companionSuffixes: [String] {
        get { lock.locked { companions } }
        set { lock.locked { companions = newValue } }
    }
    @exclusivity(unchecked) private var companions: [String] = []
    /// Where the file was found in the store (``ProtectedStore/currentPath(of:)``), at which count
    /// of name-space changes and on-disk path.
    @exclusivity(unchecked) var placeMemo: (changes: UInt64, disk: FilePath, path: StorePath)?

    /// The committed header.
    var header: FileHeader { disk.header }
    /// The descriptor.
    var file: DataFileDescriptor { disk.file }

    private init(device: Device, file: DataFileDescriptor, header: FileHeader, slot: Int, slotMAC: Data, keys: FileKeys) throws(DataProtectionError) {
        self.device = device
        self.currentIdentity = try file.identity()
        self.disk = CommittedFile(file: file, header: header, slot: slot, slotMAC: slotMAC)
        self.keys = keys
        self.size = header.length
        self.recordedLength = header.length
    }

    deinit {
        releaseBuffers()
        keys?.wipe()
        // `close(flushing:)` already closed the descriptor: closing it again could close a
        // descriptor another thread has just been given the same number.
        if !closed { disk.close() }
    }

    // MARK: - Opening

    /// Opens an existing protected file: unwraps its key (the class key must be
    /// available), replays or discards a journal, checks the physical size.
    static func open(at path: FilePath, device: Device) throws(DataProtectionError) -> OpenFile {
        let file = try DataFileDescriptor.open(path, fileSystem: device.fileSystem)
        do throws(DataProtectionError) {
            let slots = try CommittedFile.readSlots(file)
            guard !slots.isEmpty else {
                throw DataProtectionError.integrity("The file has no valid header: it is not a protected file, or it was tampered with.")
            }
            var lastError: DataProtectionError?
            for (index, candidate) in slots {
                do throws(DataProtectionError) {
                    let keys = try FileKeys.unwrap(candidate, device: device)
                    let openFile = try OpenFile(device: device, file: file, header: candidate.header, slot: index,
                                                slotMAC: candidate.mac, keys: keys)
                    do throws(DataProtectionError) {
                        try openFile.recover()
                    } catch {
                        openFile.closed = true  // the descriptor is still ours, for the next slot or the close below
                        throw error
                    }
                    return openFile
                } catch where error.code == .protectedDataUnavailable {
                    throw error
                } catch {
                    lastError = error
                }
            }
            throw lastError!
        } catch {
            file.close()
            throw error
        }
    }

    /// The class and size recorded in the newest well-formed header, read without any key
    /// (for `stat` and listings while locked; authenticated on the next read), if the file
    /// is bound to `place`. Its length is the committed one, as the next open will find it:
    /// when a crash left commits in a chain of journals beside the file, ahead of its header,
    /// the chain's (authenticated, over the header that opens, when the class key is here).
    static func peekHeader(at path: FilePath, place: Place, device: Device) throws(DataProtectionError) -> FileHeader {
        let file = try DataFileDescriptor.open(path, fileSystem: device.fileSystem)
        defer { file.close() }
        let slots = try CommittedFile.readSlots(file)
        guard let newest = slots.first else {
            throw .integrity("The file has no valid header: it is not a protected file, or it was tampered with.")
        }
        try FilePlaceRecords.verify(file, fileID: newest.1.header.fileID, place: place, device: device)
        var header = newest.1.header
        // Almost always no journal: a file closed cleanly leaves none, and nothing is unwrapped.
        guard try device.fileSystem.status(at: CommittedFile.journalPath(for: path)) != nil else { return header }
        var keys: FileKeys?
        for (_, candidate) in slots {
            do throws(DataProtectionError) {
                keys = try FileKeys.unwrap(candidate, device: device)
                header = candidate.header  // the newest that authenticates, as an open takes it
                break
            } catch where error.code == .protectedDataUnavailable {
                break
            } catch {
                continue
            }
        }
        defer { keys?.wipe() }
        header.length = try CommittedFile.committedLength(of: file, header: header, keys: keys)
        return header
    }

    /// Wraps a file just written by this process, whose header and keys are known:
    /// no unwrap is needed (a class B file created while locked has no other way in).
    static func adopt(at path: FilePath, header: FileHeader, keys: FileKeys, device: Device) throws(DataProtectionError) -> OpenFile {
        let file = try DataFileDescriptor.open(path, fileSystem: device.fileSystem)
        do throws(DataProtectionError) {
            let mac = CommittedFile.mac(of: header.encodedSlot(macKey: keys.macKey))
            return try OpenFile(device: device, file: file, header: header, slot: 0, slotMAC: mac, keys: keys)
        } catch {
            file.close()
            throw error
        }
    }

    /// The class of the file at `path`, authenticated when its class key is
    /// available; without the key, the class its header states (all that can be
    /// known); `nil` when the header does not authenticate (the stated class is a lie).
    static func verifiedClass(at path: FilePath, place: Place, device: Device) throws(DataProtectionError) -> ProtectionClass? {
        let file = try DataFileDescriptor.open(path, fileSystem: device.fileSystem)
        defer { file.close() }
        let slots = try CommittedFile.readSlots(file)
        guard let newest = slots.first else { return nil }
        // A file moved here from elsewhere on disk states nothing about this place.
        do throws(DataProtectionError) {
            try FilePlaceRecords.verify(file, fileID: newest.1.header.fileID, place: place, device: device)
        } catch where error.code == .integrityFailure {
            return nil
        }
        for (_, candidate) in slots {
            do throws(DataProtectionError) {
                let keys = try FileKeys.unwrap(candidate, device: device)
                keys.wipe()
                return candidate.header.protectionClass
            } catch where error.code == .protectedDataUnavailable {
                return newest.1.header.protectionClass
            } catch {
                continue
            }
        }
        return nil
    }

    /// A fresh header (generation 1, empty, chunks of `2^chunkShift` bytes) with a new wrapped file key.
    static func newHeader(
        protectionClass: ProtectionClass, chunkShift: UInt8, device: Device, now: Date
    ) throws(DataProtectionError) -> (FileHeader, FileKeys) {
        precondition((12...20).contains(chunkShift), "a chunk size no reader accepts")
        let keys = FileKeys.generate()
        var header = FileHeader(
            protectionClass: protectionClass, chunkShift: chunkShift,
            fileID: Random.bytes(count: FileHeader.fileIDByteCount), generation: 1, length: 0, allocatedRecords: 0,
            creationTime: Int64(now.timeIntervalSince1970 * 1e9),
            ephemeralPublicKey: Data(count: 32), wrapNonce: Data(count: 24), wrappedKey: Data(count: 48))
        do throws(DataProtectionError) {
            try keys.wrap(into: &header, device: device)
        } catch {
            keys.wipe()
            throw error
        }
        return (header, keys)
    }

    /// Replays a complete journal, discards a torn one, and checks that the
    /// physical size fits the committed length (``CommittedFile/recover(keys:)``).
    func recover() throws(DataProtectionError) {
        forgetReads()
        try disk.recover(keys: keys!)
        size = header.length
        recordedLength = header.length
    }

    // MARK: - State

    var protectionClass: ProtectionClass { lock.locked { header.protectionClass } }

    /// Whether the file was closed (by its last handle, or by a reboot).
    var isClosed: Bool { lock.locked { closed } }

    /// The logical size (including unflushed writes).
    var currentSize: UInt64 { lock.locked { size } }

    var creationTime: Int64 { lock.locked { header.creationTime } }

    /// The on-disk path (follows renames made through the store).
    var path: FilePath { lock.locked { file.path } }

    /// Refuses the file unless its place records bind it to `place` (`Keys/file-format.md` §10.2),
    /// and settles a record left binding another place by a move cut short. The id checked is
    /// the authenticated one of the current header. The caller holds the store's namespace
    /// lock (no move of the file runs meanwhile).
    func verifyPlace(_ place: Place) throws(DataProtectionError) {
        // The records are read under the file's lock, the tag computed outside it (the
        // device's lock is never taken while holding a file's).
        let (file, fileID) = lock.locked { (self.file, header.fileID) }
        try FilePlaceRecords.settle(file, fileID: fileID, place: place, device: device)
    }

    /// Runs `body`, which renames, replaces or removes files on disk, with no flush of any of
    /// `files` in progress (their locks held); then each file is found again at the first of its
    /// candidate paths that names it, or marked unlinked when none does. A flush must never put
    /// a journal at a path its file is leaving (the file would be found later without the
    /// journal its torn records need), nor write anything back to a path a removed file left
    /// (`semantics.md`, "Handles, visibility, durability": its handles go on with the unlinked
    /// file). The caller holds the store's name-space lock, so no file is opened meanwhile.
    static func changingPlaces(
        of files: [(file: OpenFile, candidates: [FilePath])], fileSystem: any FileSystem,
        _ body: () throws(DataProtectionError) -> Void
    ) throws(DataProtectionError) {
        // One order for taking several file locks (nothing else holds two at once).
        let ordered = files.sorted { ObjectIdentifier($0.file) < ObjectIdentifier($1.file) }
        for entry in ordered { entry.file.lock.lock() }
        defer {
            for entry in ordered {
                let file = entry.file
                if !file.closed {
                    let identity = file.currentIdentity
                    if let path = entry.candidates.first(where: { (try? fileSystem.status(at: $0))??.identity == identity }) {
                        if path != file.disk.file.path { file.disk.moved(to: path) }
                    } else {
                        file.disk.markUnlinked()
                    }
                }
                file.lock.unlock()
            }
        }
        try body()
    }

    /// The file keys, after checking the class key at this instant: a handle of a
    /// discarded class fails here, and gets its keys back once the class key returns.
    func requireKeys() throws(DataProtectionError) -> FileKeys {
        guard !closed else { throw DataProtectionError(.handleClosed, "The file was closed.") }
        if header.protectionClass == .completeUnlessOpen, let keys {
            return keys  // class B keeps its file key while the file is open
        }
        guard device.hasClassKey(for: header.protectionClass) else {
            throw device.classUnavailable(header.protectionClass)
        }
        if let keys { return keys }
        let written = disk.writtenHeader  // as in its slot (a pending chain's length is not)
        let slot = FileHeader.UnverifiedSlot(header: written, authenticated: written.authenticatedBytes, mac: disk.slotMAC)
        let keys = try FileKeys.unwrap(slot, device: device)
        self.keys = keys
        return keys
    }

    /// Checks (at this instant) that the file's class key is available.
    func checkAvailable() throws(DataProtectionError) {
        try lock.locked { () throws(DataProtectionError) in _ = try requireKeys() }
    }

    // MARK: - Class changes, key discard, close

    /// Rewraps the file key for `newClass` (content untouched), atomically:
    /// the new header goes to the other slot, then replaces the old one too, so
    /// the old class's wrap does not survive.
    func changeClass(to newClass: ProtectionClass) throws(DataProtectionError) {
        try lock.locked { () throws(DataProtectionError) in
            let keys = try requireKeys()
            try disk.requireGenerationsLeft()
            try flushLocked(durable: true, keys: keys)
            try disk.rewrap(to: newClass, keys: keys, device: device)
        }
    }

    /// Gives the file a new file key and re-encrypts its content in `newClass` (a class change
    /// away from `none`, whose key only device secrets protect: an old copy of the header must
    /// not open what is written from now on). What is buffered is flushed first; the new file
    /// is written beside the old one and renamed over it, so the change is atomic; open handles
    /// go on with the new file. `place` is the file's place, `storePath` its path (messages).
    func reencrypt(to newClass: ProtectionClass, place: Place, storePath: StorePath) throws(DataProtectionError) {
        try lock.locked { () throws(DataProtectionError) in
            let keys = try requireKeys()
            try flushLocked(durable: true, keys: keys)
            // The same chunk size: the open file's buffers stay right for the new file.
            let writer = try ProtectedFileWriter(target: file.path, place: place, storePath: storePath,
                                                 protectionClass: newClass, chunkShift: header.chunkShift, device: device)
            var offset: UInt64 = 0
            while offset < size {
                let piece = try readLocked(at: offset, count: 1 << 20, keys: keys)
                guard !piece.isEmpty else { break }
                try writer.append(piece, wipingAfterUse: true)  // plaintext passing through
                offset += UInt64(piece.count)
            }
            let (newHeader, newKeys) = try writer.commitTakingKeys()
            let replacement: DataFileDescriptor
            do throws(DataProtectionError) {
                replacement = try DataFileDescriptor.open(file.path, fileSystem: device.fileSystem)
                currentIdentity = try replacement.identity()
            } catch {
                newKeys.wipe()
                throw error
            }
            wipeCache()
            disk.replace(with: replacement, header: newHeader, keys: newKeys)
            keys.wipe()
            self.keys = newKeys
            size = newHeader.length
            recordedLength = newHeader.length
        }
    }

    /// Whether a durable flush has anything to do: cached writes, a size change, uncommitted
    /// records, or data not yet `fsync`ed.
    var hasPendingWrites: Bool {
        lock.locked { !closed && (disk.unsynced || disk.allocatedAhead || size != header.length || cache.values.contains { $0.dirty }) }
    }

    /// The class key is about to go: write out what is cached (durably, with the
    /// key still present), then wipe the file keys and plaintext. Class B keeps
    /// its key while open.
    ///
    /// Returns the wiped keys (the chunk buffers go back to the pool, wiped): freeing secure
    /// memory costs several system calls each, so the caller may release them later, off
    /// the lock's path.
    @discardableResult
    func classKeyWillBeDiscarded() -> [SecureBytes] {
        lock.locked { () -> [SecureBytes] in
            guard !closed, header.protectionClass != .completeUnlessOpen, let keys else { return [] }
            do throws(DataProtectionError) {
                try flushLocked(durable: true, keys: keys)
                try disk.checkpoint(keys: keys)  // no header can be written without the key
            } catch {
                device.logger.error("could not flush a protected file before its class key was discarded",
                                    metadata: ["error": "\(error.code.rawValue)"])
            }
            wipeCache()
            forgetReads()
            releaseSpares()
            let retired = [keys.fileKey, keys.chunkKey, keys.macKey]
            keys.wipe()
            self.keys = nil
            return retired
        }
    }

    /// Closes the file: flushes (durably) unless `flushing` is false (a crash, which leaves
    /// the disk as it is) or the file was unlinked (its content goes with it), removes the
    /// journal its last commit left, then wipes everything.
    func close(flushing: Bool) throws(DataProtectionError) {
        try lock.locked { () throws(DataProtectionError) in
            guard !closed else { return }
            defer {
                closed = true
                releaseBuffers()
                keys?.wipe()
                keys = nil
                disk.close(removingJournal: flushing)
            }
            if flushing, !disk.unlinked, let keys {
                try flushLocked(durable: true, keys: keys)
                try disk.checkpoint(keys: keys)  // a closed file at rest, its journal removed
            }
        }
    }
}

