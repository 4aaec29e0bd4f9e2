import Foundation
import SodiumBridge
import SystemPackage

/// Writes a new protected file from a stream of plaintext, with constant memory:
/// chunk records go to a temporary file beside the target as they fill, the
/// header last; ``commit()`` makes it durable and renames it into place.
final class ProtectedFileWriter {
    /// Records sealed before one `pwrite`.
    static let batchRecords = 64

    /// Where the file goes on disk, and its store path (for messages).
    let target: FilePath
    let storePath: StorePath
    private let temporary: FilePath
    private let file: DataFileDescriptor
    private var header: FileHeader
    private let keys: FileKeys
    private let chunk: SecureBytes
    private var filled = 0
    private var index: UInt64 = 0
    /// Records sealed in place, `batchBytes` of them used.
    private var batch = Data()
    private var batchBytes = 0
    private var batchStart: UInt64 = 0
    private var finished = false

    /// Starts a file of `protectionClass` to replace (or create) `target`.
    ///
    /// - Throws: `protectedDataUnavailable` when a file of that class cannot be created now.
    init(target: FilePath, storePath: StorePath, protectionClass: ProtectionClass, device: Device, creationDate: Date = Date()) throws(DataProtectionError) {
        (header, keys) = try OpenFile.newHeader(protectionClass: protectionClass, device: device, now: creationDate)
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
        chunk = SecureBytes(count: header.chunkSize)
    }

    deinit {
        if !finished {
            file.close()
            try? file.fileSystem.removeFile(at: temporary)
        }
        chunk.wipe()
        keys.wipe()
    }

    /// Appends plaintext.
    func append(_ data: Data) throws(DataProtectionError) {
        let data = data.startIndex == 0 ? data : Data(data)  // indices from 0
        var position = 0
        while position < data.count {
            if filled == 0, data.count - position >= header.chunkSize {
                // A whole chunk: sealed from the caller's data, without a copy.
                try seal(data, range: position..<position + header.chunkSize)
                position += header.chunkSize
                continue
            }
            let count = min(header.chunkSize - filled, data.count - position)
            chunk.replaceBytes(at: filled, with: data, range: position..<position + count)
            filled += count
            position += count
            if filled == header.chunkSize { try sealChunk() }
        }
    }

    private func sealChunk() throws(DataProtectionError) {
        try seal(nil, range: 0..<filled)
        chunk.zeroBytes(in: 0..<filled)  // bytes past `filled` are still zero
        filled = 0
    }

    /// Seals chunk `index` from `data[range]`, or from the chunk buffer when `data` is nil, into the batch.
    private func seal(_ data: Data?, range: Range<Int>) throws(DataProtectionError) {
        if batch.isEmpty { batch = Data(uninitializedCount: Self.batchRecords * header.recordStride) }
        if batchBytes == 0 { batchStart = index }
        let ad = header.chunkAssociatedData(index)
        if let data {
            ChunkRecords.seal(data, range: range, into: &batch, at: batchBytes, key: keys.chunkKey, associatedData: ad)
        } else {
            ChunkRecords.seal(chunk, range: range, into: &batch, at: batchBytes, key: keys.chunkKey, associatedData: ad)
        }
        batchBytes += range.count + ChunkRecords.overhead
        header.length += UInt64(range.count)
        index += 1
        if batchBytes + header.recordStride > batch.count { try writeBatch() }
    }

    private func writeBatch() throws(DataProtectionError) {
        guard batchBytes > 0 else { return }
        try file.write(batch, range: 0..<batchBytes, at: header.recordOffset(batchStart))
        batchBytes = 0
    }

    /// Seals the tail, writes the header, `fsync`s, renames over the target and `fsync`s the directory.
    func commit() throws(DataProtectionError) {
        if filled > 0 { try sealChunk() }
        try writeBatch()
        header.allocatedRecords = index
        try file.write(header.encodedSlot(macKey: keys.macKey) + Data(count: FileHeader.slotByteCount), at: 0)
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
        try commit()
        return try OpenFile.adopt(at: target, header: header, keys: FileKeys(fileKey: SecureBytes(copying: keys.fileKey)), device: device)
    }

    /// The plaintext length written so far.
    var length: UInt64 { header.length + UInt64(filled) }
}
