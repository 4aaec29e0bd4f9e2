import Foundation
import SodiumBridge
import SystemPackage

// The kept journal file of an open protected file: the journals its commits write, one chain
// after another from offset 0 (Keys/file-format.md §8.2, "Chained commits", §9.1), and the
// records a pending chain committed, read back from it until the checkpoint writes them in
// place. Part of ``CommittedFile``'s flush protocol; reached under its ``OpenFile``'s lock.
extension CommittedFile {
    /// The descriptor of a kept journal file and what it holds.
    struct KeptJournal {
        let descriptor: FileDescriptor
        /// Where it is (the file's path and the suffix: kept, not rebuilt at each commit).
        let path: FilePath
        /// A commit needs it: from the instant it is durable until that commit (or its
        /// recovery) has finished. A needed journal is never removed.
        var needed: Bool
        /// How many bytes the file holds (journals, and zeros written ahead of the chain).
        var size: Int
    }

    /// A chain that passes this close to the end of its journal file has zeros written ahead of
    /// it, up to ``journalStep`` past its end (see ``extendAhead()``).
    static let journalStep = 1 << 20

    /// The zeros ``extendAhead()`` writes, a block at a time.
    private static let zeroBlock = Data(count: 64 << 10)

    // MARK: - Its lifetime

    /// Closes the kept journal's descriptor (the file stays where it is), unless pending records
    /// are still to be read from it: it is then kept aside until they are written in place.
    mutating func closeJournal() {
        chain = nil
        guard let kept = journal else { return }
        journal = nil
        if !pending.isEmpty && detachedJournal == nil {
            detachedJournal = kept
        } else {
            try? file.fileSystem.close(kept.descriptor, path: kept.path)
        }
    }

    /// Forgets the pending records (the chain on disk redoes them, or nothing needs them).
    mutating func forgetPending() {
        pending.removeAll()
        closeDetachedJournal()
    }

    /// Closes the journal kept aside for the pending records, once none is left.
    mutating func closeDetachedJournal() {
        guard pending.isEmpty, let detached = detachedJournal else { return }
        detachedJournal = nil
        try? file.fileSystem.close(detached.descriptor, path: detached.path)
    }

    // MARK: - Writing a journal

    /// Writes `contents` at `path`, durably, before the overwrites it protects: torn records
    /// are repaired from it. While a chain is pending the journal follows it in the kept file
    /// (numbered next); otherwise it starts a new chain (numbered 1). The first journal of an
    /// open file is created (and its directory `fsync`ed); later chains are written over it in
    /// place from offset 0, the file not cut when the new one is shorter (a reader ignores what
    /// follows a chain, §9.1; cutting would make the `fsync` commit a size change), and only once
    /// the newest header is durable (until then the old chain may be what redoes its records).
    /// Until the journal's `fsync` returns no record of this commit is written, so a crash in
    /// between leaves the previous commit whole, and beside it a torn journal after the chain,
    /// or a chain a reader finds committed or stale (§9.2).
    /// Returns where in the journal file each of its records starts.
    mutating func writeJournal(_ contents: inout FileJournal, at path: FilePath, keys: FileKeys) throws(DataProtectionError) -> [Int] {
        let fileSystem = file.fileSystem
        if headerUncertain {
            // A chain based on this generation could be stale under the header that failed.
            try writeHeader(length: header.length, allocated: header.allocatedRecords, keys: keys)
            try sync()
        }
        if chainPending, let kept = journal, let chain {
            contents.sequence = chain.count + 1  // on the base generation the caller gave it: no header since the chain began
            let (encoded, recordOffsets) = contents.encoded(macKey: keys.macKey)
            if chain.end + encoded.count <= chainLimit.bytes {
                // A failure leaves the chain as it was (whatever was written after it is torn,
                // and the next journal goes over it): the chain is still what commits the file.
                try fileSystem.write([.data(encoded)], to: kept.descriptor, at: Int64(chain.end), path: path)
                try fileSystem.synchronize(kept.descriptor, path: path)
                self.chain = (chain.count + 1, chain.end + encoded.count)
                journal?.size = max(kept.size, chain.end + encoded.count)
                extendAhead()
                return recordOffsets.map { chain.end + $0 }
            }
        }
        // The file moved (its journal's descriptor closed) or the chain has no room left.
        if chainPending { try checkpoint(keys: keys) }
        if headerUnsynced { try sync() }
        assert(pending.isEmpty, "a new chain over records still read from the old one")
        contents.baseGeneration = header.generation
        contents.sequence = 1
        let (encoded, recordOffsets) = contents.encoded(macKey: keys.macKey)
        if let kept = journal {
            do throws(DataProtectionError) {
                journal?.needed = true  // torn from here on: removed on failure, never left for a later close to keep
                try fileSystem.write([.data(encoded)], to: kept.descriptor, at: 0, path: path)
                try fileSystem.synchronize(kept.descriptor, path: path)
                chain = (1, encoded.count)
                journal?.size = max(kept.size, encoded.count)
                extendAhead()
                return recordOffsets
            } catch {
                closeJournal()
                journalLeft = false
                try? fileSystem.removeFile(at: path)
                throw error
            }
        }
        try fileSystem.removeFile(at: path)
        let descriptor = try fileSystem.createFile(at: path)
        do throws(DataProtectionError) {
            try fileSystem.write(.data(encoded), to: descriptor, path: path)
            try fileSystem.synchronize(descriptor, path: path)
            try fileSystem.synchronizeDirectory(at: path.removingLastComponent())
        } catch {
            // Closed once, whatever close(2) reports: it releases the descriptor even when it fails, and a
            // second close would close whatever another thread opened under the same number meanwhile.
            try? fileSystem.close(descriptor, path: path)
            try? fileSystem.removeFile(at: path)
            throw error
        }
        journal = KeptJournal(descriptor: descriptor, path: path, needed: true, size: encoded.count)
        chain = (1, encoded.count)
        extendAhead()
        return recordOffsets
    }

