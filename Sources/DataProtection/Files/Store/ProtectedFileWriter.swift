import Dispatch
import Foundation
import SodiumBridge
import SystemPackage

/// Writes a new protected file from a stream of plaintext, with constant memory:
/// chunk records go to a temporary file beside the target as they fill, the
/// header last; ``commit()`` makes it durable and renames it into place.
///
/// Chunks are gathered into batches of ``batchRecords``; a batch is sealed on
/// every core (``ChunkBatch``) and written by a background queue while the next
/// batch is gathered and sealed (two record buffers, so at most two batches are
/// in memory). Whole chunks are sealed straight from the caller's `Data`;
/// pieces smaller than a chunk are gathered in secure memory first.
final class ProtectedFileWriter {
    /// Records sealed together and written with one `pwrite`.
    static let batchRecords = 64

    /// Where the file goes on disk, and its store path (for messages).
    let target: FilePath
    let storePath: StorePath
    private let temporary: FilePath
    private let file: DataFileDescriptor
    private var header: FileHeader
    private let keys: FileKeys
    /// The tag binding the new file to the target's place (both place records).
    private let placeTag: Data
    /// The chunks of the batch being gathered (all whole chunks).
    private var pending: [ChunkPlaintext] = []
    /// Chunk buffers for pieces smaller than a chunk: `staging[pending.count]` is being filled.
    private var staging: [SecureBytes] = []
    /// Bytes in the chunk being filled: in its staging buffer, or in `tail`.
    private var filled = 0
    /// The chunk being filled while it is still one piece of a caller's data.
    private var tail: (Data, Range<Int>)?
    /// Chunks handed to batches so far.
    private var index: UInt64 = 0
    private let output: RecordOutput
    private var finished = false
    /// Buffers of the store's own plaintext to zero once the pending chunks are sealed.
    private var toWipe: [Data] = []

    /// Starts a file of `protectionClass` to replace (or create) `target`, which is `place`,
    /// in chunks of `2^chunkShift` bytes.
    ///
    /// - Throws: `protectedDataUnavailable` when a file of that class cannot be created now.
    init(
        target: FilePath, place: Place, storePath: StorePath, protectionClass: ProtectionClass,
        chunkShift: UInt8 = ProtectedStore.defaultChunkShift, device: Device, creationDate: Date = Date()
    ) throws(DataProtectionError) {
        (header, keys) = try OpenFile.newHeader(protectionClass: protectionClass, chunkShift: chunkShift, device: device, now: creationDate)
        do throws(DataProtectionError) {
            placeTag = try place.tag(of: .file, id: header.fileID, device: device)
        } catch {
            keys.wipe()
            throw error
        }
        self.target = target
        self.storePath = storePath
        let name = target.lastComponent?.string ?? "file"
        temporary = target.removingLastComponent().appending(
            AtomicFileWriter.temporaryPrefix + String(name.prefix(32)) + "-" + Base64URL.encode(Random.bytes(count: 6)))
        do throws(DataProtectionError) {
            file = try DataFileDescriptor.create(temporary, fileSystem: device.fileSystem)
        } catch {
            keys.wipe()
            throw error
        }
        output = RecordOutput(file: file)
    }

    deinit {
        output.waitUntilIdle()
        if !finished {
            file.close()
            try? file.fileSystem.removeFile(at: temporary)
        }
        for buffer in staging { buffer.wipe() }
        wipeUsedBuffers(always: true)
        keys.wipe()
    }

    /// Appends plaintext. With `wipingAfterUse`, `data` is a buffer of the store's own,
    /// zeroed once its chunks are sealed (a batch may keep it until then).
    func append(_ data: Data, wipingAfterUse: Bool = false) throws(DataProtectionError) {
        if wipingAfterUse { toWipe.append(data) }
        // No re-based copy of a slice (which would be plaintext left behind): every use of
        // `data` below goes through `withUnsafeBytes`, whose indices start at 0 for a slice too.
        let chunkSize = header.chunkSize
        var position = 0
        while position < data.count {
            if filled == 0, data.count - position >= chunkSize {
                // A whole chunk: sealed from the caller's data, without a copy.
                pending.append(.data(data, position..<position + chunkSize))
                position += chunkSize
            } else if filled == 0 {
                // Less than a chunk, perhaps the last piece (a small file): keep a reference to the
                // caller's bytes (a `Data` cannot change under us), copied only if more follows.
                tail = (data, position..<data.count)
                filled = data.count - position
                position = data.count
            } else {
                let buffer = stagingBuffer()
                let count = min(chunkSize - filled, data.count - position)
                buffer.replaceBytes(at: filled, with: data, range: position..<position + count)
                filled += count
                position += count
                if filled == chunkSize {
                    pending.append(.secure(buffer, 0..<chunkSize))
                    filled = 0
                }
            }
            if pending.count == Self.batchRecords { try sealPending(last: false) }
        }
    }

    /// Zeroes the store's own buffers once nothing refers to them any more (no chunk
    /// pending, no tail); `always` at the end of the writer's life.
    private func wipeUsedBuffers(always: Bool = false) {
        guard always || (pending.isEmpty && tail == nil) else { return }
        for index in toWipe.indices { Memory.wipe(&toWipe[index]) }
        toWipe.removeAll()
    }

    /// The staging buffer of the chunk being filled, holding the `filled` bytes gathered so far.
    private func stagingBuffer() -> SecureBytes {
        while staging.count <= pending.count { staging.append(SecureBytes(count: header.chunkSize)) }
        let buffer = staging[pending.count]
        if let (data, range) = tail {
            buffer.replaceBytes(at: 0, with: data, range: range)
            tail = nil
        }
        return buffer
    }

