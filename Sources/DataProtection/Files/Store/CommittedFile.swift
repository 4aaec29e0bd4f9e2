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
/// 3. ``commit(overwrites:length:allocated:durable:keys:)``: records that replace
///    committed ones go to a redo journal (durable) and then in place; a header with the
///    new length; for a shrink, its truncation between two headers;
/// 4. ``recover(keys:)``, when the file is next opened: a complete journal is replayed,
///    a torn one discarded, and the physical size checked against the committed length.
///
/// What to seal is ``OpenFile``'s business (its chunk cache and keys); this type knows
/// records by index and bytes only. It is not thread-safe: its ``OpenFile`` reaches it
/// under its lock.
///
/// A file removed from the store while open (``markUnlinked()``) is no longer anywhere
/// on disk and will be gone after any crash: its commits write records and headers in
/// place through the descriptor, with no journal, no `fsync`, nothing at any path
/// (`semantics.md`, "Handles, visibility, durability").
struct CommittedFile {
    /// The descriptor, and the path it was opened at (following renames made through the store).
    private(set) var file: DataFileDescriptor
    /// The newest committed header, in ``slot``.
    private(set) var header: FileHeader
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
    private var journal: KeptJournal?
    /// A journal of this file's that no commit needs may lie at its path: the last commit's,
    /// kept open, or moved along with the file by the store. Removed when the file closes.
    private var journalLeft = false

    /// The descriptor of a kept journal file and what it holds.
    private struct KeptJournal {
        let descriptor: FileDescriptor
        /// A commit needs it: from the instant it is durable until that commit (or its
        /// recovery) has finished. A needed journal is never removed.
        var needed: Bool
    }

    init(file: DataFileDescriptor, header: FileHeader, slot: Int, slotMAC: Data) {
        self.file = file
        self.header = header
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
        slot = 0
        slotMAC = Self.mac(of: header.encodedSlot(macKey: keys.macKey))
        allocatedAhead = false
        unsyncedWrites = false
    }

    /// Closes the descriptors. With `removingJournal`, a journal left at the file's path by its
    /// last commit goes too (never one a commit still needs, nor at the path of an unlinked file).
    mutating func close(removingJournal: Bool = false) {
        let path = Self.journalPath(for: file.path)
        let remove = removingJournal && !unlinked && journalLeft && journal?.needed != true
        closeJournal()
        if remove { try? file.fileSystem.removeFile(at: path) }
        file.close()
    }

    /// Closes the kept journal's descriptor (the file stays where it is).
    private mutating func closeJournal() {
        guard let kept = journal else { return }
        journal = nil
        try? file.fileSystem.close(kept.descriptor, path: Self.journalPath(for: file.path))
    }

    // MARK: - Recovery

