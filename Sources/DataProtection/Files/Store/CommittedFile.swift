import Foundation
import SodiumBridge
import SystemPackage

/// An open protected file as its commits left it on disk (descriptor, header slots,
/// journal), and the flush protocol that takes it from one commit to the next, in the
/// order that keeps every power cut recoverable (`Keys/file-format.md` §8.2, §9):
///
/// 1. ``allocate(_:ahead:keys:)``: when the file grows, a header allocating the new
///    records (length unchanged), durable before any of them is written;
/// 2. ``writeRecords(_:byteCount:from:)``: records past the committed end, in place,
///    invisible until a header commits them;
/// 3. ``commit(overwrites:length:allocated:appendedInPlace:durable:keys:)``: records that
///    replace committed ones go to a redo journal (durable) and then in place; a header with
///    the new length; for a shrink, its truncation between two headers. A growth (or an
///    overwrite) with a journal may stop there, committed by its journal alone: the next
///    journals follow it in a *chain*, and the header and the records in place are made
///    durable together when the chain is full (``checkpoint(keys:)``), one `fsync` per
///    commit in between;
/// 4. ``recover(keys:)``, when the file is next opened: a complete chain is replayed,
///    a torn journal discarded, and the physical size checked against the committed length.
///
/// What to seal is ``OpenFile``'s business (its chunk cache and keys); this type knows
/// records by index and bytes only. It is not thread-safe: its ``OpenFile`` reaches it
/// under its lock.
///
/// The kept journal file, the chains written into it and the records read back from it are in
/// CommittedFile+Journal.swift; the state they share is internal only so that file reaches it.
///
/// A file removed from the store while open (``markUnlinked()``) is no longer anywhere
/// on disk and will be gone after any crash: its commits write records and headers in
/// place through the descriptor, with no journal, no `fsync`, nothing at any path
/// (`semantics.md`, "Handles, visibility, durability").
struct CommittedFile {
    /// The descriptor, and the path it was opened at (following renames made through the store).
    private(set) var file: DataFileDescriptor
    /// The committed state: the newest header, or (while a chain is pending) the length and
    /// allocation the chain committed on top of it.
    private(set) var header: FileHeader
    /// The header as written in ``slot``, which ``slotMAC`` authenticates: ``header`` but for
    /// the length and allocation while a chain is pending.
    private(set) var writtenHeader: FileHeader
    /// Which of the two header slots holds ``header``.
    private(set) var slot: Int
    /// ``header``'s MAC, as written (for unwrapping the file key again after a key discard).
    private(set) var slotMAC: Data
    /// A deferred append allocated records ahead of the length: the next commit brings the
    /// file back to rest (exact size, `allocated` = records needed).
    private(set) var allocatedAhead = false
    /// Records or headers written without `fsync` since the last durable point.
    private var unsyncedWrites = false
    /// Removed from the store while open: nothing is written at any path any more.
    private(set) var unlinked = false
    /// The journal file, kept open from the first overwrite until the file closes, moves or is
    /// unlinked: each overwrite commit rewrites it in place (no file created, no directory
    /// `fsync`, no unlink per commit). Between commits it holds the last commit's journal,
    /// which a reader recognises as committed or stale (Keys/file-format.md §9.2).
    var journal: KeptJournal?
    /// A journal of this file's that no commit needs may lie at its path: the last commit's,
    /// kept open, or moved along with the file by the store. Removed when the file closes.
    var journalLeft = false
    /// The chain in the kept journal file, from offset 0: how many journals, where the last ends.
    var chain: (count: UInt32, end: Int)?
    /// Commits stand on the chain alone: ``writtenHeader`` and records in place since it are
    /// not yet durable, and only a replay of the chain redoes them after a power cut. Ended by
    /// the next header (``checkpoint(keys:)``, or any header write, which comes after the
    /// chain's records are durable or commits exactly the chain's state).
    private(set) var chainPending = false
    /// A header was written and no `fsync` has followed: a new chain must not be written over
    /// the old one until it has (the old one may be all that redoes the records under it).
    var headerUnsynced = false
    /// A header write failed: it may have reached the disk whole (a short write can hold a whole
    /// header and its MAC) or not at all. No journal is written on top of that doubt: the header
    /// is written again (the same slot, the same generation) and made durable first.
    var headerUncertain = false

    /// The records the pending chain committed that are not yet written in place, where they
    /// lie in its journal file: written in place before the header that ends the chain; reads
    /// see them (``readRecords(at:count:)``).
    var pending = PendingRecords()
    /// The journal file the pending records lie in once it is no longer ``journal`` (the file
    /// moved, or was unlinked, with records pending): kept open for reading them until they are
    /// written in place.
    var detachedJournal: KeptJournal?

