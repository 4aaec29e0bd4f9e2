import Foundation
import SodiumBridge
import SystemPackage

// Writing an open protected file, and what its flushes seal: writes go to the chunk cache;
// a flush chooses the chunks to seal into records (those past the committed end, those
// replacing committed ones) and hands them to ``CommittedFile``, whose flush protocol
// writes and commits them (Keys/file-format.md §8.2). Every member runs under `lock`.
extension OpenFile {
    // MARK: - Writing

    /// Writes `data` at `offset`; a gap past the end reads as zeros.
    func write(_ data: Data, at offset: UInt64) throws(DataProtectionError) {
        try lock.locked { () throws(DataProtectionError) in
            let keys = try requireKeys()
            guard !data.isEmpty else { return }
            try requireGrowthPossible(to: offset, plus: data.count)
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
                try requireGrowthPossible(to: newSize, plus: 0)
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

    /// Sets the size to zero with one durable header and keeps the records allocated, so that
    /// the next growth within the allocation needs no allocating header (Keys/file-format.md
    /// §8.2, "Emptying in place"). A truncation to zero cuts the file instead, in three ordered
    /// steps; this is for a file refilled soon after (SQLite's rollback journal between
    /// transactions).
    func empty() throws(DataProtectionError) {
        try lock.locked { () throws(DataProtectionError) in
            let keys = try requireKeys()
            forgetReads()
            wipeCache()
            size = 0
            guard header.length != 0 || recordedLength != 0 || disk.unsynced else { return }
            try disk.requireGenerationsLeft()
            recordedLength = 0
            try disk.empty(keys: keys)
        }
    }

    /// Refuses, before anything changes, a size of `offset + count` past the format's maximum
    /// (`invalidArgument`) or a growth the file system cannot hold (`ioFailure`: every chunk
    /// of the gap is written, sealed zeros): a caller's number never aborts the process, and a
    /// full disk is not found out only after filling it. Small growths skip the free-space query.
    func requireGrowthPossible(to offset: UInt64, plus count: Int) throws(DataProtectionError) {
        guard offset <= FileHeader.maximumLength, UInt64(count) <= FileHeader.maximumLength - offset else {
            throw .invalidArgument(
                "A protected file holds at most \(FileHeader.maximumLength) bytes (256 TiB); this would make it \(offset) + \(count) bytes.")
        }
        let end = offset + UInt64(count)
        let from = header.records(forLength: max(recordedLength, header.length))
        let to = header.records(forLength: end)
        guard to > from, to - from >= Self.spaceCheckRecords else { return }
        let needed = (to - from).multipliedReportingOverflow(by: UInt64(header.recordStride))
        guard let available = try file.fileSystem.availableCapacity(of: file.descriptor, path: file.path) else { return }
        if needed.overflow || needed.partialValue > available {
            throw DataProtectionError(.ioFailure,
                "Not enough free space: a size of \(end) bytes needs \(needed.overflow ? "more than 2^64" : "\(needed.partialValue)") more bytes on disk, and \(available) are available.")
        }
    }

    /// A growth by at most this many records goes through the journal when it needs one anyway
    /// or would need an allocating header (each record is then written twice, and two or three
    /// `fsync`s are saved: the allocating header's, the records' before the journal, and a
    /// pending chain's before that header): 256 KiB of records, and at least 8 (64 records of
    /// 4 KiB, a SQLite WAL commit of some 60 pages; 16 of 16 KiB).
    var journaledGrowthLimit: Int { max(Self.journaledGrowthMinimum, Self.journaledGrowthBytes >> Int(header.chunkShift)) }
    static let journaledGrowthBytes = 256 << 10
    static let journaledGrowthMinimum = 8

    /// Growths of at least this many records (64 MiB of 16 KiB chunks) check the free space first.
    static let spaceCheckRecords: UInt64 = 4096

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
    func flushLocked(
        durable: Bool, keys: FileKeys, direct: (data: Data, offset: UInt64, chunks: Range<UInt64>)? = nil
    ) throws(DataProtectionError) {
        let oldLength = header.length
        let newLength = size
        let hasDirty = cache.values.contains { $0.dirty }
        let bringToRest = durable && disk.allocatedAhead
        guard hasDirty || direct != nil || oldLength != newLength || recordedLength != newLength || bringToRest else {
            if durable {
                try disk.makeDurable()
                releaseSpares()
            }
            return
        }
        try disk.requireGenerationsLeft()
        let chunkSize = UInt64(header.chunkSize)
        let oldCount = header.records(forLength: oldLength)
        let newCount = header.records(forLength: newLength)
        // The chunks to seal besides the tail's range, in increasing order, each once (a few:
        // an array, not a set, whose hashing and allocations a commit of one page would pay).
        var indices: [UInt64] = []
        indices.reserveCapacity(cache.count + 2 + (direct?.chunks.count ?? 0))
        for (index, entry) in cache where entry.dirty && index < newCount { indices.append(index) }
        // The records past the committed end from the recorded end on: a range, not a list (a
        // truncation far past the end makes millions of zero chunks, sealed a run at a time).
        var tail: Range<UInt64> = newCount..<newCount
        if newLength > recordedLength {
            // From the last partial record (resealed longer) to the new end; records already
            // written by a deferred append are kept unless the cache changed them.
            let recordedCount = header.records(forLength: recordedLength)
            let first = recordedLength % chunkSize == 0 ? recordedCount : recordedCount - 1
            if first < oldCount { indices.append(first) }  // the old last partial chunk, regrown
            tail = min(max(first, oldCount), newCount)..<newCount
        }
        if newLength < oldLength, newLength % chunkSize != 0 {
            indices.append(newCount - 1)
        }
        if let direct {
            precondition(direct.chunks.upperBound <= newLength >> UInt64(header.chunkShift), "direct chunks past the end")
            indices.append(contentsOf: direct.chunks)
        }
        indices.sort()
        var kept = 0
        for position in indices.indices {
            let index = indices[position]
            guard !tail.contains(index), kept == 0 || indices[kept - 1] != index else { continue }
            indices[kept] = index
            kept += 1
        }
        indices.removeSubrange(kept...)
        // Committed chunks it changes (the old last partial one, when it grows) stay cached and dirty
        // until the commit: a deferred append leaves them for the commit that needs the journal, and a
        // flush that fails half way (an I/O error, a short `pwrite` that tears one on disk, repaired
        // from the journal at the next open or below) still reads them from memory and seals them
        // again next time. Chunks of a direct write are sealed from the caller's data instead.
        let committedChanges = indices.prefix { $0 < oldCount }
        let deferred = !durable && newLength >= oldLength && committedChanges.count <= Self.retainedLimit
            && !committedChanges.contains { direct?.chunks.contains($0) ?? false }
        for index in committedChanges where cache[index]?.dirty != true && !(direct?.chunks.contains(index) ?? false) {
            cache[index] = (try cachedOrLoaded(index, keys: keys), true)
        }
        if deferred { indices.removeFirst(committedChanges.count) }
        // A shrink is in flight until its `ftruncate` is done: it allocates one record more than the
        // new length needs, so a crash before the truncation leaves a file the reader tolerates.
        var allocated = max(header.allocatedRecords, newLength < oldLength ? newCount + 1 : newCount)
        let appended = indices.count { $0 >= oldCount } + tail.count
        // A small growth that needs a journal anyway (it changes committed chunks), an
        // allocating header, or an `fsync` (a durable flush) puts its new records in the journal
        // too, and writes them in place only once the journal is durable: no allocating header,
        // no `fsync` of the records before the journal, and the commit chained (one `fsync`;
        // Keys/file-format.md §8.2, "Journaled growth", "Chained commits"). Not with records of
        // an earlier deferred append on disk, which the journal's length would commit.
        let journaledGrowth = !deferred && !disk.unlinked && appended > 0 && appended <= journaledGrowthLimit
            && recordedLength == oldLength && !disk.allocatedAhead
            && (!committedChanges.isEmpty || allocated > header.allocatedRecords || durable)
        if allocated > header.allocatedRecords && !journaledGrowth {
            if deferred {
                // Ahead: appends go on, and each allocation costs an ordering `fsync`.
                allocated = min(header.maximumRecords, max(allocated, header.allocatedRecords * 2))
            }
            try disk.allocate(allocated, ahead: deferred, keys: keys)
        }
        let shift = UInt64(header.chunkShift)
        var nonces = ChunkNonces(count: min(indices.count + tail.count, Self.cacheLimit))
        /// Seals chunk `index` (`length` bytes) into `records` at `position`.
        func seal(_ index: UInt64, length: Int, into records: inout Data, at position: Int) throws(DataProtectionError) {
            let ad = header.chunkAssociatedData(index)
            if let direct, direct.chunks.contains(index) {
                let start = Int((index << shift) - direct.offset)
                ChunkRecords.seal(direct.data, range: start..<start + length, into: &records, at: position,
                                  key: keys.chunkKey, associatedData: ad, nonces: &nonces)
            } else if let cached = cache[index]?.buffer ?? readCache[index] {
                ChunkRecords.seal(cached, range: 0..<length, into: &records, at: position, key: keys.chunkKey, associatedData: ad,
                                  nonces: &nonces)
            } else {
                let loaded = try loadChunk(index, keys: keys)
                ChunkRecords.seal(loaded, range: 0..<length, into: &records, at: position, key: keys.chunkKey, associatedData: ad,
                                  nonces: &nonces)
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
            try disk.writeRecords(run, byteCount: runBytes, from: runStart)
        }
        func process(_ index: UInt64) throws(DataProtectionError) {
            let length = header.chunkLength(index, length: newLength)
            if index < oldCount || journaledGrowth {
                var record = Data(uninitializedCount: length + ChunkRecords.overhead)  // sealed over whole
                try seal(index, length: length, into: &record, at: 0)
                overwrites.append(FileJournal.Entry(index: index, record: record))
                return
            }
            // Past the committed end: written in place now, invisible until a header commits them.
            // Records sit at a fixed stride and only the last one can be short, so a
            // contiguous run of indices is a contiguous run of bytes.
            if index != runNext || runBytes + length + ChunkRecords.overhead > run.count {
                try writeRun()
                if run.isEmpty {
                    // Sized to the records past the committed end (one for a small file), at most a cache's worth.
                    run = Data(uninitializedCount: min(Self.cacheLimit, appended) * header.recordStride)
                }
                runBytes = 0
                runStart = index
            }
            try seal(index, length: length, into: &run, at: runBytes)
            runBytes += length + ChunkRecords.overhead
            runNext = index + 1
        }
        // In index order: the listed chunks (sorted above) merged with the tail's range.
        var next = 0
        var tailNext = tail.lowerBound
        while next < indices.count || tailNext < tail.upperBound {
            if next < indices.count && (tailNext == tail.upperBound || indices[next] < tailNext) {
                try process(indices[next])
                next += 1
            } else {
                try process(tailNext)
                tailNext += 1
            }
        }
        try writeRun()
        recordedLength = newLength
        if deferred {
            disk.deferredRecordsWritten()
            for (index, entry) in cache where !committedChanges.contains(index) {
                recycle(entry.buffer)
                cache.removeValue(forKey: index)
            }
            return
        }
        do throws(DataProtectionError) {
            try disk.commit(overwrites: overwrites, length: newLength, allocated: allocated, appendedInPlace: !journaledGrowth,
                            durable: durable, keys: keys)
        } catch {
            // The commit may have been finished from its journal: what was read before is not trusted.
            forgetReads()
            throw error
        }
        // The last chunk, when partial, stays readable as committed, without opening its record
        // again: the next append regrows it (SQLite's WAL at every commit). Not after a flush of
        // a direct write: what is cached for the chunks of a large write is stale (they are sealed
        // from the caller's data, in slices, and a later slice's chunk may be cached in this one).
        // The others go back to the spares, for the next writes (a buffer kept costs a new one).
        let partial = direct == nil && newLength % chunkSize != 0 ? newCount - 1 : nil
        for (index, entry) in cache {
            if index == partial { keepRead(index, entry.buffer) } else { recycle(entry.buffer) }
        }
        cache.removeAll(keepingCapacity: true)  // the next commit's chunks go in the same table
        if durable { releaseSpares() }
    }

    /// Wipes the cached chunks (keeping their buffers as spares).
    func wipeCache() {
        for entry in cache.values { recycle(entry.buffer) }
        cache.removeAll()
    }

    /// Wipes the cache and gives every chunk buffer back.
    func releaseBuffers() {
        wipeCache()
        forgetReads()
        releaseSpares()
    }

    /// Gives the spare (wiped) buffers back to the process's pool.
    func releaseSpares() {
        ChunkBufferPool.give(spares)
        spares.removeAll()
    }
}
