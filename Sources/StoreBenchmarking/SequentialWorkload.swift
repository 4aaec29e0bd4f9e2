import DataProtection
import Foundation
import SodiumBridge
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// Sequential transfers of ``size`` bytes (a 1 MiB random piece, repeated) through
/// the store, and the raw baseline over the same bytes: libsodium
/// XChaCha20-Poly1305 on the same 16 KiB chunks (a fresh random nonce each, 28
/// bytes of associated data like the store's), records written and read with
/// one `pwrite`/`pread` per 64 records, `fsync` at the end of a write. The raw
/// loop runs on one core, or on every core (``ChunkBatch``), to match the store
/// path it is compared with.
package final class SequentialWorkload: @unchecked Sendable {
    /// Bytes per transfer (a multiple of the piece size, or less than one piece).
    package let size: Int
    /// The plaintext piece written repeatedly.
    package let piece: Data
    /// The raw baseline's key.
    private let key = SecureBytes.random(count: 32)

    /// The chunk size of the store's format and of the baseline.
    package static let chunkSize = 1 << 14
    /// Records per `pwrite`/`pread` in the baseline.
    package static let recordsPerCall = 64
    private static let stride = chunkSize + ChunkRecords.overhead

    /// A workload of `size` bytes (rounded down to whole 1 MiB pieces above 1 MiB).
    package init(size: Int) {
        let pieceSize = min(1 << 20, max(size, Self.chunkSize))
        self.size = max(pieceSize, size - size % pieceSize)
        piece = Random.bytes(count: pieceSize)
    }

    // MARK: - The store

    /// `write(contentsOf:)` of every piece through one handle, then `synchronize()` (fsync) and close.
    package func handleWrite(_ store: ProtectedStore, path: String) throws -> Duration {
        try? store.removeItem(atPath: path)
        return try measure {
            let handle = try store.openFile(atPath: path, mode: .write, create: true)
            for _ in 0..<size / piece.count { try handle.write(contentsOf: piece) }
            try handle.synchronize()
            try handle.close()
        }
    }

    /// `read(upToCount: 1 MiB)` through one handle to the end.
    package func handleRead(_ store: ProtectedStore, path: String) throws -> Duration {
        try measure {
            let handle = try store.fileHandle(forReadingAtPath: path)
            var total = 0
            while case let data = try handle.read(upToCount: piece.count), !data.isEmpty { total += data.count }
            try handle.close()
            precondition(total == size, "read \(total) of \(size) bytes")
        }
    }

    /// Whole-file put, streamed from 1 MiB pieces (`write(to:from:)`, as `dpctl put` does): atomic and durable.
    package func put(_ store: ProtectedStore, path: String) throws -> Duration {
        try measure {
            var left = size / piece.count
            try store.write(to: path) { () -> Data? in
                guard left > 0 else { return nil }
                left -= 1
                return piece
            }
        }
    }

    /// Whole-file get: `contents(atPath:)`.
    package func get(_ store: ProtectedStore, path: String) throws -> Duration {
        try measure {
            let data = try store.contents(atPath: path)
            precondition(data.count == size, "got \(data.count) of \(size) bytes")
        }
    }

    // MARK: - The raw baseline

    /// Seals every chunk and writes the records (`pwrite` per 64), then `fsync`.
    package func rawWrite(at url: URL, parallel: Bool) throws -> Duration {
        try? FileManager.default.removeItem(at: url)
        return try measure {
            let file = try FileDescriptor.open(FilePath(url.path), .writeOnly, options: [.create, .truncate], permissions: [.ownerReadWrite])
            defer { try? file.close() }
            var records = Data(count: Self.recordsPerCall * Self.stride)
            let chunksPerPiece = piece.count / Self.chunkSize
            var index = 0
            var offset: Int64 = 0
            var batch: [ChunkPlaintext] = []
            for _ in 0..<size / piece.count {
                for chunk in 0..<chunksPerPiece {
                    batch.append(.data(piece, chunk * Self.chunkSize..<(chunk + 1) * Self.chunkSize))
                    if batch.count == Self.recordsPerCall {
                        offset += try writeBatch(&batch, first: &index, records: &records, file: file, at: offset, parallel: parallel)
                    }
                }
            }
            offset += try writeBatch(&batch, first: &index, records: &records, file: file, at: offset, parallel: parallel)
            guard fsync(file.rawValue) == 0 else { throw Errno(rawValue: errno) }
        }
    }

    private func writeBatch(
        _ batch: inout [ChunkPlaintext], first index: inout Int, records: inout Data, file: FileDescriptor, at offset: Int64, parallel: Bool
    ) throws -> Int64 {
        guard !batch.isEmpty else { return 0 }
        let ad = (0..<batch.count).map { Self.associatedData(index + $0) }
        let offsets = (0..<batch.count).map { $0 * Self.stride }
        if parallel {
            ChunkBatch.seal(batch, associatedData: ad, into: &records, at: offsets, key: key)
        } else {
            for (position, chunk) in batch.enumerated() {
                guard case .data(let data, let range) = chunk else { continue }
                ChunkRecords.seal(data, range: range, into: &records, at: offsets[position], key: key, associatedData: ad[position])
            }
        }
        let bytes = batch.count * Self.stride
        _ = try records.withUnsafeBytes { try file.writeAll(toAbsoluteOffset: offset, UnsafeRawBufferPointer(rebasing: $0[0..<bytes])) }
        // The store starts write-back as it goes; so does the baseline (its final fsync is as short).
        WriteBehind.start(descriptor: file.rawValue, offset: offset, count: Int64(bytes))
        index += batch.count
        batch.removeAll(keepingCapacity: true)
        return Int64(bytes)
    }

    /// Reads the records written by ``rawWrite(at:parallel:)`` (`pread` per 64) and opens them into
    /// a 1 MiB buffer, or with `whole` into one buffer of the file's size (what a whole-file get returns).
    package func rawRead(at url: URL, parallel: Bool, whole: Bool = false) throws -> Duration {
        try measure {
            let file = try FileDescriptor.open(FilePath(url.path), .readOnly)
            defer { try? file.close() }
            let chunks = size / Self.chunkSize
            var records = Data(count: Self.recordsPerCall * Self.stride)
            var plaintext = Data(count: whole ? size : Self.recordsPerCall * Self.chunkSize)
            var index = 0
            while index < chunks {
                let count = min(Self.recordsPerCall, chunks - index)
                let bytes = count * Self.stride
                let got = try records.withUnsafeMutableBytes {
                    try file.read(fromAbsoluteOffset: Int64(index * Self.stride), into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<bytes]))
                }
                precondition(got == bytes, "short raw read")
                let ad = (0..<count).map { Self.associatedData(index + $0) }
                let base = whole ? index * Self.chunkSize : 0
                if parallel {
                    try ChunkBatch.open(records, ranges: (0..<count).map { $0 * Self.stride..<($0 + 1) * Self.stride }, associatedData: ad,
                                        into: &plaintext, at: (0..<count).map { base + $0 * Self.chunkSize }, key: key)
                } else {
                    for position in 0..<count {
                        try ChunkRecords.open(records, range: position * Self.stride..<(position + 1) * Self.stride, into: &plaintext,
                                              at: base + position * Self.chunkSize, key: key, associatedData: ad[position])
                    }
                }
                index += count
            }
        }
    }

    /// Reads and opens the one record holding byte `offset` of the raw file, and copies `count` bytes out
    /// (the cost the store's random read is compared with).
    package func rawRecordRead(_ file: FileDescriptor, offset: Int, count: Int, scratch: SecureBytes) throws -> Data {
        let index = offset / Self.chunkSize
        var record = Data(count: Self.stride)
        _ = try record.withUnsafeMutableBytes { try file.read(fromAbsoluteOffset: Int64(index * Self.stride), into: $0) }
        try ChunkRecords.open(record, range: 0..<Self.stride, into: scratch, at: 0, key: key, associatedData: Self.associatedData(index))
        let from = offset - index * Self.chunkSize
        return scratch.copyBytes(in: from..<min(Self.chunkSize, from + count))
    }

    /// Associated data the size of the store's (file id and chunk index: 28 bytes).
    private static func associatedData(_ index: Int) -> Data {
        var data = Data(count: 28)
        withUnsafeBytes(of: UInt64(index).littleEndian) { data.replaceSubrange(20..<28, with: $0) }
        return data
    }
}