    /// Replays a complete journal, discards a torn one, and checks that the physical size
    /// fits the committed length.
    mutating func recover(keys: FileKeys) throws(DataProtectionError) {
        closeJournal()  // the journal is read from its path, and removed once settled
        journalLeft = false  // settled here, or needed by the next open
        let journalPath = Self.journalPath(for: file.path)
        if !unlinked,
           let data = try file.fileSystem.readFile(at: journalPath, limit: FileJournal.maximumByteCount(recordStride: header.recordStride)) {
            if let journal = FileJournal.decode(data, macKey: keys.macKey, fileID: header.fileID) {
                // Over the header it was written against: redo the flush and commit it. Over the
                // header that flush committed (its next generation, with the journal's length and
                // allocation): the header may have reached the disk before the records it commits,
                // so redo the records. Anything else is stale: its flush committed and later ones followed.
                let uncommitted = journal.baseGeneration == header.generation
                let committed = journal.baseGeneration < UInt64.max && journal.baseGeneration + 1 == header.generation
                    && journal.length == header.length && journal.allocatedRecords == header.allocatedRecords
                if uncommitted || committed {
                    guard journal.fits(header) else {
                        throw .integrity("The file's journal describes records outside the file: it was tampered with.")
                    }
                    for entry in journal.entries {
                        try file.write(entry.record, at: header.recordOffset(entry.index))
                    }
                    try cutStaleRecords(length: journal.length, allocated: journal.allocatedRecords)
                    if uncommitted { try writeHeader(length: journal.length, allocated: journal.allocatedRecords, keys: keys) }
                    try file.synchronize()
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
        let journalPath = Self.journalPath(for: file.path)
        var journalDurable = false
        do throws(DataProtectionError) {
            if !overwrites.isEmpty {
                if unlinked {
                    // Gone after any crash: nothing to recover, so no journal (and none at a path
                    // that may name another file by now).
                    for entry in overwrites { try file.write(entry.record, at: header.recordOffset(entry.index)) }
                } else {
                    // The journal, once durable, commits the new length when replayed: the records
                    // past the old end must be durable before it, or a power cut could keep the
                    // journal and lose them.
                    if newCount > oldCount && appendedInPlace { try file.synchronize() }
                    let journal = FileJournal(fileID: header.fileID, baseGeneration: header.generation, length: newLength,
                                              allocatedRecords: committedAllocation, entries: overwrites)
                    try writeJournal(journal, at: journalPath, keys: keys)
                    journalDurable = true
                    for entry in overwrites { try file.write(entry.record, at: header.recordOffset(entry.index)) }
                }
            }
            if newLength >= oldLength { try cutStaleRecords(length: newLength, allocated: committedAllocation) }
            // The records before the header that commits them, unless a durable journal can redo
            // them: a reader applies the journal over the header it commits too (file-format.md
            // §9.2), so one `fsync` after the header serves both. Not for a shrink, whose header
            // must precede its `ftruncate` with the records behind it.
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
            journalLeft = true
        } catch {
            if journalDurable { try? recover(keys: keys) }
            throw error
        }
    }

    /// Commits a length of zero with one header, durable on return, leaving the allocation
    /// (and the records on disk) as they are: the file is not at rest, which a reader accepts
    /// (Keys/file-format.md §8.2, "Emptying in place"), and the next growth commit brings it
    /// back to rest. The header alone commits: no record is needed by a length of zero, and
    /// whatever was written past the committed length since the last commit is dropped with it.
    mutating func empty(keys: FileKeys) throws(DataProtectionError) {
        try writeHeader(length: 0, allocated: header.allocatedRecords, keys: keys)
        try synchronize()
        unsyncedWrites = false
        allocatedAhead = false
    }

    /// Writes `contents` at `path`, durably, before the overwrites it protects: torn records
    /// are repaired from it. The first journal of an open file is created (and its directory
    /// `fsync`ed); later ones are written over it in place from offset 0 and `fsync`ed, the file
    /// not cut when the new one is shorter (a reader ignores what follows a journal's MAC, §9.1;
    /// cutting would make the `fsync` commit a size change). Until that `fsync` returns no
    /// record of this commit is written, so a crash in between leaves the previous commit
    /// whole, and beside it a journal that is torn (its MAC covers it all) or the previous one (§9.2).
    private mutating func writeJournal(_ contents: FileJournal, at path: FilePath, keys: FileKeys) throws(DataProtectionError) {
        let fileSystem = file.fileSystem
        let encoded = contents.encoded(macKey: keys.macKey)
        if let kept = journal {
            do throws(DataProtectionError) {
                journal?.needed = true  // torn from here on: removed on failure, never left for a later close to keep
                try fileSystem.write([.data(encoded)], to: kept.descriptor, at: 0, path: path)
                try fileSystem.synchronize(kept.descriptor, path: path)
                return
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
        journal = KeptJournal(descriptor: descriptor, needed: true)
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
        try file.synchronize()
        next.generation = try Self.generation(after: next.generation)
        try writeSlot(next, keys: keys)
        try file.synchronize()
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
    private func synchronize() throws(DataProtectionError) {
        guard !unlinked else { return }
        try file.synchronize()
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
    private mutating func writeHeader(length: UInt64, allocated: UInt64, keys: FileKeys) throws(DataProtectionError) {
        var next = header
        next.generation = try Self.generation(after: next.generation)
        next.length = length
        next.allocatedRecords = allocated
        try writeSlot(next, keys: keys)
    }

    private mutating func writeSlot(_ next: FileHeader, keys: FileKeys) throws(DataProtectionError) {
        let target = 1 - slot
        let encoded = next.encodedSlot(macKey: keys.macKey)
        try file.write(encoded, at: Int64(target * FileHeader.slotByteCount))
        header = next
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