    /// Seals the gathered chunks (on every core) and hands them to the output.
    private func sealPending(last: Bool) throws(DataProtectionError) {
        guard !pending.isEmpty else { return }
        let stride = header.recordStride
        let offsets = (0..<pending.count).map { $0 * stride }
        let associatedData = (0..<pending.count).map { header.chunkAssociatedData(index + UInt64($0)) }
        let plaintextBytes = pending.reduce(0) { $0 + $1.count }
        let byteCount = plaintextBytes + pending.count * ChunkRecords.overhead
        // A file of a single batch (most small files) gets a buffer of its size, written on this thread.
        let single = last && index == 0
        let buffer = try output.acquire(capacity: single ? byteCount : Self.batchRecords * stride)
        ChunkBatch.seal(pending, associatedData: associatedData, into: &buffer.data, at: offsets, key: keys.chunkKey)
        // Plaintext gathered in secure memory does not outlive its sealing.
        for case .secure(let staged, let range) in pending { staged.zeroBytes(in: range) }
        output.submit(buffer, count: byteCount, at: header.recordOffset(index), synchronously: single)
        header.length += UInt64(plaintextBytes)
        index += UInt64(pending.count)
        pending.removeAll(keepingCapacity: true)
        wipeUsedBuffers()
    }

    /// Seals the tail, writes the header, `fsync`s, renames over the target and `fsync`s the directory.
    func commit() throws(DataProtectionError) {
        if filled > 0 {
            if let (data, range) = tail {
                pending.append(.data(data, range))
                tail = nil
            } else {
                pending.append(.secure(stagingBuffer(), 0..<filled))
            }
            filled = 0
        }
        try sealPending(last: true)
        wipeUsedBuffers()
        try output.finish()
        header.allocatedRecords = index
        try file.write(FilePlaceRecords.newRegion(slot: header.encodedSlot(macKey: keys.macKey), tag: placeTag), at: 0)
        try file.synchronize()
        file.close()
        finished = true
        let fileSystem = file.fileSystem
        do throws(DataProtectionError) {
            try fileSystem.rename(temporary, to: target)
        } catch {
            try? fileSystem.removeFile(at: temporary)
            throw error
        }
        try fileSystem.synchronizeDirectory(at: target.removingLastComponent())
    }

    /// Commits, then opens the new file with the keys it was written with.
    func commitAndOpen(device: Device) throws(DataProtectionError) -> OpenFile {
        let (header, keys) = try commitTakingKeys()
        return try OpenFile.adopt(at: target, header: header, keys: keys, device: device)
    }

    /// Commits, then gives the header and (a copy of) the keys the file was written with.
    func commitTakingKeys() throws(DataProtectionError) -> (FileHeader, FileKeys) {
        try commit()
        return (header, FileKeys(fileKey: keys.fileKey))
    }

    /// The plaintext length written so far.
    var length: UInt64 { header.length + UInt64(pending.reduce(0) { $0 + $1.count } + filled) }
}

/// Writes sealed batches of records with `pwrite` on a serial background queue,
/// so that the next batch is sealed meanwhile. Two record buffers alternate: a
/// third batch waits until the first one's write is done. The first write error
/// is kept, later batches are dropped, and ``finish()`` throws it.
private final class RecordOutput: @unchecked Sendable {
    /// A reusable record buffer (ciphertext only).
    final class Buffer: @unchecked Sendable {
        var data: Data
        init(capacity: Int) { data = Data(uninitializedCount: capacity) }
    }

    private let file: DataFileDescriptor
    private let queue = DispatchQueue(label: "DataProtection.ProtectedFileWriter", qos: .userInitiated)
    /// Buffers not being written.
    private let free = DispatchSemaphore(value: 2)
    private var buffers: [Buffer] = []
    private var next = 0
    private let lock = NSLock()
    private var failure: DataProtectionError?

    init(file: DataFileDescriptor) {
        self.file = file
    }

    /// A buffer of at least `capacity` bytes, once one is free; fails fast after a write error.
    func acquire(capacity: Int) throws(DataProtectionError) -> Buffer {
        free.wait()
        if let failure = lock.locked({ failure }) {
            free.signal()
            throw failure
        }
        if buffers.count <= next { buffers.append(Buffer(capacity: capacity)) }
        if buffers[next].data.count < capacity { buffers[next] = Buffer(capacity: capacity) }
        return buffers[next]
    }

    /// Writes `buffer.data[0..<count]` at `offset` (in the background unless `synchronously`),
    /// then frees the buffer.
    func submit(_ buffer: Buffer, count: Int, at offset: Int64, synchronously: Bool) {
        next = 1 - next
        let work: @Sendable () -> Void = { [file] in
            if self.lock.locked({ self.failure == nil }) {
                do throws(DataProtectionError) {
                    try file.write(buffer.data, range: 0..<count, at: offset)
                    // The final fsync then waits for little more than the last batches. Not for a
                    // file of one batch: its header, written next, shares the first page, which
                    // would then wait for this write-back and go to the disk twice.
                    if !synchronously {
                        WriteBehind.start(descriptor: file.descriptor.rawValue, offset: offset, count: Int64(count))
                    }
                } catch {
                    self.lock.locked { if self.failure == nil { self.failure = error } }
                }
            }
            self.free.signal()
        }
        if synchronously {
            waitUntilIdle()
            work()
        } else {
            queue.async(execute: work)
        }
    }

    /// Waits for every submitted write, then throws the first write error, if any.
    func finish() throws(DataProtectionError) {
        waitUntilIdle()
        if let failure = lock.locked({ failure }) { throw failure }
    }

    /// Waits for every submitted write.
    func waitUntilIdle() {
        queue.sync {}
    }
}
