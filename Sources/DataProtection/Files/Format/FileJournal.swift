import Foundation
import SodiumBridge

/// The redo journal of one flush that overwrites existing chunk records.
///
/// Written beside the file (`<name>.j`) before any record is overwritten in
/// place: after a crash, a complete journal is applied again (the flush
/// happened), a torn one is discarded (the file was not yet touched).
/// Layout: `Keys/file-format.md`, "Journal".
package struct FileJournal: Sendable {
    static let magic = Data("DPFJ".utf8)
    static let version: UInt8 = 1
    package static let suffix = ".j"

    struct Entry: Sendable {
        var index: UInt64
        var record: Data
    }

    /// The most entries a journal may hold (`Keys/file-format.md` §9.1). The reference writer
    /// writes at most 138: a flush overwrites the committed chunks of its cache (at most 96)
    /// or of one direct write (64 with the cache's 65), and the old last partial chunk; a
    /// journaled growth adds at most ``OpenFile/journaledGrowthLimit`` new records.
    static let maximumEntries = 256

    /// The most bytes a journal for records of `recordStride` bytes can take (any chunk
    /// size when `nil`): a longer file is refused unread.
    static func maximumByteCount(recordStride: Int?) -> Int {
        let stride = recordStride ?? (1 << 20) + ChunkRecords.overhead
        return 49 + maximumEntries * (12 + stride) + 32
    }

    var fileID: Data
    /// The header generation the journal applies on top of.
    var baseGeneration: UInt64
    var length: UInt64
    var allocatedRecords: UInt64
    var entries: [Entry]

    func encoded(macKey: SecureBytes) -> Data {
        var writer = ByteWriter(capacity: 64 + entries.reduce(0) { $0 + 12 + $1.record.count })
        writer.append(Self.magic)
        writer.append(Self.version)
        writer.append(fileID)
        writer.append(baseGeneration)
        writer.append(length)
        writer.append(allocatedRecords)
        writer.append(UInt32(entries.count))
        for entry in entries {
            writer.append(entry.index)
            writer.append(UInt32(entry.record.count))
            writer.append(entry.record)
        }
        writer.append(BLAKE2b.mac(key: macKey, [.data(writer.data)]))
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

    /// The journal, or `nil` when it is torn or does not belong to this file. Bytes after its
    /// MAC are ignored: a writer that keeps its journal file writes a shorter journal over a
    /// longer one without cutting the file (`Keys/file-format.md` §9.1).
    package static func decode(_ data: Data, macKey: SecureBytes, fileID: Data) -> FileJournal? {
        guard let (journal, end) = parse(data), data.count >= end + 32 else { return nil }
        let bytes = Data(data)
        guard ConstantTime.equals(BLAKE2b.mac(key: macKey, [.data(bytes.prefix(end))]), bytes.subdata(in: end..<end + 32)),
              journal.fileID == fileID else { return nil }
        return journal
    }

    /// The journal's fields and the length of its body (where its MAC starts), read without
    /// any key: unauthenticated until the MAC is checked.
    package static func parse(_ data: Data) -> (journal: FileJournal, bodyLength: Int)? {
        var reader = ByteReader(Data(data), what: "journal")
        do {
            try reader.expect(ascii: "DPFJ")
            guard try reader.uint8() == version else { return nil }
            var journal = FileJournal(fileID: try reader.bytes(16), baseGeneration: try reader.uint64(),
                                      length: try reader.uint64(), allocatedRecords: try reader.uint64(), entries: [])
            let count = try reader.uint32()
            for _ in 0..<count {
                let index = try reader.uint64()
                let size = try reader.uint32()
                journal.entries.append(Entry(index: index, record: try reader.bytes(Int(size))))
            }
            return (journal, reader.offset)
        } catch {
            return nil
        }
    }
}
