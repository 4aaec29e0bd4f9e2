import CSodium
import Dispatch
import Foundation

/// Where the plaintext of one chunk of a batch lives: a caller's public `Data`
/// or secure memory the store holds.
package enum ChunkPlaintext: @unchecked Sendable {
    /// `data[range]` (indices from `data.startIndex == 0`).
    case data(Data, Range<Int>)
    /// `bytes[range]`.
    case secure(SecureBytes, Range<Int>)

    /// The plaintext length.
    package var count: Int {
        switch self {
        case .data(_, let range), .secure(_, let range): range.count
        }
    }
}

/// Sealing and opening many chunk records at once, spread over the cores.
///
/// The records are those of ``ChunkRecords`` (`nonce || ciphertext || tag`,
/// a fresh random nonce per seal), byte for byte: only the work is split. Each
/// worker takes a contiguous share of the chunks; below ``parallelThreshold``
/// chunks everything runs on the calling thread.
package enum ChunkBatch {
    /// The number of workers: the active processor count.
    package static let workerCount = max(1, ProcessInfo.processInfo.activeProcessorCount)

    /// Batches with fewer chunks than this are processed on the calling thread.
    package static let parallelThreshold = 4

    /// Seals `chunks[i]` into `records` at `offsets[i]` (room for `chunks[i].count + overhead`
    /// bytes each, disjoint), with `associatedData[i]`.
    package static func seal(
        _ chunks: [ChunkPlaintext], associatedData: [Data], into records: inout Data, at offsets: [Int], key: SecureBytes
    ) {
        Sodium.ensureInitialized()
        precondition(chunks.count == associatedData.count && chunks.count == offsets.count, "batch arrays differ in size")
        precondition(key.count == XChaCha20Poly1305.keyByteCount, "chunk key must be 32 bytes")
        for (chunk, offset) in zip(chunks, offsets) {
            precondition(offset >= 0 && offset + chunk.count + ChunkRecords.overhead <= records.count, "record out of bounds")
        }
        records.withUnsafeMutableBytes { out in
            let base = SendablePointer(out.baseAddress!)
            key.withUnsafeBytes { k in
                forEachShare(of: chunks.count) { index in
                    withPlaintext(chunks[index]) { plaintext in
                        associatedData[index].withUnsafeBytes { ad in
                            ChunkRecords.sealRecord(plaintext, at: base.pointer + offsets[index], key: k, associatedData: ad)
                        }
                    }
                }
            }
        }
    }

    /// Opens the records `records[ranges[i]]` into `plaintext` at `offsets[i]` (disjoint), with
    /// `associatedData[i]`. A record that does not authenticate writes nothing; the error names
    /// the first such record's position in the batch (other records may have been opened).
    package static func open(
        _ records: Data, ranges: [Range<Int>], associatedData: [Data], into plaintext: inout Data, at offsets: [Int],
        key: SecureBytes
    ) throws(ChunkBatchError) {
        Sodium.ensureInitialized()
        precondition(ranges.count == associatedData.count && ranges.count == offsets.count, "batch arrays differ in size")
        guard key.count == XChaCha20Poly1305.keyByteCount else { throw ChunkBatchError(position: 0) }
        for (position, range) in ranges.enumerated() {
            guard range.count >= ChunkRecords.overhead, range.lowerBound >= 0, range.upperBound <= records.count else {
                throw ChunkBatchError(position: position)
            }
            precondition(offsets[position] >= 0 && offsets[position] + range.count - ChunkRecords.overhead <= plaintext.count,
                         "record plaintext out of bounds")
        }
        let failures = UnsafeMutableBufferPointer<Bool>.allocate(capacity: max(ranges.count, 1))
        failures.initialize(repeating: false)
        defer { failures.deallocate() }
        let failed = SendablePointer(UnsafeMutableRawPointer(failures.baseAddress!))
        records.withUnsafeBytes { raw in
            plaintext.withUnsafeMutableBytes { out in
                let destination = SendablePointer(out.baseAddress!)
                key.withUnsafeBytes { k in
                    forEachShare(of: ranges.count) { index in
                        let ok = associatedData[index].withUnsafeBytes { ad in
                            ChunkRecords.openRecord(UnsafeRawBufferPointer(rebasing: raw[ranges[index]]),
                                                    into: destination.pointer + offsets[index], key: k, associatedData: ad)
                        }
                        if !ok { failed.pointer.storeBytes(of: true, toByteOffset: index, as: Bool.self) }
                    }
                }
            }
        }
        if let first = failures.firstIndex(of: true) { throw ChunkBatchError(position: first) }
    }

    // MARK: - Internals

    /// Calls `body` for every index in `0..<count`, in small contiguous shares taken by
    /// whichever worker is free (a core busy with other work then takes fewer).
    private static func forEachShare(of count: Int, _ body: (Int) -> Void) {
        guard count >= parallelThreshold, workerCount > 1 else {
            for index in 0..<count { body(index) }
            return
        }
        let shares = min(count, workerCount * sharesPerWorker)
        withoutActuallyEscaping(body) { body in
            let work = UncheckedSendable(body)
            DispatchQueue.concurrentPerform(iterations: shares) { share in
                let start = count * share / shares, end = count * (share + 1) / shares
                for index in start..<end { work.value(index) }
            }
        }
    }

    /// Shares per worker: enough to balance, few enough to keep the dispatch overhead small.
    private static let sharesPerWorker = 8

    private static func withPlaintext<R>(_ chunk: ChunkPlaintext, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        switch chunk {
        case .data(let data, let range):
            data.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[range])) }
        case .secure(let bytes, let range):
            bytes.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[range])) }
        }
    }
}

/// A record of a batch did not authenticate.
package struct ChunkBatchError: Error, Sendable {
    /// The record's position in the batch (the first one that failed).
    package let position: Int
}

/// A pointer handed to the workers of one batch, each of which touches only its own bytes.
private struct SendablePointer: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer
    init(_ pointer: UnsafeMutableRawPointer) { self.pointer = pointer }
}

/// A closure shared by the workers of one batch, which runs to completion before the call returns.
private struct UncheckedSendable<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
