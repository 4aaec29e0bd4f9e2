import Foundation
import SodiumBridge
import SystemPackage

/// One protected file opened by the store, shared by every handle on it (and
/// by whole-file reads while handles are open).
///
/// It holds the file's keys and a small cache of plaintext chunks in secure
/// memory. Writes land in the cache; a flush seals them into chunk records and
/// commits them with a header update:
///
/// 1. if the file grows, a header allocating the new records (length unchanged);
/// 2. records past the committed end, written in place;
/// 3. records that replace committed ones go to a redo journal first, then in place;
/// 4. a header with the new length (and for `durable`, `fsync` around it).
///
/// A non-durable flush that only appends stops after step 2 (a deferred append):
/// its records are read back from disk and committed by the next durable flush.
///
/// A crash at any instant leaves the old committed state or the new one, each
/// chunk old or new: a complete journal is replayed when the file is next
/// opened, a torn one discarded. Layout: `Keys/file-format.md` §8.2.
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
    private var currentIdentity: FileIdentity
    private let lock = NSLock()
    private var file: DataFileDescriptor
    private var header: FileHeader
    private var slot: Int
    private var slotMAC: Data
    private var keys: FileKeys?
    /// The logical size, including writes not yet flushed.
    private var size: UInt64
    /// Cached plaintext chunks (full chunk-size buffers; bytes past the logical size are zero).
    private var cache: [UInt64: (buffer: SecureBytes, dirty: Bool)] = [:]
    /// Zeroed chunk buffers kept for reuse (a `sodium_malloc` costs several system calls),
    /// at most one cache's worth; released by a durable flush and on close.
    private var spares: [SecureBytes] = []
    /// Clean chunks that partial reads decrypted, kept for the next reads (least recently
    /// used last out): a database reads 4 KiB pages at random and its header at every
    /// transaction, and without them each read decrypts a whole chunk. Plaintext in secure
    /// memory, dropped (wiped) for every chunk a write or truncation changes, at key
    /// discard, on close and at recovery.
    private var readCache: [UInt64: (buffer: SecureBytes, used: UInt64)] = [:]
    /// Counts reads from the cache: the entry used longest ago goes first.
    private var readClock: UInt64 = 0
    /// How many chunks ``readCache`` may hold (``readCacheLimit`` unless a user of the file asked for more).
    private var readCapacity = OpenFile.readCacheLimit
    /// The length the records on disk were sealed for: the committed length, or
    /// more after a deferred append (records past the committed length, written in
    /// place but not yet committed: read back from there, committed by the next
    /// durable flush or any flush that needs a journal).
    private var recordedLength: UInt64
    /// A deferred append allocated records ahead of the length: the next commit
    /// brings the file back to rest (exact size, `allocated` = records needed).
    private var allocatedAhead = false
    /// Flushed without `fsync` since the last durable point.
    private var unsynced = false
    private var closed = false

    private init(device: Device, file: DataFileDescriptor, header: FileHeader, slot: Int, slotMAC: Data, keys: FileKeys) throws(DataProtectionError) {
        self.device = device
        self.file = file
        self.currentIdentity = try file.identity()
        self.header = header
        self.slot = slot
        self.slotMAC = slotMAC
        self.keys = keys
        self.size = header.length
        self.recordedLength = header.length
    }

    deinit {
        releaseBuffers()
        keys?.wipe()
        // `close(flushing:)` already closed the descriptor: closing it again could close a
        // descriptor another thread has just been given the same number.
        if !closed { file.close() }
    }

    // MARK: - Opening

    /// Opens an existing protected file: unwraps its key (the class key must be
    /// available), replays or discards a journal, checks the physical size.
    static func open(at path: FilePath, device: Device) throws(DataProtectionError) -> OpenFile {
        let file = try DataFileDescriptor.open(path, fileSystem: device.fileSystem)
        do throws(DataProtectionError) {
            let slots = try readSlots(file)
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

    /// The parseable header slots, newest first.
    static func readSlots(_ file: DataFileDescriptor) throws(DataProtectionError) -> [(Int, FileHeader.UnverifiedSlot)] {
        let region = try file.read(at: 0, count: FileHeader.regionByteCount)
        guard region.count == FileHeader.regionByteCount else {
            throw .integrity("The file is shorter than its header: it was truncated.")
        }
        var slots: [(Int, FileHeader.UnverifiedSlot)] = []
        for index in 0..<FileHeader.slotCount {
            let start = index * FileHeader.slotByteCount
            if let parsed = FileHeader.parse(slot: region.subdata(in: start..<start + FileHeader.slotByteCount)) {
                slots.append((index, parsed))
            }
        }
        return slots.sorted { $0.1.header.generation > $1.1.header.generation }
    }

    /// The class and size recorded in the newest well-formed header, read without any key
    /// (for `stat` and listings while locked; authenticated on the next read), if the file
    /// is bound to `place`.
    static func peekHeader(at path: FilePath, place: Place, device: Device) throws(DataProtectionError) -> FileHeader {
        let file = try DataFileDescriptor.open(path, fileSystem: device.fileSystem)
        defer { file.close() }
        guard let newest = try readSlots(file).first else {
            throw .integrity("The file has no valid header: it is not a protected file, or it was tampered with.")
        }
        try FilePlaceRecords.verify(file, fileID: newest.1.header.fileID, place: place, device: device)
        return newest.1.header
    }

    /// Wraps a file just written by this process, whose header and keys are known:
    /// no unwrap is needed (a class B file created while locked has no other way in).
    static func adopt(at path: FilePath, header: FileHeader, keys: FileKeys, device: Device) throws(DataProtectionError) -> OpenFile {
        let file = try DataFileDescriptor.open(path, fileSystem: device.fileSystem)
        do throws(DataProtectionError) {
            let encoded = header.encodedSlot(macKey: keys.macKey)
            let mac = encoded.subdata(in: FileHeader.authenticatedByteCount..<FileHeader.authenticatedByteCount + 32)
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
        let slots = try readSlots(file)
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

    /// A fresh header (generation 1, empty) with a new wrapped file key.
    static func newHeader(protectionClass: ProtectionClass, device: Device, now: Date) throws(DataProtectionError) -> (FileHeader, FileKeys) {
        let keys = FileKeys.generate()
        var header = FileHeader(
            protectionClass: protectionClass, chunkShift: ProtectedStore.defaultChunkShift,
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
    /// physical size fits the committed length.
    private func recover() throws(DataProtectionError) {
        let keys = self.keys!
        forgetReads()
        let journalPath = Self.journalPath(for: file.path)
        if let data = try file.fileSystem.readFile(at: journalPath) {
            if let journal = FileJournal.decode(data, macKey: keys.macKey, fileID: header.fileID),
               journal.baseGeneration == header.generation {
                guard journal.fits(header) else {
                    throw .integrity("The file's journal describes records outside the file: it was tampered with.")
                }
                for entry in journal.entries {
                    try file.write(entry.record, at: header.recordOffset(entry.index))
                }
                try cutStaleRecords(length: journal.length, allocated: journal.allocatedRecords)
                try writeHeader(length: journal.length, allocated: journal.allocatedRecords, keys: keys)
                try file.synchronize()
                size = header.length
                recordedLength = header.length
            }
            try file.fileSystem.removeFile(at: journalPath)
        }
        let physical = try file.size()
        guard physical >= header.physicalSize(forLength: header.length) else {
            throw .integrity("The file is shorter than its authenticated length: it was truncated.")
        }
        // At rest (no growth or shrink in flight) the size is exact: any appended byte is detected.
        // While one is in flight (more records allocated than the length needs), records written
        // ahead of their commit are tolerated up to the allocation.
        let atRest = header.allocatedRecords == header.records(forLength: header.length)
        let allowed = atRest ? header.physicalSize(forLength: header.length)
            : Int64(FileHeader.regionByteCount) + Int64(header.allocatedRecords) * Int64(header.recordStride)
        guard physical <= allowed else {
            throw .integrity("The file is longer than its authenticated length: data was appended to it.")
        }
    }

    static func journalPath(for path: FilePath) -> FilePath {
        FilePath(path.string + FileJournal.suffix)
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

    /// Refuses the file unless its place records bind it to `place` (`Keys/file-format.md` §10.2).
    /// The id checked is the authenticated one of the current header.
    func verifyPlace(_ place: Place) throws(DataProtectionError) {
        // The records are read under the file's lock, the tag computed outside it (the
        // device's lock is never taken while holding a file's).
        let (file, fileID) = lock.locked { (self.file, header.fileID) }
        try FilePlaceRecords.verify(file, fileID: fileID, place: place, device: device)
    }

    func moved(to path: FilePath) {
        lock.locked { file = file.moved(to: path) }
    }

    /// The file keys, after checking the class key at this instant: a handle of a
    /// discarded class fails here, and gets its keys back once the class key returns.
    private func requireKeys() throws(DataProtectionError) -> FileKeys {
        guard !closed else { throw DataProtectionError(.handleClosed, "The file was closed.") }
        if header.protectionClass == .completeUnlessOpen, let keys {
            return keys  // class B keeps its file key while the file is open
        }
        guard device.hasClassKey(for: header.protectionClass) else {
            throw .unavailable("The \(header.protectionClass) class key is not available: the device is locked.")
        }
        if let keys { return keys }
        let slot = FileHeader.UnverifiedSlot(header: header, authenticated: header.authenticatedBytes, mac: slotMAC)
        let keys = try FileKeys.unwrap(slot, device: device)
        self.keys = keys
        return keys
    }

    /// Checks (at this instant) that the file's class key is available.
    func checkAvailable() throws(DataProtectionError) {
        try lock.locked { () throws(DataProtectionError) in _ = try requireKeys() }
    }

    // MARK: - Reading

    /// Reads up to `count` bytes at `offset` (fewer at the end of the file).
    func read(at offset: UInt64, count: Int) throws(DataProtectionError) -> Data {
        try lock.locked { () throws(DataProtectionError) -> Data in
            try readLocked(at: offset, count: count, keys: try requireKeys())
        }
    }

    private func readLocked(at offset: UInt64, count: Int, keys: FileKeys) throws(DataProtectionError) -> Data {
        guard offset < size, count > 0 else { return Data() }
        let end = min(size, offset + UInt64(count))
        // A read this large cannot be allocated (a whole-file read of a huge sparse file):
        // an error, not a crash of the process.
        guard end - offset <= Self.readLimit else {
            throw DataProtectionError(.invalidArgument,
                "Reading \(end - offset) bytes at once needs more memory than this machine has; read the file in pieces through a handle.")
        }
        var out = Data(count: Int(end - offset))
        let shift = UInt64(header.chunkShift)
        let recordedCount = header.records(forLength: recordedLength)
        var position = offset
        while position < end {
            let index = position >> shift
            let chunkStart = index << shift
            if let cached = cache[index]?.buffer {
                let upTo = min(end, chunkStart + UInt64(header.chunkSize))
                // Straight into `out`: a temporary copy would be plaintext left behind.
                cached.copyBytes(in: Int(position - chunkStart)..<Int(upTo - chunkStart), into: &out, at: Int(position - offset))
                position = upTo
                continue
            }
            if let clean = readCache[index]?.buffer {
                let upTo = min(end, chunkStart + UInt64(header.chunkSize))
                clean.copyBytes(in: Int(position - chunkStart)..<Int(upTo - chunkStart), into: &out, at: Int(position - offset))
                touchRead(index)
                position = upTo
                continue
            }
            guard index < recordedCount else {
                // Past the recorded end and not cached: zeros (a gap to be filled at flush).
                position = min(end, chunkStart + UInt64(header.chunkSize))
                continue
            }
            // A run of uncached recorded chunks: one pread, decrypted straight into `out`.
            var last = index
            while last + 1 < recordedCount, last - index < 63, cache[last + 1] == nil, readCache[last + 1] == nil, (last + 1) << shift < end {
                last += 1
            }
            try decryptRun(index...last, keys: keys, into: &out, offset: offset, from: position, to: end)
            position = min(end, (last + 1) << shift)
        }
        return out
    }

    private func decryptRun(
        _ run: ClosedRange<UInt64>, keys: FileKeys, into out: inout Data, offset: UInt64, from position: UInt64, to end: UInt64
    ) throws(DataProtectionError) {
        let start = header.recordOffset(run.lowerBound)
        let lastLength = recordedChunkLength(run.upperBound)
        let byteCount = Int(header.recordOffset(run.upperBound) - start) + lastLength + ChunkRecords.overhead
        let records = try file.read(at: start, count: byteCount)
        guard records.count == byteCount else { throw .integrity("The file is shorter than its authenticated length: it was truncated.") }
        let shift = UInt64(header.chunkShift)
        // Chunks wholly inside the request are opened straight into `out`, on every core.
        var whole: (indices: [UInt64], ranges: [Range<Int>], associatedData: [Data], offsets: [Int]) = ([], [], [], [])
        for index in run {
            let recordStart = Int(header.recordOffset(index) - start)
            let length = recordedChunkLength(index)
            let range = recordStart..<recordStart + length + ChunkRecords.overhead
            let chunkStart = index << shift
            let ad = header.chunkAssociatedData(index)
            if chunkStart >= position, chunkStart + UInt64(length) <= end {
                whole.indices.append(index)
                whole.ranges.append(range)
                whole.associatedData.append(ad)
                whole.offsets.append(Int(chunkStart - offset))
                continue
            }
            // A chunk partly inside: opened into a buffer kept for the next reads.
            let buffer = emptyChunk()
            do throws(SodiumError) {
                try ChunkRecords.open(records, range: range, into: buffer, at: 0, key: keys.chunkKey, associatedData: ad)
            } catch {
                recycle(buffer)
                throw .integrity("Chunk \(index) does not authenticate: the file was tampered with or is corrupt.")
            }
            let from = max(position, chunkStart), to = min(end, chunkStart + UInt64(length))
            if from < to {
                buffer.copyBytes(in: Int(from - chunkStart)..<Int(to - chunkStart), into: &out, at: Int(from - offset))
            }
            keepRead(index, buffer)
        }
        do throws(ChunkBatchError) {
            try ChunkBatch.open(records, ranges: whole.ranges, associatedData: whole.associatedData, into: &out,
                                at: whole.offsets, key: keys.chunkKey)
        } catch {
            throw .integrity("Chunk \(whole.indices[error.position]) does not authenticate: the file was tampered with or is corrupt.")
        }
    }

    /// The plaintext length of record `index` as it is on disk: committed records were
    /// sealed for the committed length, records a deferred append wrote past it for
    /// ``recordedLength``.
    private func recordedChunkLength(_ index: UInt64) -> Int {
        header.chunkLength(index, length: index < header.records(forLength: header.length) ? header.length : recordedLength)
    }

    /// Loads recorded chunk `index` into a new full-size buffer (zeros past the recorded end).
    private func loadChunk(_ index: UInt64, keys: FileKeys) throws(DataProtectionError) -> SecureBytes {
        let buffer = emptyChunk()
        guard index < header.records(forLength: recordedLength) else { return buffer }
        let length = recordedChunkLength(index)
        let record = try file.read(at: header.recordOffset(index), count: length + ChunkRecords.overhead)
        do {
            try ChunkRecords.open(record, range: 0..<record.count, into: buffer, at: 0, key: keys.chunkKey,
                                  associatedData: header.chunkAssociatedData(index))
        } catch {
            recycle(buffer)
            throw .integrity("Chunk \(index) does not authenticate: the file was tampered with or is corrupt.")
        }
        guard record.count == length + ChunkRecords.overhead else {
            throw .integrity("Chunk \(index) is truncated.")
        }
        return buffer
    }

    /// The chunk's plaintext to change: the cached one, a clean one taken from the read cache, or loaded.
    private func cachedOrLoaded(_ index: UInt64, keys: FileKeys) throws(DataProtectionError) -> SecureBytes {
        if let cached = cache[index]?.buffer { return cached }
        if let clean = takeRead(index) { return clean }
        return try loadChunk(index, keys: keys)
    }

    // MARK: - The read cache

    /// Keeps `buffer` as chunk `index`'s clean plaintext, dropping the least recently used beyond the limit.
    private func keepRead(_ index: UInt64, _ buffer: SecureBytes) {
        if let old = takeRead(index) { recycle(old) }
        while readCache.count >= readCapacity, let oldest = readCache.min(by: { $0.value.used < $1.value.used })?.key,
              let evicted = takeRead(oldest) {
            recycle(evicted)
        }
        readClock += 1
        readCache[index] = (buffer, readClock)
    }

    private func touchRead(_ index: UInt64) {
        readClock += 1
        readCache[index]?.used = readClock
    }

    /// Removes chunk `index` from the read cache and returns its buffer (still holding the plaintext).
    private func takeRead(_ index: UInt64) -> SecureBytes? {
        readCache.removeValue(forKey: index)?.buffer
    }

    /// Lets the read cache hold up to `bytes` of chunks (never fewer than ``readCacheLimit``
    /// chunks, at most 4096): for files read at random in small pieces, like a database's.
    func reserveReadCache(bytes: Int) {
        lock.locked { readCapacity = max(readCapacity, min(bytes / header.chunkSize, 4096)) }
    }

    /// Wipes the read cache's chunks from `first` on (all by default).
    private func forgetReads(from first: UInt64 = 0) {
        for index in readCache.keys where index >= first {
            if let buffer = takeRead(index) { recycle(buffer) }
        }
    }

    /// A zeroed chunk buffer: a spare if there is one.
    private func emptyChunk() -> SecureBytes {
        spares.popLast() ?? SecureBytes(count: header.chunkSize)
    }

    /// Wipes `buffer` and keeps it as a spare (up to one cache's worth).
    private func recycle(_ buffer: SecureBytes) {
        buffer.wipe()
        if spares.count <= Self.cacheLimit { spares.append(buffer) }
    }

    // MARK: - Writing

    /// Writes `data` at `offset`; a gap past the end reads as zeros.
    func write(_ data: Data, at offset: UInt64) throws(DataProtectionError) {
        try lock.locked { () throws(DataProtectionError) in
            let keys = try requireKeys()
            guard !data.isEmpty else { return }
            // A full cache is flushed before this write touches anything: if that flush
            // fails, the write fails having changed nothing (the cache may then exceed the
            // limit by what one write caches, fewer than ``directChunks`` + 2 chunks).
            if cache.count >= Self.cacheLimit {
                try flushLocked(durable: false, keys: keys)
            }
            var rebased = data.startIndex == 0 ? Data() : Data(data)  // indices from 0: a copy of plaintext, wiped
            defer { Memory.wipe(&rebased) }
            let data = data.startIndex == 0 ? data : rebased
            let shift = UInt64(header.chunkShift)
            let chunkSize = UInt64(header.chunkSize)
            let end = offset + UInt64(data.count)
            // Whole chunks covered by a large write are sealed from `data` directly.
            let wholeStart = (offset + chunkSize - 1) >> shift, wholeEnd = end >> shift
            let direct = wholeEnd >= wholeStart + UInt64(Self.directChunks) ? wholeStart..<wholeEnd : nil
            var position = offset
            while position < end {
                let index = position >> shift
                if let direct, index == direct.lowerBound {
                    for chunk in direct { if let clean = takeRead(chunk) { recycle(clean) } }
                    // The chunk before (if partial) is cached and goes with the first commit.
                    var next = direct.lowerBound
                    while next < direct.upperBound {
                        let slice = next..<min(direct.upperBound, next + UInt64(Self.cacheLimit))
                        size = max(size, slice.upperBound << shift)
                        try flushLocked(durable: false, keys: keys, direct: (data, offset, slice))
                        next = slice.upperBound
                    }
                    position = direct.upperBound << shift
                    continue
                }
                let chunkStart = index << shift
                let from = Int(position - chunkStart)
                let to = Int(min(end, chunkStart + chunkSize) - chunkStart)
                let buffer: SecureBytes
                if let cached = cache[index] {
                    buffer = cached.buffer
                } else if let clean = takeRead(index) {
                    buffer = clean
                } else if from == 0 && (to == header.chunkSize || chunkStart + UInt64(to) >= size) {
                    buffer = emptyChunk()  // nothing of the old chunk survives
                } else {
                    buffer = try loadChunk(index, keys: keys)
                }
                let source = Int(position - offset)..<Int(position - offset) + (to - from)
                buffer.replaceBytes(at: from, with: data, range: source)
                cache[index] = (buffer, true)
                position = chunkStart + UInt64(to)
            }
            size = max(size, end)
        }
    }

    /// Sets the size: shrinking drops the tail (committed at once); growing reads as zeros.
    func truncate(to newSize: UInt64) throws(DataProtectionError) {
        try lock.locked { () throws(DataProtectionError) in
            let keys = try requireKeys()
            guard newSize < size else {
                size = newSize
                return
            }
            let keep = header.records(forLength: newSize)
            forgetReads(from: keep)
            for (index, entry) in cache where index >= keep {
                recycle(entry.buffer)
                cache.removeValue(forKey: index)
            }
            let tail = Int(newSize & UInt64(header.chunkSize - 1))
            if tail != 0 {
                let index = keep - 1
                let buffer = try cachedOrLoaded(index, keys: keys)
                buffer.zeroBytes(in: tail..<header.chunkSize)
                cache[index] = (buffer, true)
            }
            size = newSize
            // Commit a shrink at once: committed chunks past the new end must never reappear.
            try flushLocked(durable: false, keys: keys)
        }
    }

    /// Seals and commits cached writes; with `durable`, everything written so far survives a power cut.
    func flush(durable: Bool) throws(DataProtectionError) {
        try lock.locked { () throws(DataProtectionError) in
            guard !closed else { throw DataProtectionError(.handleClosed, "The file was closed.") }
            guard let keys else {
                precondition(cache.isEmpty, "cached writes without keys")
                return
            }
            try flushLocked(durable: durable, keys: keys)
        }
    }

    /// Seals and commits the cache; `direct` chunks (whole, inside the new length) are
    /// sealed from `data` (which starts at file offset `offset`) instead, whatever is cached for them.
    ///
    /// A non-durable flush that only appends (every record it writes lies past the
    /// committed length) is *deferred*: it writes the records in place and leaves the
    /// header alone, allocating ahead so that a long run of appends needs an ordering
    /// `fsync` only when the allocation doubles. The next durable flush (or any flush
    /// that needs a journal) commits them. A crash before then keeps the previous commit.
    private func flushLocked(
        durable: Bool, keys: FileKeys, direct: (data: Data, offset: UInt64, chunks: Range<UInt64>)? = nil
    ) throws(DataProtectionError) {
        let oldLength = header.length
        let newLength = size
        let hasDirty = cache.values.contains { $0.dirty }
        let bringToRest = durable && allocatedAhead
        guard hasDirty || direct != nil || oldLength != newLength || recordedLength != newLength || bringToRest else {
            if durable && unsynced {
                try file.synchronize()
                unsynced = false
            }
            if durable { spares.removeAll() }
            return
        }
        try requireGenerationsLeft()
        let chunkSize = UInt64(header.chunkSize)
        let oldCount = header.records(forLength: oldLength)
        let newCount = header.records(forLength: newLength)
        var indices = Set(cache.filter { $0.value.dirty && $0.key < newCount }.map(\.key))
        if newLength > recordedLength {
            // From the last partial record (resealed longer) to the new end; records already
            // written by a deferred append are kept unless the cache changed them.
            let recordedCount = header.records(forLength: recordedLength)
            let first = recordedLength % chunkSize == 0 ? recordedCount : recordedCount - 1
            indices.formUnion(first..<newCount)
        }
        if newLength < oldLength, newLength % chunkSize != 0 {
            indices.insert(newCount - 1)
        }
        if let direct {
            precondition(direct.chunks.upperBound <= newLength >> UInt64(header.chunkShift), "direct chunks past the end")
            indices.formUnion(direct.chunks)
        }
        // Committed chunks it changes (the old last partial one, when it grows) stay cached and
        // dirty until the commit: they would need the journal, which is what deferring avoids.
        let committedChanges = indices.filter { $0 < oldCount }
        let deferred = !durable && newLength >= oldLength && committedChanges.count <= Self.retainedLimit
            && !committedChanges.contains { direct?.chunks.contains($0) ?? false }
        if deferred {
            for index in committedChanges where cache[index]?.dirty != true {
                cache[index] = (try cachedOrLoaded(index, keys: keys), true)
            }
            indices.subtract(committedChanges)
        } else {
            // Until the commit is done, the committed chunks it overwrites stay in memory, dirty:
            // if the flush fails half way (an I/O error, a short `pwrite` that tears one on disk,
            // repaired from the journal at the next open or below), reads still see them and the
            // next flush seals them again.
            for index in committedChanges where cache[index]?.dirty != true && !(direct?.chunks.contains(index) ?? false) {
                cache[index] = (try cachedOrLoaded(index, keys: keys), true)
            }
        }
        // A shrink is in flight until its `ftruncate` is done: it allocates one record more than the
        // new length needs, so a crash before the truncation leaves a file the reader tolerates.
        var allocated = max(header.allocatedRecords, newLength < oldLength ? newCount + 1 : newCount)
        if allocated > header.allocatedRecords {
            if deferred {
                // Ahead: appends go on, and each allocation costs an ordering `fsync`.
                allocated = min(header.maximumRecords, max(allocated, header.allocatedRecords * 2))
                allocatedAhead = true
            }
            try writeHeader(length: oldLength, allocated: allocated, keys: keys)
            // Durable before the records it allows: after a power cut, records on disk
            // beyond what any header allocates would make the file unreadable. (Every
            // ordering `fsync` below is made for non-durable flushes too: after a power
            // cut the file must stay readable; `durable` only adds the last one.)
            try file.synchronize()
        }
        let shift = UInt64(header.chunkShift)
        /// Seals chunk `index` (`length` bytes) into `records` at `position`.
        func seal(_ index: UInt64, length: Int, into records: inout Data, at position: Int) throws(DataProtectionError) {
            let ad = header.chunkAssociatedData(index)
            if let direct, direct.chunks.contains(index) {
                let start = Int((index << shift) - direct.offset)
                ChunkRecords.seal(direct.data, range: start..<start + length, into: &records, at: position,
                                  key: keys.chunkKey, associatedData: ad)
            } else if let cached = cache[index]?.buffer ?? readCache[index]?.buffer {
                ChunkRecords.seal(cached, range: 0..<length, into: &records, at: position, key: keys.chunkKey, associatedData: ad)
            } else {
                let loaded = try loadChunk(index, keys: keys)
                ChunkRecords.seal(loaded, range: 0..<length, into: &records, at: position, key: keys.chunkKey, associatedData: ad)
                recycle(loaded)
            }
        }
        var overwrites: [FileJournal.Entry] = []
        var run = Data()  // up to `cacheLimit` records sealed in place, one `pwrite`
        var runBytes = 0
        var runStart: UInt64 = 0
        var runNext = UInt64.max
        func writeRun() throws(DataProtectionError) {
            guard runBytes > 0 else { return }
            let offset = header.recordOffset(runStart)
            try file.write(run, range: 0..<runBytes, at: offset)
            // The `fsync` that commits them then waits for little more than the last runs.
            WriteBehind.start(descriptor: file.descriptor.rawValue, offset: offset, count: Int64(runBytes))
        }
        for index in indices.sorted() {
            let length = header.chunkLength(index, length: newLength)
            if index < oldCount {
                var record = Data(count: length + ChunkRecords.overhead)
                try seal(index, length: length, into: &record, at: 0)
                overwrites.append(FileJournal.Entry(index: index, record: record))
                continue
            }
            // Past the committed end: written in place now, invisible until a header commits them.
            // Records sit at a fixed stride and only the last one can be short, so a
            // contiguous run of indices is a contiguous run of bytes.
            if index != runNext || runBytes + length + ChunkRecords.overhead > run.count {
                try writeRun()
                if run.isEmpty {
                    // Sized to the records past the committed end (one for a small file), at most a cache's worth.
                    let appended = indices.count { $0 >= oldCount }
                    run = Data(uninitializedCount: min(Self.cacheLimit, appended) * header.recordStride)
                }
                runBytes = 0
                runStart = index
            }
            try seal(index, length: length, into: &run, at: runBytes)
            runBytes += length + ChunkRecords.overhead
            runNext = index + 1
        }
        try writeRun()
        recordedLength = newLength
        if deferred {
            unsynced = true
            for (index, entry) in cache where !committedChanges.contains(index) {
                recycle(entry.buffer)
                cache.removeValue(forKey: index)
            }
            return
        }
        // A growth commits the file at rest (what an append allocated ahead, or a crash left
        // past the end, is cut first); a shrink stays in flight until its `ftruncate`.
        let committedAllocation = newLength >= oldLength ? newCount : allocated
        let journalPath = Self.journalPath(for: file.path)
        var journalDurable = false
        do throws(DataProtectionError) {
            try commit(overwrites: overwrites, journalPath: journalPath, journalDurable: &journalDurable, oldCount: oldCount,
                       newCount: newCount, oldLength: oldLength, newLength: newLength, allocated: allocated,
                       committedAllocation: committedAllocation, durable: durable, keys: keys)
        } catch {
            // Once the journal is durable the commit can only go forward: finish it now from the
            // journal (as the next open would), so that no torn record is ever read in this process.
            if journalDurable { try? recover() }
            throw error
        }
        wipeCache()
        if durable { spares.removeAll() }
    }

    /// The commit of a flush: the journal of overwritten records (durable first), the
    /// overwrites, the header; for a shrink the truncation and its closing header.
    private func commit(
        overwrites: [FileJournal.Entry], journalPath: FilePath, journalDurable: inout Bool, oldCount: UInt64, newCount: UInt64,
        oldLength: UInt64, newLength: UInt64, allocated: UInt64, committedAllocation: UInt64, durable: Bool, keys: FileKeys
    ) throws(DataProtectionError) {
        if !overwrites.isEmpty {
            // The journal, once durable, commits the new length when replayed: the records
            // past the old end must be durable before it, or a power cut could keep the
            // journal and lose them.
            if newCount > oldCount { try file.synchronize() }
            let journal = FileJournal(fileID: header.fileID, baseGeneration: header.generation, length: newLength,
                                      allocatedRecords: committedAllocation, entries: overwrites)
            let fileSystem = file.fileSystem
            try fileSystem.removeFile(at: journalPath)
            let descriptor = try fileSystem.createFile(at: journalPath)
            do throws(DataProtectionError) {
                try fileSystem.write(.data(journal.encoded(macKey: keys.macKey)), to: descriptor, path: journalPath)
                // Durable before the overwrites it protects: torn records are repaired from it.
                try fileSystem.synchronize(descriptor, path: journalPath)
            } catch {
                try? fileSystem.close(descriptor, path: journalPath)
                try? fileSystem.removeFile(at: journalPath)
                throw error
            }
            // Closed once, whatever close(2) reports: it releases the descriptor even when it fails, and a
            // second close would close whatever another thread opened under the same number meanwhile.
            do throws(DataProtectionError) {
                try fileSystem.close(descriptor, path: journalPath)
            } catch {
                try? fileSystem.removeFile(at: journalPath)
                throw error
            }
            try fileSystem.synchronizeDirectory(at: journalPath.removingLastComponent())
            journalDurable = true
            for entry in overwrites {
                try file.write(entry.record, at: header.recordOffset(entry.index))
            }
        }
        if newLength >= oldLength { try cutStaleRecords(length: newLength, allocated: committedAllocation) }
        // The records before the header that commits them.
        try file.synchronize()
        try writeHeader(length: newLength, allocated: committedAllocation, keys: keys)
        if newLength < oldLength {
            // The shrink's header before its `ftruncate`, the `ftruncate` before the header
            // that ends the shrink: in any other order a power cut could leave a size no
            // header accepts.
            try file.synchronize()
            try file.resize(to: header.physicalSize(forLength: newLength))
            try file.synchronize()
            try writeHeader(length: newLength, allocated: newCount, keys: keys)
        }
        allocatedAhead = false
        // The new state before the journal goes.
        if durable || !overwrites.isEmpty { try file.synchronize() }
        unsynced = !durable
        if !overwrites.isEmpty { try file.fileSystem.removeFile(at: journalPath) }
    }

    /// Before a header that brings the file to rest (`allocated` records, all needed by
    /// `length`): cuts what an interrupted growth may have left past the exact size, which
    /// at rest would make the new header fail its size check (and the reader fall back to
    /// an older slot that no longer matches the records).
    private func cutStaleRecords(length: UInt64, allocated: UInt64) throws(DataProtectionError) {
        guard allocated == header.records(forLength: length) else { return }
        let exact = header.physicalSize(forLength: length)
        if try file.size() > exact { try file.resize(to: exact) }
    }

    /// Writes the next header into the other slot.
    private func writeHeader(length: UInt64, allocated: UInt64, keys: FileKeys) throws(DataProtectionError) {
        var next = header
        next.generation = try Self.generation(after: next.generation)
        next.length = length
        next.allocatedRecords = allocated
        try writeSlot(next, keys: keys)
    }

    /// The generation after `generation`. A writer adds one per header, so 2^64 cannot be
    /// reached; only a forged header (or a harness that re-MACs one) gets there.
    private static func generation(after generation: UInt64) throws(DataProtectionError) -> UInt64 {
        guard generation < UInt64.max else {
            throw .integrity("The file's header generation is exhausted: it was tampered with.")
        }
        return generation + 1
    }

    /// Refuses, before anything is written, a change that would need more headers than
    /// the generation counter has left (at most 5: a flush's 3, a class change's 2).
    private func requireGenerationsLeft() throws(DataProtectionError) {
        guard header.generation <= UInt64.max - 5 else {
            throw .integrity("The file's header generation is exhausted: it was tampered with.")
        }
    }

    private func writeSlot(_ next: FileHeader, keys: FileKeys) throws(DataProtectionError) {
        let target = 1 - slot
        let encoded = next.encodedSlot(macKey: keys.macKey)
        try file.write(encoded, at: Int64(target * FileHeader.slotByteCount))
        header = next
        slot = target
        slotMAC = encoded.subdata(in: FileHeader.authenticatedByteCount..<FileHeader.authenticatedByteCount + 32)
    }

    /// Wipes the cached chunks (keeping their buffers as spares).
    private func wipeCache() {
        for entry in cache.values { recycle(entry.buffer) }
        cache.removeAll()
    }

    /// Wipes the cache and frees every chunk buffer.
    private func releaseBuffers() {
        wipeCache()
        forgetReads()
        spares.removeAll()
    }

    // MARK: - Class changes, key discard, close

    /// Rewraps the file key for `newClass` (content untouched), atomically:
    /// the new header goes to the other slot, then replaces the old one too, so
    /// the old class's wrap does not survive.
    func changeClass(to newClass: ProtectionClass) throws(DataProtectionError) {
        try lock.locked { () throws(DataProtectionError) in
            let keys = try requireKeys()
            try requireGenerationsLeft()
            try flushLocked(durable: true, keys: keys)
            var next = header
            next.protectionClass = newClass
            try keys.wrap(into: &next, device: device)
            next.generation = try Self.generation(after: next.generation)
            try writeSlot(next, keys: keys)
            try file.synchronize()
            next.generation = try Self.generation(after: next.generation)
            try writeSlot(next, keys: keys)
            try file.synchronize()
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
            let writer = try ProtectedFileWriter(target: file.path, place: place, storePath: storePath,
                                                 protectionClass: newClass, device: device)
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
            file.close()
            file = replacement
            let encoded = newHeader.encodedSlot(macKey: newKeys.macKey)
            header = newHeader
            slot = 0
            slotMAC = encoded.subdata(in: FileHeader.authenticatedByteCount..<FileHeader.authenticatedByteCount + 32)
            keys.wipe()
            self.keys = newKeys
            size = newHeader.length
            recordedLength = newHeader.length
            allocatedAhead = false
            unsynced = false
        }
    }

    /// Whether a durable flush has anything to do: cached writes, a size change, uncommitted
    /// records, or data not yet `fsync`ed.
    var hasPendingWrites: Bool {
        lock.locked { !closed && (unsynced || allocatedAhead || size != header.length || cache.values.contains { $0.dirty }) }
    }

    /// The class key is about to go: write out what is cached (durably, with the
    /// key still present), then wipe the file keys and plaintext. Class B keeps
    /// its key while open.
    ///
    /// Returns the wiped key and chunk buffers: freeing secure memory costs several
    /// system calls each, so the caller may release them later, off the lock's path.
    @discardableResult
    func classKeyWillBeDiscarded() -> [SecureBytes] {
        lock.locked { () -> [SecureBytes] in
            guard !closed, header.protectionClass != .completeUnlessOpen, let keys else { return [] }
            do throws(DataProtectionError) {
                try flushLocked(durable: true, keys: keys)
            } catch {
                device.logger.error("could not flush a protected file before its class key was discarded",
                                    metadata: ["error": "\(error.code.rawValue)"])
            }
            wipeCache()
            forgetReads()
            let retired = spares + [keys.fileKey, keys.chunkKey, keys.macKey]
            spares.removeAll()
            keys.wipe()
            self.keys = nil
            return retired
        }
    }

    /// Closes the file: flushes (durably) unless `flushing` is false (a crash), then wipes everything.
    func close(flushing: Bool) throws(DataProtectionError) {
        try lock.locked { () throws(DataProtectionError) in
            guard !closed else { return }
            defer {
                closed = true
                releaseBuffers()
                keys?.wipe()
                keys = nil
                file.close()
            }
            if flushing, let keys {
                try flushLocked(durable: true, keys: keys)
            }
        }
    }
}

