import Foundation
import Testing
@testable import SodiumBridge

/// Batches sealed and opened on every core are the records of `ChunkRecords`, byte for byte.
@Suite("Chunk batches")
struct ChunkBatchTests {
    let key = SecureBytes.random(count: 32)
    static let stride = 1000 + ChunkRecords.overhead

    /// `count` chunks of 1000 bytes (the last one `last` bytes), from public and secure memory alternately.
    func chunks(_ count: Int, last: Int = 1000) -> (plaintext: Data, chunks: [ChunkPlaintext]) {
        let plaintext = Data((0..<(count - 1) * 1000 + last).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) })
        let chunks: [ChunkPlaintext] = (0..<count).map { index in
            let range = index * 1000..<min(plaintext.count, (index + 1) * 1000)
            guard index % 2 == 1 else { return .data(plaintext, range) }
            let secure = SecureBytes(count: range.count) { $0.copyBytes(from: plaintext[range]) }
            return .secure(secure, 0..<range.count)
        }
        return (plaintext, chunks)
    }

    func associatedData(_ index: Int) -> Data { Data("chunk \(index)".utf8) }

    @Test("records sealed in a batch open one by one, and a batch opens records sealed one by one",
          arguments: [1, 3, 4, 5, 64, 129])
    func sameRecords(count: Int) throws {
        let (plaintext, chunks) = chunks(count, last: 777)
        var records = Data(count: count * Self.stride)
        let offsets = (0..<count).map { $0 * Self.stride }
        ChunkBatch.seal(chunks, associatedData: (0..<count).map(associatedData), into: &records, at: offsets, key: key)
        var opened = Data(count: plaintext.count)
        for index in 0..<count {
            let length = chunks[index].count
            try ChunkRecords.open(records, range: offsets[index]..<offsets[index] + length + ChunkRecords.overhead,
                                  into: &opened, at: index * 1000, key: key, associatedData: associatedData(index))
        }
        #expect(opened == plaintext)

        var single = Data(count: records.count)
        for index in 0..<count {
            let range = index * 1000..<min(plaintext.count, (index + 1) * 1000)
            ChunkRecords.seal(plaintext, range: range, into: &single, at: offsets[index], key: key, associatedData: associatedData(index))
        }
        var batchOpened = Data(count: plaintext.count)
        let ranges = (0..<count).map { offsets[$0]..<offsets[$0] + chunks[$0].count + ChunkRecords.overhead }
        try ChunkBatch.open(single, ranges: ranges, associatedData: (0..<count).map(associatedData), into: &batchOpened,
                            at: (0..<count).map { $0 * 1000 }, key: key)
        #expect(batchOpened == plaintext)
    }

    @Test("every record gets its own nonce")
    func freshNonces() {
        let (_, chunks) = chunks(16)
        var records = Data(count: 16 * Self.stride)
        ChunkBatch.seal(chunks, associatedData: (0..<16).map(associatedData), into: &records, at: (0..<16).map { $0 * Self.stride }, key: key)
        let nonces = Set((0..<16).map { records.subdata(in: $0 * Self.stride..<$0 * Self.stride + XChaCha20Poly1305.nonceByteCount) })
        #expect(nonces.count == 16)
    }

    @Test("a forged record, wrong associated data or a short record names the first failing position",
          arguments: [0, 5, 39])
    func forgery(position: Int) throws {
        let (_, chunks) = chunks(40)
        var records = Data(count: 40 * Self.stride)
        let offsets = (0..<40).map { $0 * Self.stride }
        let ranges = offsets.map { $0..<$0 + Self.stride }
        ChunkBatch.seal(chunks, associatedData: (0..<40).map(associatedData), into: &records, at: offsets, key: key)
        var out = Data(count: 40 * 1000)

        var forged = records
        forged[offsets[position] + 30] ^= 1
        let flipped = #expect(throws: ChunkBatchError.self) {
            try ChunkBatch.open(forged, ranges: ranges, associatedData: (0..<40).map(associatedData), into: &out,
                                at: (0..<40).map { $0 * 1000 }, key: key)
        }
        #expect(flipped?.position == position)

        var swappedData = (0..<40).map(associatedData)
        swappedData[position] = associatedData(position + 1)
        let moved = #expect(throws: ChunkBatchError.self) {
            try ChunkBatch.open(records, ranges: ranges, associatedData: swappedData, into: &out,
                                at: (0..<40).map { $0 * 1000 }, key: key)
        }
        #expect(moved?.position == position)

        var short = ranges
        short[position] = offsets[position]..<offsets[position] + ChunkRecords.overhead - 1
        let truncated = #expect(throws: ChunkBatchError.self) {
            try ChunkBatch.open(records, ranges: short, associatedData: (0..<40).map(associatedData), into: &out,
                                at: (0..<40).map { $0 * 1000 }, key: key)
        }
        #expect(truncated?.position == position)
    }
}
