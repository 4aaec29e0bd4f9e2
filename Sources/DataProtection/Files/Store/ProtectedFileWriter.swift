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
    private var batch = Data()
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
            file = try DataFileDescriptor.create(temporary)
        } catch {
            keys.wipe()
            throw error
        }
        chunk = SecureBytes(count: header.chunkSize)
    }

    deinit {
        if !finished {
            file.close()
            try? PosixFileSystem().removeFile(at: temporary)
        }
        chunk.wipe()
        keys.wipe()
    }

    /// Appends plaintext.
    func append(_ data: Data) throws(DataProtectionError) {
        let data = Data(data)
        var position = 0
        while position < data.count {
            let count = min(header.chunkSize - filled, data.count - position)
            chunk.replaceBytes(at: filled, with: data, range: position..<position + count)
            filled += count
            position += count
            if filled == header.chunkSize { try sealChunk() }
        }
    }

    private func sealChunk() throws(DataProtectionError) {
        if batch.isEmpty { batchStart = index }
        let start = batch.count
        batch.append(Data(count: filled + ChunkRecords.overhead))
        ChunkRecords.seal(chunk, range: 0..<filled, into: &batch, at: start, key: keys.chunkKey,
                          associatedData: header.chunkAssociatedData(index))
        header.length += UInt64(filled)
        index += 1
        filled = 0
        chunk.zeroBytes(in: 0..<chunk.count)
        if batch.count >= Self.batchRecords * header.recordStride { try writeBatch() }
    }

    private func writeBatch() throws(DataProtectionError) {
        guard !batch.isEmpty else { return }
        try file.write(batch, at: header.recordOffset(batchStart))
        batch.removeAll(keepingCapacity: true)
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
        let fileSystem = PosixFileSystem()
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
