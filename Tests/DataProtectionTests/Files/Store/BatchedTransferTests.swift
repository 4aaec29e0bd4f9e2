import Foundation
import Testing
@testable import DataProtection

/// Whole-file writes are sealed in batches on every core and written in the
/// background; reads of many chunks are opened on every core. Round trips at
/// sizes around chunk and batch boundaries, from whole `Data` and from pieces
/// of every alignment, must give back exactly what was written.
@Suite struct BatchedTransferTests {
    static let chunk = 1 << Int(ProtectedStore.defaultChunkShift)
    static let batch = ProtectedFileWriter.batchRecords * chunk
    static let sizes = [0, 1, chunk - 1, chunk, chunk + 1, batch - chunk, batch - 1, batch, batch + 1,
                        2 * batch - 1, 2 * batch, 2 * batch + chunk + 5, 3 * batch + 7]

    static func pattern(_ count: Int, seed: UInt64) -> Data {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        var words = (0..<(count + 7) / 8).map { _ -> UInt64 in
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return state
        }
        return words.withUnsafeMutableBytes { Data($0.prefix(count)) }
    }

    @Test("whole-file put and get round trip around batch boundaries", arguments: sizes)
    func wholeFile(size: Int) throws {
        try withStore { fixture in
            let data = Self.pattern(size, seed: UInt64(size))
            try fixture.store.write(data, to: "Documents/f")
            #expect(try fixture.store.contents(atPath: "Documents/f") == data)
            #expect(try fixture.store.attributesOfItem(atPath: "Documents/f").size == UInt64(size))
        }
    }

    @Test("streamed writes in pieces of every alignment round trip", arguments: [1_000, chunk - 3, chunk, 3 * chunk + 1, 1 << 20])
    func streamedPieces(piece: Int) throws {
        try withStore { fixture in
            let data = Self.pattern(2 * Self.batch + 12_345, seed: UInt64(piece))
            var position = 0
            var turn = 0
            try fixture.store.write(to: "f") { () -> Data? in
                guard position < data.count else { return nil }
                // Alternate the piece size with a small one, so whole and partial chunks mix in a batch.
                turn += 1
                let count = min(data.count - position, turn % 3 == 0 ? 17 : piece)
                defer { position += count }
                return data.subdata(in: position..<position + count)
            }
            #expect(try fixture.store.contents(atPath: "f") == data)
        }
    }

    @Test("reads spanning many chunks at unaligned offsets return exactly the bytes")
    func unalignedReads() throws {
        try withStore { fixture in
            let data = Self.pattern(3 * Self.batch + 999, seed: 7)
            try fixture.store.write(data, to: "f")
            let handle = try fixture.store.fileHandle(forReadingAtPath: "f")
            defer { try? handle.close() }
            let starts = [0, 1, Self.chunk - 1, Self.chunk, 5 * Self.chunk + 17, Self.batch - 3, data.count - 10]
            let counts = [1, Self.chunk, 10 * Self.chunk + 2, Self.batch + 5, 3 * Self.batch]
            for start in starts {
                for count in counts {
                    let got = try handle.read(atOffset: UInt64(start), upToCount: count)
                    #expect(got == data.subdata(in: start..<min(data.count, start + count)), "at \(start), \(count) bytes")
                }
            }
        }
    }

    @Test("a forged record inside a batch read is an integrity failure naming its chunk")
    func forgedRecordInBatch() throws {
        try withStore { fixture in
            let data = Self.pattern(2 * Self.batch, seed: 3)
            try fixture.store.write(data, to: "f")
            let entries = try FileManager.default.contentsOfDirectory(atPath: fixture.filesDirectory.path)
                .filter { $0 != "dpdir" && !$0.hasPrefix(".") }
            try #require(entries.count == 1)
            let url = fixture.filesDirectory.appendingPathComponent(entries[0])
            var raw = try Data(contentsOf: url)
            let stride = Self.chunk + 40
            raw[1_024 + 70 * stride + 100] ^= 0x01  // inside record 70 (the second batch)
            try raw.write(to: url)
            let error = #expect(throws: DataProtectionError.self) { _ = try fixture.store.contents(atPath: "f") }
            #expect(error?.code == .integrityFailure)
            #expect(error?.message.contains("Chunk 70 ") == true)
        }
    }
}