    /// How long a chain grows before its checkpoint: each commit costs one `fsync` (its journal),
    /// the checkpoint one more; a replay after a crash reads at most this many journals and bytes.
    var chainLimit: JournalChainLimit { file.fileSystem.journalChainLimit }

    init(file: DataFileDescriptor, header: FileHeader, slot: Int, slotMAC: Data) {
        self.file = file
        self.header = header
        self.writtenHeader = header
        self.slot = slot
        self.slotMAC = slotMAC
    }

    /// Written without `fsync` since the last durable point (never for an unlinked file:
    /// it has no durable point to reach).
    var unsynced: Bool { unsyncedWrites && !unlinked }

    // MARK: - Reading the header region

    /// The parseable header slots of `file`, newest first.
    static func readSlots(_ file: DataFileDescriptor) throws(DataProtectionError) -> [(Int, FileHeader.UnverifiedSlot)] {
        let region = try file.read(at: 0, count: FileHeader.regionByteCount)
        guard region.count == FileHeader.regionByteCount else {
            throw .integrity("The file is shorter than its header: it was truncated.")
        }
        var slots: [(Int, FileHeader.UnverifiedSlot)] = []
        for index in 0..<FileHeader.slotCount {
            let start = index * FileHeader.slotByteCount
            if let parsed = FileHeader.parse(slot: region.subdata(in: start..<start + FileHeader.slotByteCount)) {
                slots.append((index, parsed))
            }
        }
        return slots.sorted { $0.1.header.generation > $1.1.header.generation }
    }

    /// Where the journal of the file at `path` lives (`Keys/file-format.md` §9).
    static func journalPath(for path: FilePath) -> FilePath {
        FilePath(path.string + FileJournal.suffix)
    }

    // MARK: - Place and lifetime

    /// Follows a rename made through the store (which moved a journal left at the old path
    /// along, or removed it).
    mutating func moved(to path: FilePath) {
        closeJournal()
        file = file.moved(to: path)
    }

    /// The file was removed from the store (or replaced by another) while open. The store
    /// removed the journal at its path; the path may name another file by now.
    mutating func markUnlinked() {
        closeJournal()
        journalLeft = false
        try? writePendingRecords()  // in place, as every write of an unlinked file (no durable state to reach)
        chainPending = false
        unlinked = true
    }

    /// Takes `replacement` (a new on-disk file with `header`, its only slot 0, sealed
    /// with `keys`) in place of the current file, which is closed.
    mutating func replace(with replacement: DataFileDescriptor, header: FileHeader, keys: FileKeys) {
        // The old file's journal, if one is left, belongs to another file id: no reader applies it.
        closeJournal()
        file.close()
        file = replacement
        self.header = header
        writtenHeader = header
        chainPending = false
        headerUnsynced = false
        headerUncertain = false
        forgetPending()  // the old file's
        slot = 0
        slotMAC = Self.mac(of: header.encodedSlot(macKey: keys.macKey))
        allocatedAhead = false
        unsyncedWrites = false
    }

    /// Closes the descriptors. With `removingJournal`, a journal left at the file's path by its
    /// last commit goes too (never one a commit still needs, nor at the path of an unlinked file:
    /// a pending chain, or one whose checkpoint is not yet durable, is left for the next open).
    mutating func close(removingJournal: Bool = false) {
        let path = Self.journalPath(for: file.path)
        let remove = removingJournal && !unlinked && journalLeft && journal?.needed != true && !chainPending && !headerUnsynced
        closeJournal()
        forgetPending()  // a pending chain left for the next open redoes them
        if remove { try? file.fileSystem.removeFile(at: path) }
        file.close()
    }

    // MARK: - Recovery

