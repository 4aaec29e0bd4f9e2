import Foundation
import SodiumBridge
import SystemPackage

// Reading an open protected file: from the write cache, the read cache of clean chunks, or
// runs of records decrypted straight into the caller's buffer. Every member runs under
// `lock` (the callers' `lock.locked`), as in OpenFile.swift.
extension OpenFile {
    // MARK: - Reading

    /// Reads up to `count` bytes at `offset` (fewer at the end of the file).
    func read(at offset: UInt64, count: Int) throws(DataProtectionError) -> Data {
        try lock.locked { () throws(DataProtectionError) -> Data in
            try readLocked(at: offset, count: count, keys: try requireKeys())
        }
    }

    /// Reads up to `destination.count` bytes at `offset` straight into `destination` (fewer
    /// at the end of the file) and returns how many: no copy of the plaintext on the way.
    /// Every chunk it touches stays in the read cache: for a database's page reads.
    func read(at offset: UInt64, into destination: UnsafeMutableRawBufferPointer) throws(DataProtectionError) -> Int {
        try lock.locked { () throws(DataProtectionError) -> Int in
            let keys = try requireKeys()
            guard offset < size, !destination.isEmpty else { return 0 }
            let end = min(size, offset + UInt64(destination.count))
            let shift = UInt64(header.chunkShift)
            let recordedCount = header.records(forLength: recordedLength)
            var position = offset
            while position < end {
                let index = position >> shift
                let chunkStart = index << shift
                let upTo = min(end, chunkStart + UInt64(header.chunkSize))
                let range = Int(position - chunkStart)..<Int(upTo - chunkStart)
                let at = Int(position - offset)
                if let inMemory = chunkInMemory(index) {
                    inMemory.copyBytes(in: range, to: destination, at: at)
                } else if index >= recordedCount {
                    // Past the recorded end and not cached: zeros (a gap to be filled at flush).
                    UnsafeMutableRawBufferPointer(rebasing: destination[at..<at + range.count]).initializeMemory(as: UInt8.self, repeating: 0)
                } else {
                    let loaded = try loadChunk(index, keys: keys)
                    loaded.copyBytes(in: range, to: destination, at: at)
                    keepRead(index, loaded)
                }
                position = upTo
            }
            return Int(end - offset)
        }
    }

    /// Chunk `index`'s plaintext if it is in memory: written and not yet flushed, or clean in
    /// the read cache (which counts the use).
    func chunkInMemory(_ index: UInt64) -> SecureBytes? {
        if let cached = cache[index]?.buffer { return cached }
        guard let clean = readCache[index] else { return nil }
        touchRead(index)
        return clean
    }

    func readLocked(at offset: UInt64, count: Int, keys: FileKeys) throws(DataProtectionError) -> Data {
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
            if let inMemory = chunkInMemory(index) {
                let upTo = min(end, chunkStart + UInt64(header.chunkSize))
                // Straight into `out`: a temporary copy would be plaintext left behind.
                inMemory.copyBytes(in: Int(position - chunkStart)..<Int(upTo - chunkStart), into: &out, at: Int(position - offset))
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

    func decryptRun(
        _ run: ClosedRange<UInt64>, keys: FileKeys, into out: inout Data, offset: UInt64, from position: UInt64, to end: UInt64
    ) throws(DataProtectionError) {
        let start = header.recordOffset(run.lowerBound)
        let lastLength = recordedChunkLength(run.upperBound)
        let byteCount = Int(header.recordOffset(run.upperBound) - start) + lastLength + ChunkRecords.overhead
        let records = try disk.readRecords(at: start, count: byteCount)
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
    func recordedChunkLength(_ index: UInt64) -> Int {
        header.chunkLength(index, length: index < header.records(forLength: header.length) ? header.length : recordedLength)
    }

    /// Loads recorded chunk `index` into a new full-size buffer (zeros past the recorded end).
    func loadChunk(_ index: UInt64, keys: FileKeys) throws(DataProtectionError) -> SecureBytes {
        let buffer = emptyChunk()
        guard index < header.records(forLength: recordedLength) else { return buffer }
        let length = recordedChunkLength(index)
        let record = try disk.readRecords(at: header.recordOffset(index), count: length + ChunkRecords.overhead)
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
    func cachedOrLoaded(_ index: UInt64, keys: FileKeys) throws(DataProtectionError) -> SecureBytes {
        if let cached = cache[index]?.buffer { return cached }
        if let clean = takeRead(index) { return clean }
        return try loadChunk(index, keys: keys)
    }

    // MARK: - The read cache

    /// Keeps `buffer` as chunk `index`'s clean plaintext, dropping the least recently used beyond the limit.
    func keepRead(_ index: UInt64, _ buffer: SecureBytes) {
        if let old = takeRead(index) { recycle(old) }
        while readCache.count >= readCapacity, let evicted = readCache.removeOldest() {
            recycle(evicted)
        }
        readCache.insert(index, buffer)
    }

    func touchRead(_ index: UInt64) {
        readCache.touch(index)
    }

    /// Removes chunk `index` from the read cache and returns its buffer (still holding the plaintext).
    func takeRead(_ index: UInt64) -> SecureBytes? {
        readCache.remove(index)
    }

    /// Lets the read cache hold up to `bytes` of chunks (never fewer than ``readCacheLimit``
    /// chunks, at most 4096): for files read at random in small pieces, like a database's.
    func reserveReadCache(bytes: Int) {
        lock.locked { readCapacity = max(readCapacity, min(bytes / header.chunkSize, 4096)) }
    }

    /// Wipes the read cache's chunks from `first` on (all by default).
    func forgetReads(from first: UInt64 = 0) {
        for index in readCache.indices where index >= first {
            if let buffer = takeRead(index) { recycle(buffer) }
        }
    }

    /// A zeroed chunk buffer: a spare if there is one.
    func emptyChunk() -> SecureBytes {
        spares.popLast() ?? ChunkBufferPool.take(count: header.chunkSize)
    }

    /// Wipes `buffer` and keeps it as a spare (up to one cache's worth).
    func recycle(_ buffer: SecureBytes) {
        buffer.wipe()
        if spares.count <= Self.cacheLimit { spares.append(buffer) }
    }
}
