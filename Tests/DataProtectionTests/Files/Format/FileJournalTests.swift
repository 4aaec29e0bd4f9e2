import Foundation
import SodiumBridge
import Testing
@testable import DataProtection

/// The journal's encoding as a reader takes it (Keys/file-format.md §9.1): bytes after the
/// MAC are ignored (a kept journal file is written over in place, never cut), and anything
/// else that is not exactly one journal as its writer wrote it is refused: its MAC (which
/// leaves the records' ciphertext out) and every record's own tag must hold.
@Suite struct FileJournalTests {
    static let key = SecureBytes.random(count: 32)
    static let chunkKey = SecureBytes.random(count: 32)
    static let fileID = Data(repeating: 7, count: 16)

    static func associatedData(_ index: UInt64) -> Data { Data("chunk \(index)".utf8) }

    /// A sealed record of `size` bytes for chunk `index`.
    static func record(_ index: UInt64, size: Int, seed: UInt64) -> Data {
        var record = Data(count: size)
        ChunkRecords.seal(patternBytes(size - ChunkRecords.overhead, seed: seed), range: 0..<size - ChunkRecords.overhead,
                          into: &record, at: 0, key: chunkKey, associatedData: associatedData(index))
        return record
    }

    static func journal(base: UInt64, records: [(UInt64, Int)]) -> FileJournal {
        FileJournal(fileID: fileID, baseGeneration: base, length: 100_000, allocatedRecords: 8,
                    entries: records.map { FileJournal.Entry(index: $0.0, record: record($0.0, size: $0.1, seed: $0.0 + base)) })
    }

    /// Whether `entry`'s record opens under ``chunkKey`` for its index (what recovery checks).
    static func opens(_ entry: FileJournal.Entry) -> Bool {
        let out = SecureBytes(count: entry.record.count)
        return (try? ChunkRecords.open(entry.record, range: 0..<entry.record.count, into: out, at: 0, key: chunkKey,
                                       associatedData: associatedData(entry.index))) != nil
    }

    static func decode(_ data: Data, macKey: SecureBytes = key, fileID: Data = fileID) -> FileJournal? {
        FileJournal.decode(data, macKey: macKey, fileID: fileID, recordOpens: opens)
    }

    @Test("a journal written over a longer one reads back whole; a torn one or a mixture of two does not")
    func writtenOverInPlace() throws {
        let longJournal = Self.journal(base: 5, records: [(0, 16_424), (1, 16_424), (2, 900)])
        let (long, longOffsets) = longJournal.encoded(macKey: Self.key)
        let short = Self.journal(base: 6, records: [(2, 4_000)]).encoded(macKey: Self.key).bytes
        #expect(short.count < long.count)
        // Where the writer says each record starts: after the fields, and each entry's index and size.
        #expect(longOffsets == [65, 65 + 16_424 + 12, 65 + 2 * (16_424 + 12)])
        for (entry, offset) in zip(longJournal.entries, longOffsets) {
            #expect(long.subdata(in: offset..<offset + entry.record.count) == entry.record)
        }

        // The short journal over the long one: what a kept journal file holds after the write.
        var file = long
        file.replaceSubrange(0..<short.count, with: short)
        let read = try #require(Self.decode(file), "the bytes after its MAC are ignored")
        #expect(read.baseGeneration == 6 && read.entries.map(\.index) == [2] && read.entries[0].record == short.subdata(in: 65..<4_065))
        #expect(Self.decode(long)?.baseGeneration == 5)

        // Torn: every prefix of the short write over the long journal, cut at a few places.
        for cut in [1, 21, 22, 29, 49, 60, 4_000, short.count - 1] {
            var torn = long
            torn.replaceSubrange(0..<cut, with: short.prefix(cut))
            // Nothing, or (while the bytes written equal the old ones: magic, version, file id) the old journal whole,
            // or the new one when the old bytes past the cut happen to be the new ones (a cut in the MAC's last
            // byte: 1 in 256, the MACs being random): the file then holds the new journal whole.
            let decoded = Self.decode(torn)
            let whole = torn.prefix(short.count) == short
            #expect(decoded == nil || (cut <= 21 && decoded?.baseGeneration == 5 && decoded?.entries.count == 3)
                        || (whole && decoded?.baseGeneration == 6),
                    "a write torn after \(cut) bytes: \(String(describing: decoded?.baseGeneration))")
        }
        // One byte of the short journal's body or MAC changed, with the long one's bytes after it.
        for position in [0, 21, 45, 60, short.count - 32, short.count - 1] {
            var flipped = file
            flipped[position] ^= 0x01
            #expect(Self.decode(flipped) == nil, "byte \(position) flipped")
        }
        // The record's ciphertext, which the MAC leaves out: its own tag catches a flipped byte, or
        // a sector of it that kept the old journal's bytes (a torn write, the nonce and tag new).
        for position in [65 + 24, 65 + 2_000, 65 + 4_000 - 17] {
            var flipped = file
            flipped[position] ^= 0x01
            #expect(Self.decode(flipped) == nil, "ciphertext byte \(position) flipped")
        }
        var sector = file
        sector.replaceSubrange(512..<1_024, with: long[512..<1_024])
        #expect(Self.decode(sector) == nil, "a sector of the record left as the old journal had it")
        #expect(Self.decode(file, fileID: Data(repeating: 8, count: 16)) == nil, "another file's")
        #expect(Self.decode(file, macKey: SecureBytes.random(count: 32)) == nil, "another key's")
        #expect(Self.decode(short.prefix(short.count - 1)) == nil, "no room for the MAC")
    }

    @Test("a version-2 journal (its MAC over the records' ciphertext too) is still read")
    func versionTwoIsRead() throws {
        let journal = Self.journal(base: 3, records: [(1, 300), (2, 1_000)])
        var body = journal.encoded(macKey: Self.key).bytes.dropLast(32)
        body[body.startIndex + 4] = 2
        let v2 = Data(body) + BLAKE2b.mac(key: Self.key, [.data(Data(body))])
        let read = try #require(Self.decode(v2))
        #expect(read.baseGeneration == 3 && read.entries.map(\.record) == journal.entries.map(\.record))
        var flipped = v2
        flipped[65 + 100] ^= 0x01  // ciphertext: covered by a version-2 MAC
        #expect(FileJournal.decode(flipped, macKey: Self.key, fileID: Self.fileID, recordOpens: { _ in true }) == nil)
        #expect(Self.decode(journal.encoded(macKey: Self.key).bytes) != nil, "the same journal as version 3")
    }
}