    /// Replays a complete chain of journals, discards a torn journal, and checks that the
    /// physical size fits the committed length.
    mutating func recover(keys: FileKeys) throws(DataProtectionError) {
        closeJournal()  // the journal is read from its path, and removed once settled
        journalLeft = false  // settled here, or needed by the next open
        chainPending = false
        forgetPending()  // the chain on disk redoes them
        header = writtenHeader  // what the chain (if any) applies over
        let journalPath = Self.journalPath(for: file.path)
        if !unlinked,
           let data = try file.fileSystem.readFile(at: journalPath, limit: FileJournal.maximumByteCount(recordStride: header.recordStride)) {
            let chain = Self.decodedChain(in: data, over: header, keys: keys)
            if let last = chain.last {
                let standing = Self.standing(of: chain, over: header)
                if standing != .stale {
                    // Only the file's key makes a journal that authenticates: one no writer writes is tampering (§9.1).
                    guard chain.allSatisfy({ $0.entries.count <= FileJournal.maximumEntries }) else {
                        throw .integrity("The file's journal holds more than \(FileJournal.maximumEntries) entries, which no writer writes: it was tampered with.")
                    }
                    guard chain.allSatisfy({ $0.fits(header) }) else {
                        throw .integrity("The file's journal describes records outside the file: it was tampered with.")
                    }
                    for journal in chain {
                        for entry in journal.entries {
                            try file.write(entry.record, at: header.recordOffset(entry.index))
                        }
                    }
                    try cutStaleRecords(length: last.length, allocated: last.allocatedRecords)
                    if standing == .uncommitted { try writeHeader(length: last.length, allocated: last.allocatedRecords, keys: keys) }
                    try sync()
                }
            }
            try file.fileSystem.removeFile(at: journalPath)
        }
        let physical = try file.size()
        guard physical >= header.physicalSize(forLength: header.length) else {
            throw .integrity("The file is shorter than its authenticated length: it was truncated.")
        }
        // At rest (no growth or shrink in flight) the size is exact: any appended byte is detected.
        // While one is in flight (more records allocated than the length needs), records written
        // ahead of their commit are tolerated up to the allocation.
        let atRest = header.allocatedRecords == header.records(forLength: header.length)
        let allowed = atRest ? header.physicalSize(forLength: header.length)
            : Int64(FileHeader.regionByteCount) + Int64(header.allocatedRecords) * Int64(header.recordStride)
        guard physical <= allowed else {
            throw .integrity("The file is longer than its authenticated length: data was appended to it.")
        }
    }

    // MARK: - The flush protocol

    /// Step 1: a header allocating `allocated` records (the length unchanged), durable before
    /// the records it allows: after a power cut, records on disk beyond what any header
    /// allocates would make the file unreadable. With `ahead`, the allocation runs ahead of
    /// a deferred append, and the next commit brings the file back to rest.
    mutating func allocate(_ allocated: UInt64, ahead: Bool, keys: FileKeys) throws(DataProtectionError) {
        // This header is not the chain's state, so a reader finds the chain stale under it:
        // what the chain redoes must be durable first.
        if chainPending {
            try writePendingRecords()
            try sync()
        }
        if ahead { allocatedAhead = true }
        try writeHeader(length: header.length, allocated: allocated, keys: keys)
        // Made for non-durable flushes too: after a power cut the file must stay readable.
        try synchronize()
    }

    /// Step 2: `byteCount` bytes of `records` (consecutive records from `index`), in place past
    /// the committed end. Without a commit after them, they are uncommitted bytes a reader ignores.
    func writeRecords(_ records: Data, byteCount: Int, from index: UInt64) throws(DataProtectionError) {
        let offset = header.recordOffset(index)
        try file.write(records, range: 0..<byteCount, at: offset)
        // The `fsync` that commits them then waits for little more than the last runs.
        if !unlinked { WriteBehind.start(descriptor: file.descriptor.rawValue, offset: offset, count: Int64(byteCount)) }
    }

    /// Records written past the committed end and left uncommitted (a deferred append):
    /// the next durable flush makes them durable.
    mutating func deferredRecordsWritten() {
        unsyncedWrites = true
    }

