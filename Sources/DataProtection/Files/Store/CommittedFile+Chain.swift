import Foundation
import SodiumBridge
import SystemPackage

// A chain of journals found beside a file on disk, as a reader judges it (Keys/file-format.md
// §9.2): which journals it holds, whether it is still to be applied over a header, and so what
// length the file has committed. ``CommittedFile/recover(keys:)`` replays it at the next open;
// ``CommittedFile/committedLength(of:header:keys:)`` reads the length from it without opening
// the file (`stat` of a file a crash left with its last commits in their journals).
extension CommittedFile {
    /// How a chain stands to the header it is read over.
    enum ChainStanding: Equatable {
        /// Written against this header: its flushes are committed by the chain alone, and the
        /// next open redoes them and writes the header that records them.
        case uncommitted
        /// Committed by this header (its next generation, with the chain's length and
        /// allocation), which may have reached the disk before the records: they are redone.
        case committed
        /// Empty (torn), or its flushes committed and later ones followed: ignored.
        case stale
    }

    /// How `chain` (journals of the file whose header is `header`) stands to that header.
    static func standing(of chain: [FileJournal], over header: FileHeader) -> ChainStanding {
        guard let first = chain.first, let last = chain.last else { return .stale }
        if first.baseGeneration == header.generation { return .uncommitted }
        let committed = first.baseGeneration < UInt64.max && first.baseGeneration + 1 == header.generation
            && last.length == header.length && last.allocatedRecords == header.allocatedRecords
        return committed ? .committed : .stale
    }

    /// The chain at the start of `data`, the journal file beside the file whose header is
    /// `header`, authenticated with the file's `keys`: a version-3 journal is whole only if its
    /// records open too (its MAC leaves their ciphertext out).
    static func decodedChain(in data: Data, over header: FileHeader, keys: FileKeys) -> [FileJournal] {
        let opened = SecureBytes(count: header.chunkSize)  // each record's plaintext, wiped when released
        return FileJournal.decodeChain(data, macKey: keys.macKey, fileID: header.fileID) { entry in
            entry.record.count <= header.chunkSize + ChunkRecords.overhead
                && (try? ChunkRecords.open(entry.record, range: 0..<entry.record.count, into: opened, at: 0, key: keys.chunkKey,
                                           associatedData: header.chunkAssociatedData(entry.index))) != nil
        }
    }

    /// The length the file at `file`'s path has committed, whose newest header is `header`: the
    /// header's, or, when a chain of journals beside it commits more (a crash came before the
    /// header that records the chain, §8.2 "Chained commits"), the chain's, as the next open will
    /// find it. With the file's `keys` the chain is authenticated; without them (its class key is
    /// away) it is read as the header is, unauthenticated until the file is next opened.
    static func committedLength(of file: DataFileDescriptor, header: FileHeader, keys: FileKeys?) throws(DataProtectionError) -> UInt64 {
        let path = journalPath(for: file.path)
        guard let data = try file.fileSystem.readFile(at: path, limit: FileJournal.maximumByteCount(recordStride: header.recordStride))
        else { return header.length }
        let chain = keys.map { decodedChain(in: data, over: header, keys: $0) } ?? FileJournal.unauthenticatedChain(data, fileID: header.fileID)
        guard let last = chain.last, standing(of: chain, over: header) != .stale, chain.allSatisfy({ $0.fits(header) }) else {
            return header.length
        }
        return last.length
    }
}
