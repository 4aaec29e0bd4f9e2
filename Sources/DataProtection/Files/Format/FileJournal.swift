import Foundation
import SodiumBridge

/// The redo journal of one flush that overwrites existing chunk records, and the
/// chains of them an open file's writer appends one after another.
///
/// Written beside the file (`<name>.j`) before any record is overwritten in
/// place: after a crash, a complete journal is applied again (the flush
/// happened), a torn one is discarded (the file was not yet touched). A writer
/// may commit a flush with its journal alone, leaving the header and the records
/// in place to be made durable later: the next journals then follow it in the
/// same file (a *chain*, numbered from 1 on the same base generation), and a
/// reader replays them all in order. Layout: `Keys/file-format.md`, "Journal".
package struct FileJournal: Sendable {
    static let magic = Data("DPFJ".utf8)
    /// Version 2 numbers the journals of a chain; version 1 (no number) is read as a chain of one.
    static let version: UInt8 = 2
    package static let suffix = ".j"

    struct Entry: Sendable {
        var index: UInt64
        var record: Data
    }

    /// The most entries a journal may hold (`Keys/file-format.md` §9.1). The reference writer
    /// writes at most 194: a flush overwrites the committed chunks of its cache (at most 96)
    /// or of one direct write (64 with the cache's 65), and the old last partial chunk; a
    /// journaled growth adds at most ``OpenFile/journaledGrowthLimit`` new records (64).
    static let maximumEntries = 256

    /// The most journals a chain may hold (`Keys/file-format.md` §9.1): a reader stops there.
    static let maximumChain = 64

    /// The most bytes a journal file for records of `recordStride` bytes can take (any chunk
    /// size when `nil`), a whole chain included: a longer file is refused unread.
    static func maximumByteCount(recordStride: Int?) -> Int {
        let stride = recordStride ?? (1 << 20) + ChunkRecords.overhead
        return fixedByteCount + maximumEntries * (12 + stride) + 32
    }

    /// The bytes of a (version 2) journal before its entries: magic, version, file id, base
    /// generation, sequence number, length, allocated records, entry count.
    static let fixedByteCount = 4 + 1 + 16 + 8 + 4 + 8 + 8 + 4

    var fileID: Data
    /// The header generation the journal applies on top of.
    var baseGeneration: UInt64
    /// Its place in its chain, from 1.
    var sequence: UInt32 = 1
    var length: UInt64
    var allocatedRecords: UInt64
    var entries: [Entry]

    func encoded(macKey: SecureBytes) -> Data {
        var writer = ByteWriter(capacity: Self.fixedByteCount + 32 + entries.reduce(0) { $0 + 12 + $1.record.count })
        writer.append(Self.magic)
        writer.append(Self.version)
        writer.append(fileID)
        writer.append(baseGeneration)
        writer.append(sequence)
        writer.append(length)
        writer.append(allocatedRecords)
        writer.append(UInt32(entries.count))
        for entry in entries {
            writer.append(entry.index)
            writer.append(UInt32(entry.record.count))
            writer.append(entry.record)
        }
        writer.append(BLAKE2b.mac(key: macKey, bytes: writer.bytes))
        return writer.data
    }

    /// Whether the journal's length, allocation and entries fit the geometry of
    /// `header` (the file it applies to): applying one that does not would compute
    /// record offsets beyond what a file can hold (`Keys/file-format.md` §9.2). Entries
    /// come in strictly increasing index order, as the writer writes them.
    func fits(_ header: FileHeader) -> Bool {
        entries.count <= Self.maximumEntries
            && allocatedRecords <= header.maximumRecords
            && header.records(forLength: length) <= allocatedRecords
            && entries.allSatisfy { $0.index < allocatedRecords && $0.record.count <= header.recordStride }
            && zip(entries, entries.dropFirst()).allSatisfy { $0.index < $1.index }  // increasing: no index twice
    }

    /// The journal at the start of `data`, or `nil` when it is torn or does not belong to
    /// this file. Bytes after its MAC are ignored (`Keys/file-format.md` §9.1).
    package static func decode(_ data: Data, macKey: SecureBytes, fileID: Data) -> FileJournal? {
        decodeChain(data, macKey: macKey, fileID: fileID).first
    }

    /// The chain at the start of `data`: the journals that follow one another from offset 0,
    /// each authenticated and of this file, the first numbered 1 and each next one numbered
    /// one more on the same base generation, up to ``maximumChain``. It ends at the first
    /// journal that does not, and after a version-1 journal (which has no number). What
    /// follows is ignored: a torn journal, the rest of an older chain written over.
    package static func decodeChain(_ data: Data, macKey: SecureBytes, fileID: Data) -> [FileJournal] {
        let bytes = Data(data)
        var chain: [FileJournal] = []
        var offset = 0
        while chain.count < maximumChain, let (journal, end, version) = parse(bytes, from: offset), bytes.count >= end + 32 {
            guard ConstantTime.equals(BLAKE2b.mac(key: macKey, [.data(bytes.subdata(in: offset..<end))]), bytes.subdata(in: end..<end + 32)),
                  journal.fileID == fileID else { break }
            if let last = chain.last {
                guard version == 2, journal.baseGeneration == last.baseGeneration, journal.sequence == last.sequence + 1 else { break }
            } else {
                guard journal.sequence == 1 else { break }
            }
            chain.append(journal)
            offset = end + 32
            if version == 1 { break }
        }
        return chain
    }

    /// The fields of the journal at the start of `data` and the length of its body (where its
    /// MAC starts), read without any key: unauthenticated until the MAC is checked.
    package static func parse(_ data: Data) -> (journal: FileJournal, bodyLength: Int)? {
        parse(Data(data), from: 0).map { ($0.journal, $0.end) }
    }

    /// The fields of the journal at `offset` in `data` (indexed from 0), where its body ends
    /// (its MAC starts) and its version.
    private static func parse(_ data: Data, from offset: Int) -> (journal: FileJournal, end: Int, version: UInt8)? {
        var reader = ByteReader(data, from: offset, what: "journal")
        do {
            try reader.expect(ascii: "DPFJ")
            let version = try reader.uint8()
            guard version == 1 || version == 2 else { return nil }
            let fileID = try reader.bytes(16)
            let base = try reader.uint64()
            let sequence = version == 2 ? try reader.uint32() : 1
            var journal = FileJournal(fileID: fileID, baseGeneration: base, sequence: sequence,
                                      length: try reader.uint64(), allocatedRecords: try reader.uint64(), entries: [])
            let count = try reader.uint32()
            for _ in 0..<count {
                let index = try reader.uint64()
                let size = try reader.uint32()
                journal.entries.append(Entry(index: index, record: try reader.bytes(Int(size))))
            }
            return (journal, reader.offset, version)
        } catch {
            return nil
        }
    }
}