    /// Step 3: commits `length` with `overwrites` (records replacing committed ones, and for a
    /// journaled growth the new records too) and `allocated` records (for a shrink, one more
    /// than `length` needs until its truncation). `appendedInPlace`: records past the committed
    /// end were written before the commit (step 2), to be made durable before the journal.
    /// A growth commits the file at rest: what an append allocated ahead, or a crash left
    /// past the end, is cut first. With `durable`, everything is `fsync`ed before it returns.
    ///
    /// A commit with a journal that does not shrink the file is *chained*: its journal, once
    /// durable, commits it, and the records it then writes in place and the header that records
    /// its length wait for the checkpoint, every ``chainLimit`` commits (which is then this
    /// commit's last steps) or when the file closes, moves or loses its key. A crash in between
    /// is recovered by replaying the whole chain (Keys/file-format.md §8.2, "Chained commits").
    ///
    /// Once the journal is durable the commit can only go forward: if a later step fails, it
    /// is finished from the journal at once (as the next open would), so that no torn record
    /// is ever read in this process.
    mutating func commit(
        overwrites: [FileJournal.Entry], length newLength: UInt64, allocated: UInt64, appendedInPlace: Bool = true,
        durable: Bool, keys: FileKeys
    ) throws(DataProtectionError) {
        assert(overwrites.count <= FileJournal.maximumEntries, "a journal no reader would accept")
        let oldLength = header.length
        let oldCount = header.records(forLength: oldLength)
        let newCount = header.records(forLength: newLength)
        let committedAllocation = newLength >= oldLength ? newCount : allocated
        let journalPath = journal?.path ?? Self.journalPath(for: file.path)
        var journalDurable = false
        // Records a pending chain committed past a shrink's end are needed by no reader: they are
        // never written in place (SQLite starting its WAL over drops the whole WAL's records).
        if newLength < oldLength { pending.drop(from: newCount) }
        do throws(DataProtectionError) {
            if !overwrites.isEmpty {
                if unlinked {
                    // Gone after any crash: nothing to recover, so no journal (and none at a path
                    // that may name another file by now).
                    try writePendingRecords()  // older than these
                    for entry in overwrites { try file.write(entry.record, at: header.recordOffset(entry.index)) }
                } else {
                    // The journal, once durable, commits the new length when replayed: the records
                    // past the old end must be durable before it, or a power cut could keep the
                    // journal and lose them.
                    if newCount > oldCount && appendedInPlace { try sync() }
                    var journal = FileJournal(fileID: header.fileID, baseGeneration: header.generation, length: newLength,
                                              allocatedRecords: committedAllocation, entries: overwrites)
                    let recordOffsets = try writeJournal(&journal, at: journalPath, keys: keys)
                    journalDurable = true
                    if newLength >= oldLength && journal.sequence < chainLimit.commits {
                        // Committed by the chain: the header and these records wait for the checkpoint,
                        // the records read from the journal meanwhile. What lies past them is cut now,
                        // as at any commit at rest: a later header (an allocation) must find no record
                        // past what it allows.
                        for (entry, offset) in zip(overwrites, recordOffsets) {
                            pending.keep(PendingRecords.Location(offset: Int64(offset), count: entry.record.count), at: entry.index)
                        }
                        try cutStaleRecords(length: newLength, allocated: committedAllocation)
                        header.length = newLength
                        header.allocatedRecords = committedAllocation
                        allocatedAhead = false
                        chainPending = true
                        unsyncedWrites = false
                        journalLeft = true
                        return
                    }
                    try writePendingRecords()  // an earlier commit's, before this one's (newer)
                    for entry in overwrites { try file.write(entry.record, at: header.recordOffset(entry.index)) }
                }
            }
            try writePendingRecords()
            if newLength >= oldLength { try cutStaleRecords(length: newLength, allocated: committedAllocation) }
            // The records before the header that commits them, unless a durable journal can redo
            // them: a reader applies the journal over the header it commits too (file-format.md
            // §9.2), so one `fsync` after the header serves both. Not for a shrink, whose header
            // must precede its `ftruncate` with the records behind it (and a pending chain's).
            if !journalDurable || newLength < oldLength { try synchronize() }
            try writeHeader(length: newLength, allocated: committedAllocation, keys: keys)
            if newLength < oldLength {
                // The shrink's header before its `ftruncate`, the `ftruncate` before the header
                // that ends the shrink: in any other order a power cut could leave a size no
                // header accepts.
                try synchronize()
                try file.resize(to: header.physicalSize(forLength: newLength))
                try synchronize()
                try writeHeader(length: newLength, allocated: newCount, keys: keys)
            }
            allocatedAhead = false
            // The new state before the journal goes.
            if durable || journalDurable { try synchronize() }
            unsyncedWrites = !durable
            // The journal stays, for the next commit to write over: it is this commit's now,
            // which a reader redoes harmlessly or ignores (§9.2). It goes when the file closes.
            journal?.needed = false
            if journalDurable { journalLeft = true }
        } catch {
            if journalDurable { try? recover(keys: keys) }
            throw error
        }
    }

    /// Ends a pending chain: cuts what lies past the committed records, writes the header of the
    /// chain's state and makes it durable with every record the chain wrote in place. A reader
    /// then finds the chain committed (§9.2), and the next journal starts a new chain.
    mutating func checkpoint(keys: FileKeys) throws(DataProtectionError) {
        guard chainPending else { return }
        do throws(DataProtectionError) {
            try cutStaleRecords(length: header.length, allocated: header.allocatedRecords)
            try writeHeader(length: header.length, allocated: header.allocatedRecords, keys: keys)
            try sync()
            journal?.needed = false
        } catch {
            try? recover(keys: keys)  // as the next open would: the chain redone, the header written
            throw error
        }
    }

