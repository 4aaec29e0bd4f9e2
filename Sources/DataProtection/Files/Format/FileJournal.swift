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
///
/// Its MAC leaves out the ciphertext of its records (version 3): each record authenticates
/// itself (nonce, tag), and the MAC covers everything else, nonces and tags included, so a
/// reader takes a journal as whole only if the MAC matches and every record opens. A MAC
/// over the ciphertext too (versions 1 and 2, still read) hashed every byte of every commit
/// a second time: some 6 KB per SQLite WAL commit, its largest cost in CPU after sealing.
package struct FileJournal: Sendable {
    static let magic = Data("DPFJ".utf8)
    /// Version 3 leaves the records' ciphertext out of the MAC; version 2 (MAC over everything)
    /// numbers the journals of a chain too; version 1 (no number) is read as a chain of one.
    static let version: UInt8 = 3
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
    static let maximumChain = 4096

    /// The bytes a chain may take in all, unless one journal alone takes more
    /// (``maximumByteCount(recordStride:)``).
    static let maximumChainByteCount = 16 << 20

    /// The most bytes a journal file for records of `recordStride` bytes can take (any chunk
    /// size when `nil`), a whole chain included: a longer file is refused unread.
    static func maximumByteCount(recordStride: Int?) -> Int {
        let stride = recordStride ?? (1 << 20) + ChunkRecords.overhead
        return max(maximumChainByteCount, fixedByteCount + maximumEntries * (12 + stride) + 32)
    }

    /// The bytes of a (version 2 or 3) journal before its entries: magic, version, file id, base
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

    /// The journal as written (version 3), and where each entry's record starts in it: its
    /// fields, its entries, and the MAC of those bytes with each record's ciphertext left out
    /// (``authenticatedBytes(of:records:)``). Every record is a sealed chunk record (at least
    /// ``ChunkRecords/overhead`` bytes).
    func encoded(macKey: SecureBytes) -> (bytes: Data, recordOffsets: [Int]) {
        let macOffset = Self.fixedByteCount + entries.reduce(0) { $0 + 12 + $1.record.count }
        var records: [Range<Int>] = []
        records.reserveCapacity(entries.count)
        let bytes = ByteWriter.data(byteCount: macOffset + 32) { writer in
            appendFields(to: &writer)
            for entry in entries {
                precondition(entry.record.count >= ChunkRecords.overhead, "a journal entry shorter than a sealed record")
                writer.append(entry.index)
                writer.append(UInt32(entry.record.count))
                records.append(writer.count..<writer.count + entry.record.count)
                writer.append(entry.record)
            }
            writer.append(BLAKE2b.mac(key: macKey, bytes: Self.authenticatedBytes(of: writer.written, records: records)))
        }
        return (bytes, records.map(\.lowerBound))
    }

    /// The fields before the entries (version 3).
    private func appendFields(to writer: inout ByteWriter) {
        writer.append(Self.magic)
        writer.append(Self.version)
        writer.append(fileID)
        writer.append(baseGeneration)
        writer.append(sequence)
        writer.append(length)
        writer.append(allocatedRecords)
        writer.append(UInt32(entries.count))
    }

    /// What a version-3 journal's MAC covers: `body`, its bytes from its magic to the end of its
    /// entries, with the ciphertext of each of its `records` (ranges of `body`, in order, each at
    /// least ``ChunkRecords/overhead`` bytes) left out, its 24-byte nonce and 16-byte tag kept.
    private static func authenticatedBytes(of body: UnsafeRawBufferPointer, records: [Range<Int>]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(body.count - records.reduce(0) { $0 + $1.count - ChunkRecords.overhead })
        var from = 0
        for record in records {
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: body[from..<record.lowerBound + XChaCha20Poly1305.nonceByteCount]))
            from = record.upperBound - XChaCha20Poly1305.tagByteCount
        }
        bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: body[from...]))
        return bytes
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

    /// Whether a journal's record opens (authenticates under the file's chunk key, for its index).
    typealias RecordCheck = (Entry) -> Bool

    /// The journal at the start of `data`, or `nil` when it is torn or does not belong to
    /// this file. Bytes after its MAC are ignored (`Keys/file-format.md` §9.1).
    static func decode(_ data: Data, macKey: SecureBytes, fileID: Data, recordOpens: RecordCheck) -> FileJournal? {
        decodeChain(data, macKey: macKey, fileID: fileID, recordOpens: recordOpens).first
    }

    /// The chain at the start of `data`: the journals that follow one another from offset 0,
    /// each authenticated and of this file, the first numbered 1 and each next one numbered
    /// one more on the same base generation, up to ``maximumChain``. It ends at the first
    /// journal that does not, and after a version-1 journal (which has no number). What
    /// follows is ignored: a torn journal, the rest of an older chain written over.
    ///
    /// A version-3 journal is whole only if its MAC matches and each of its records opens
    /// (`recordOpens`): its MAC leaves their ciphertext out, so a write torn inside a record
    /// shows there.
    static func decodeChain(_ data: Data, macKey: SecureBytes, fileID: Data, recordOpens: RecordCheck) -> [FileJournal] {
        chain(in: Data(data), fileID: fileID) { bytes, offset, journal, records, end, version in
            let mac = version >= 3
                ? bytes.withUnsafeBytes { all in
                    BLAKE2b.mac(key: macKey, bytes: authenticatedBytes(of: UnsafeRawBufferPointer(rebasing: all[offset..<end]),
                                                                      records: records.map { $0.lowerBound - offset..<$0.upperBound - offset }))
                }
                : BLAKE2b.mac(key: macKey, [.data(bytes.subdata(in: offset..<end))])
            return ConstantTime.equals(mac, bytes.subdata(in: end..<end + 32)) && (version < 3 || journal.entries.allSatisfy(recordOpens))
        }
    }

    /// The chain at the start of `data` as ``decodeChain(_:macKey:fileID:recordOpens:)`` finds it,
    /// but read without any key: each journal whole in length, of this file and numbered in
    /// sequence, its MAC present (not the zeros a kept journal file is extended with ahead of its
    /// chain, where a write cut short leaves them) but unchecked, its records unopened.
    /// Unauthenticated, like the header a file's size is read from while its class key is away
    /// (`stat`); what the file holds is only ever read after the chain authenticates.
    package static func unauthenticatedChain(_ data: Data, fileID: Data) -> [FileJournal] {
        chain(in: Data(data), fileID: fileID) { bytes, _, _, _, end, _ in
            bytes[end..<end + 32].contains { $0 != 0 }
        }
    }

    /// The journals that follow one another from offset 0 of `bytes` (indexed from 0), each of
    /// this file, accepted by `accepts` (given the bytes, the journal's offset, the journal, where
    /// its records lie, where its MAC starts and its version), numbered in sequence.
    private static func chain(
        in bytes: Data, fileID: Data,
        accepts: (Data, Int, FileJournal, [Range<Int>], Int, UInt8) -> Bool
    ) -> [FileJournal] {
        var chain: [FileJournal] = []
        var offset = 0
        while chain.count < maximumChain, let (journal, records, end, version) = parse(bytes, from: offset), bytes.count >= end + 32 {
            guard journal.fileID == fileID, accepts(bytes, offset, journal, records, end, version) else { break }
            if let last = chain.last {
                guard version >= 2, journal.baseGeneration == last.baseGeneration, journal.sequence == last.sequence + 1 else { break }
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

    /// The fields of the journal at `offset` in `data` (indexed from 0), where in `data` its
    /// records lie, where its body ends (its MAC starts) and its version.
    private static func parse(_ data: Data, from offset: Int) -> (journal: FileJournal, records: [Range<Int>], end: Int, version: UInt8)? {
        var reader = ByteReader(data, from: offset, what: "journal")
        do {
            try reader.expect(ascii: "DPFJ")
            let version = try reader.uint8()
            guard (1...3).contains(version) else { return nil }
            let fileID = try reader.bytes(16)
            let base = try reader.uint64()
            let sequence = version >= 2 ? try reader.uint32() : 1
            var journal = FileJournal(fileID: fileID, baseGeneration: base, sequence: sequence,
                                      length: try reader.uint64(), allocatedRecords: try reader.uint64(), entries: [])
            let count = try reader.uint32()
            var records: [Range<Int>] = []
            for _ in 0..<count {
                let index = try reader.uint64()
                let size = try reader.uint32()
                if version >= 3 && Int(size) < ChunkRecords.overhead { return nil }  // not a sealed record
                let start = reader.offset
                journal.entries.append(Entry(index: index, record: try reader.bytes(Int(size))))
                records.append(start..<reader.offset)
            }
            return (journal, records, reader.offset, version)
        } catch {
            return nil
        }
    }
}
