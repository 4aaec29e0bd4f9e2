import Foundation
import SodiumBridge
import SystemPackage

// Writing an open protected file and its flush protocol (Keys/file-format.md §8): writes
// go to the chunk cache; a flush seals the cache into records, in place past the committed
// end, through the file's journal over committed records, then commits them with a header
// slot, in the order that keeps every power cut recoverable. Every member runs under `lock`.
extension OpenFile {
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
    func flushLocked(
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
        // Committed chunks it changes (the old last partial one, when it grows) stay cached and dirty
        // until the commit: a deferred append leaves them for the commit that needs the journal, and a
        // flush that fails half way (an I/O error, a short `pwrite` that tears one on disk, repaired
        // from the journal at the next open or below) still reads them from memory and seals them
        // again next time. Chunks of a direct write are sealed from the caller's data instead.
        let committedChanges = indices.filter { $0 < oldCount }
        let deferred = !durable && newLength >= oldLength && committedChanges.count <= Self.retainedLimit
            && !committedChanges.contains { direct?.chunks.contains($0) ?? false }
        for index in committedChanges where cache[index]?.dirty != true && !(direct?.chunks.contains(index) ?? false) {
            cache[index] = (try cachedOrLoaded(index, keys: keys), true)
        }
        if deferred { indices.subtract(committedChanges) }
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
    func commit(
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
    func cutStaleRecords(length: UInt64, allocated: UInt64) throws(DataProtectionError) {
        guard allocated == header.records(forLength: length) else { return }
        let exact = header.physicalSize(forLength: length)
        if try file.size() > exact { try file.resize(to: exact) }
    }

    /// Writes the next header into the other slot.
    func writeHeader(length: UInt64, allocated: UInt64, keys: FileKeys) throws(DataProtectionError) {
        var next = header
        next.generation = try Self.generation(after: next.generation)
        next.length = length
        next.allocatedRecords = allocated
        try writeSlot(next, keys: keys)
    }

    /// The generation after `generation`. A writer adds one per header, so 2^64 cannot be
    /// reached; only a forged header (or a harness that re-MACs one) gets there.
    static func generation(after generation: UInt64) throws(DataProtectionError) -> UInt64 {
        guard generation < UInt64.max else {
            throw .integrity("The file's header generation is exhausted: it was tampered with.")
        }
        return generation + 1
    }

    /// Refuses, before anything is written, a change that would need more headers than
    /// the generation counter has left (at most 5: a flush's 3, a class change's 2).
    func requireGenerationsLeft() throws(DataProtectionError) {
        guard header.generation <= UInt64.max - 5 else {
            throw .integrity("The file's header generation is exhausted: it was tampered with.")
        }
    }

    func writeSlot(_ next: FileHeader, keys: FileKeys) throws(DataProtectionError) {
        let target = 1 - slot
        let encoded = next.encodedSlot(macKey: keys.macKey)
        try file.write(encoded, at: Int64(target * FileHeader.slotByteCount))
        header = next
        slot = target
        slotMAC = encoded.subdata(in: FileHeader.authenticatedByteCount..<FileHeader.authenticatedByteCount + 32)
    }

    /// Wipes the cached chunks (keeping their buffers as spares).
    func wipeCache() {
        for entry in cache.values { recycle(entry.buffer) }
        cache.removeAll()
    }

    /// Wipes the cache and frees every chunk buffer.
    func releaseBuffers() {
        wipeCache()
        forgetReads()
        spares.removeAll()
    }
}