    /// Commits a length of zero with one header, durable on return, leaving the allocation
    /// (and the records on disk) as they are: the file is not at rest, which a reader accepts
    /// (Keys/file-format.md §8.2, "Emptying in place"), and the next growth commit brings it
    /// back to rest. The header alone commits: no record is needed by a length of zero, and
    /// whatever was written past the committed length since the last commit is dropped with it.
    mutating func empty(keys: FileKeys) throws(DataProtectionError) {
        forgetPending()  // no record is needed by a length of zero
        try writeHeader(length: 0, allocated: header.allocatedRecords, keys: keys)
        try synchronize()
        unsyncedWrites = false
        allocatedAhead = false
    }

    /// Makes everything written so far durable (a durable flush with nothing left to seal).
    mutating func makeDurable() throws(DataProtectionError) {
        guard unsynced else { return }
        try synchronize()
        unsyncedWrites = false
    }

    /// Rewraps the file key for `newClass` (content untouched), atomically: the new header
    /// goes to the other slot, then replaces the old one too, so that the old class's wrap
    /// does not survive.
    mutating func rewrap(to newClass: ProtectionClass, keys: FileKeys, device: Device) throws(DataProtectionError) {
        var next = header
        next.protectionClass = newClass
        try keys.wrap(into: &next, device: device)
        next.generation = try Self.generation(after: next.generation)
        try writeSlot(next, keys: keys)
        try sync()
        next.generation = try Self.generation(after: next.generation)
        try writeSlot(next, keys: keys)
        try sync()
    }

    /// Refuses, before anything is written, a change that would need more headers than
    /// the generation counter has left (at most 5: a flush's 3, a class change's 2).
    func requireGenerationsLeft() throws(DataProtectionError) {
        guard header.generation <= UInt64.max - 5 else {
            throw .integrity("The file's header generation is exhausted: it was tampered with.")
        }
    }

    // MARK: - Steps

    /// `fsync`, unless the file is unlinked (it has no durable state to reach).
    private mutating func synchronize() throws(DataProtectionError) {
        guard !unlinked else { return }
        try sync()
    }

    /// `fsync`: everything written so far is durable, the last header included.
    mutating func sync() throws(DataProtectionError) {
        try file.synchronize()
        headerUnsynced = false
    }

    /// Before a header that brings the file to rest (`allocated` records, all needed by
    /// `length`): cuts what an interrupted growth may have left past the exact size, which
    /// at rest would make the new header fail its size check (and the reader fall back to
    /// an older slot that no longer matches the records).
    private func cutStaleRecords(length: UInt64, allocated: UInt64) throws(DataProtectionError) {
        guard allocated == header.records(forLength: length) else { return }
        let exact = header.physicalSize(forLength: length)
        if try file.size() > exact { try file.resize(to: exact) }
    }

    /// Writes the next header into the other slot.
    mutating func writeHeader(length: UInt64, allocated: UInt64, keys: FileKeys) throws(DataProtectionError) {
        var next = header
        next.generation = try Self.generation(after: next.generation)
        next.length = length
        next.allocatedRecords = allocated
        try writeSlot(next, keys: keys)
    }

    private mutating func writeSlot(_ next: FileHeader, keys: FileKeys) throws(DataProtectionError) {
        // A header ends the chain: the records it committed go in place first, so that the `fsync`
        // that makes this header durable makes them durable too.
        try writePendingRecords()
        let target = 1 - slot
        let encoded = next.encodedSlot(macKey: keys.macKey)
        do throws(DataProtectionError) {
            try file.write(encoded, at: Int64(target * FileHeader.slotByteCount))
        } catch {
            headerUncertain = true
            throw error
        }
        headerUncertain = false
        header = next
        writtenHeader = next
        chainPending = false  // the chain's state, after the chain's records were durable, or needing none (length 0)
        headerUnsynced = true
        slot = target
        slotMAC = Self.mac(of: encoded)
    }

    /// The MAC of an encoded header slot.
    static func mac(of encodedSlot: Data) -> Data {
        encodedSlot.subdata(in: FileHeader.authenticatedByteCount..<FileHeader.authenticatedByteCount + 32)
    }

    /// The generation after `generation`. A writer adds one per header, so 2^64 cannot be
    /// reached; only a forged header (or a harness that re-MACs one) gets there.
    static func generation(after generation: UInt64) throws(DataProtectionError) -> UInt64 {
        guard generation < UInt64.max else {
            throw .integrity("The file's header generation is exhausted: it was tampered with.")
        }
        return generation + 1
    }
}
