import Foundation
import SodiumBridge
import Testing
@testable import DataProtection

/// The journal's encoding as a reader takes it (Keys/file-format.md §9.1): bytes after the
/// MAC are ignored (a kept journal file is written over in place, never cut), and anything
/// else that is not exactly one journal as its writer wrote it is refused.
@Suite struct FileJournalTests {
    static let key = SecureBytes.random(count: 32)
    static let fileID = Data(repeating: 7, count: 16)

    static func journal(base: UInt64, records: [(UInt64, Int)]) -> FileJournal {
        FileJournal(fileID: fileID, baseGeneration: base, length: 100_000, allocatedRecords: 8,
                    entries: records.map { FileJournal.Entry(index: $0.0, record: patternBytes($0.1, seed: $0.0 + base)) })
    }

    @Test("a journal written over a longer one reads back whole; a torn one or a mixture of two does not")
    func writtenOverInPlace() throws {
        let long = Self.journal(base: 5, records: [(0, 16_424), (1, 16_424), (2, 900)]).encoded(macKey: Self.key)
        let short = Self.journal(base: 6, records: [(2, 4_000)]).encoded(macKey: Self.key)
        #expect(short.count < long.count)

        // The short journal over the long one: what a kept journal file holds after the write.
        var file = long
        file.replaceSubrange(0..<short.count, with: short)
        let read = try #require(FileJournal.decode(file, macKey: Self.key, fileID: Self.fileID), "the bytes after its MAC are ignored")
        #expect(read.baseGeneration == 6 && read.entries.map(\.index) == [2] && read.entries[0].record == patternBytes(4_000, seed: 8))
        #expect(FileJournal.decode(long, macKey: Self.key, fileID: Self.fileID)?.baseGeneration == 5)

        // Torn: every prefix of the short write over the long journal, cut at a few places.
        for cut in [1, 21, 22, 29, 49, 60, 4_000, short.count - 1] {
            var torn = long
            torn.replaceSubrange(0..<cut, with: short.prefix(cut))
            // Nothing, or (while the bytes written equal the old ones: magic, version, file id) the old journal whole.
            let decoded = FileJournal.decode(torn, macKey: Self.key, fileID: Self.fileID)
            #expect(decoded == nil || (cut <= 21 && decoded?.baseGeneration == 5 && decoded?.entries.count == 3),
                    "a write torn after \(cut) bytes: \(String(describing: decoded?.baseGeneration))")
        }
        // One byte of the short journal's body or MAC changed, with the long one's bytes after it.
        for position in [0, 21, 45, 60, short.count - 32, short.count - 1] {
            var flipped = file
            flipped[position] ^= 0x01
            #expect(FileJournal.decode(flipped, macKey: Self.key, fileID: Self.fileID) == nil, "byte \(position) flipped")
        }
        #expect(FileJournal.decode(file, macKey: Self.key, fileID: Data(repeating: 8, count: 16)) == nil, "another file's")
        #expect(FileJournal.decode(file, macKey: SecureBytes.random(count: 32), fileID: Self.fileID) == nil, "another key's")
        #expect(FileJournal.decode(short.prefix(short.count - 1), macKey: Self.key, fileID: Self.fileID) == nil, "no room for the MAC")
    }
}