    /// Once the chain comes within half a ``journalStep`` of the end of its journal file (and
    /// the file is below the chain's byte limit), writes zeros from the end up to a step past
    /// the chain and starts their write-back, without waiting. The next journals then write
    /// over blocks the file already has: an `fdatasync` of a journal that grows its file also
    /// commits the file's new size (a second write, to the inode), and this way that happens
    /// once per step, not at every commit of a chain's first pass over the file. A reader
    /// ignores what follows a chain (Keys/file-format.md §9.1), and the chain is durable
    /// already: a failure here (a full disk) costs nothing but the saving.
    private mutating func extendAhead() {
        guard let kept = journal, let chain, kept.size < chainLimit.bytes,
              kept.size - chain.end < Self.journalStep / 2 else { return }
        let target = min(chainLimit.bytes, chain.end + Self.journalStep)
        guard target > kept.size else { return }
        // From one block of zeros kept for the process, written as often as needed (a MiB
        // allocated and zeroed at each step cost 256 page faults).
        let count = target - kept.size, block = Self.zeroBlock
        var parts = [FileBytes](repeating: .data(block), count: count / block.count)
        if count % block.count != 0 { parts.append(.data(block.prefix(count % block.count))) }
        guard (try? file.fileSystem.write(parts, to: kept.descriptor, at: Int64(kept.size), path: kept.path)) != nil else { return }
        WriteBehind.start(descriptor: kept.descriptor.rawValue, offset: Int64(kept.size), count: Int64(count))
        journal?.size = target
    }

    // MARK: - The records of a pending chain

    /// `count` bytes of records from `offset`, as the committed state has them: the file's bytes,
    /// with the records a pending chain has not yet written in place read from its journal
    /// instead (a record not yet on disk at all, past the physical end, included).
    func readRecords(at offset: Int64, count: Int) throws(DataProtectionError) -> Data {
        let file = self.file
        guard !pending.isEmpty else { return try file.read(at: offset, count: count) }  // no reader of the journal made
        return try pending.read(at: offset, count: count, header: header,
                                journal: Self.reader(of: detachedJournal ?? journal, fileSystem: file.fileSystem)) {
            (offset, count) throws(DataProtectionError) in try file.read(at: offset, count: count)
        }
    }

    /// Writes the records a pending chain committed in place (no `fsync`), read from its journal.
    mutating func writePendingRecords() throws(DataProtectionError) {
        guard !pending.isEmpty else { return }
        let file = self.file, header = self.header
        try pending.write(stride: header.recordStride, read: Self.reader(of: detachedJournal ?? journal, fileSystem: file.fileSystem)) {
            (index, records) throws(DataProtectionError) in
            try file.write(records, at: header.recordOffset(index))
        }
        closeDetachedJournal()
    }

    /// Reads the journal file `source`, which holds the pending records.
    private static func reader(of source: KeptJournal?, fileSystem: any FileSystem) -> PendingRecords.Reader {
        { (offset, count) throws(DataProtectionError) in
            guard let source else {
                throw .integrity("The records of the file's pending commits are out of reach: its journal was closed.")
            }
            return try fileSystem.read(from: source.descriptor, at: offset, count: count, path: source.path)
        }
    }
}
