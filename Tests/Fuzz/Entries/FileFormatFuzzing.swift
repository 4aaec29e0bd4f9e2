import DataProtection
import Foundation
import SodiumBridge
import SystemPackage

/// Protected files as `OpenFile` meets them on disk.
///
/// Input: `journal length (u16 LE) || journal body || file bytes`. Random bytes
/// never authenticate, so the harness does what only a key holder could, to let
/// the fuzzer reach the code behind the MACs: every header slot that parses gets
/// a valid wrap of a fixed file key for the class it states and a valid MAC; every
/// whole chunk record is sealed in place for its index; a journal body gets the
/// file's id, the newest slot's generation (one less for an odd-length body) and a valid MAC, and so does each
/// whole body after it (a chain, §9.1). Lengths, allocation,
/// generations, classes, chunk sizes, record counts and journal entries stay the
/// fuzzer's. The file is then read whole, through a handle at several offsets, and stat'ed.
enum FileFormatFuzzing {
    static func run(_ data: Data) {
        let fixture = FuzzFixture.shared
        var input = FuzzInput(data)
        var journal = input.piece()
        var file = input.rest()

        let keys = fixture.fileKeys
        var newest: FileHeader?
        for slot in 0..<2 where file.count >= (slot + 1) * FileHeader.slotByteCount {
            let range = slot * FileHeader.slotByteCount..<(slot + 1) * FileHeader.slotByteCount
            guard var header = FileHeader.parse(slot: file.subdata(in: range))?.header else { continue }
            try? keys.wrap(into: &header, device: fixture.store.device)
            let fields = range.lowerBound..<range.lowerBound + FileHeader.slotFieldsByteCount  // the place record stays
            file.replaceSubrange(fields, with: header.encodedSlot(macKey: keys.macKey))
            if newest.map({ header.generation > $0.generation }) ?? true { newest = header }
        }
        if let header = newest {
            seal(&file, header: header, keys: keys)
            if journal.count >= 29 {
                journal.replaceSubrange(5..<21, with: header.fileID)
                // An odd-length journal is one generation behind: written against the header
                // before this one, which its flush may have committed (file-format.md §9.2).
                var generation = header.generation - (journal.count % 2 == 1 && header.generation > 0 ? 1 : 0)
                journal.replaceSubrange(21..<29, with: withUnsafeBytes(of: &generation) { Data($0) })
            }
        }
        if !journal.isEmpty {
            journal = Data(journal)
            // Whole bodies one after another (up to 4): each gets its MAC after it, and those after
            // the first the first's file id and base generation, so that they can form a chain
            // (§9.1; the sequence numbers stay the fuzzer's). What follows the last whole body
            // follows its MAC, as in a kept journal file written over a longer chain (ignored).
            var rebuilt = Data()
            var rest = journal
            var bodies = 0
            while bodies < 4, let (_, end) = FileJournal.parse(rest) {
                var body = Data(rest.prefix(end))
                if bodies > 0 { body.replaceSubrange(5..<29, with: journal.subdata(in: 5..<29)) }
                rebuilt += body + BLAKE2b.mac(key: keys.macKey, [.data(body)])
                rest = rest.subdata(in: end..<rest.count)
                bodies += 1
            }
            journal = bodies == 0 ? journal + BLAKE2b.mac(key: keys.macKey, [.data(journal)]) : rebuilt + rest
        }
        let journalPath = fixture.filePath.string + FileJournal.suffix
        do {
            try file.write(to: URL(fileURLWithPath: fixture.filePath.string))
            if journal.isEmpty {
                try? FileManager.default.removeItem(atPath: journalPath)
            } else {
                try journal.write(to: URL(fileURLWithPath: journalPath))
            }
        } catch {
            fatalError("fuzz fixture: cannot write the file: \(error)")
        }
        exercise(fixture.store)
        try? FileManager.default.removeItem(atPath: journalPath)
    }

    /// Seals every whole record slot of `file` in place (at most 64), its plaintext being the bytes already there.
    private static func seal(_ file: inout Data, header: FileHeader, keys: FileKeys) {
        var index: UInt64 = 0
        while index < 64 {
            let start = Int(header.recordOffset(index))
            let available = file.count - start - ChunkRecords.overhead
            guard available > 0 else { break }
            let length = min(available, header.recordStride - ChunkRecords.overhead)
            let plaintext = file.subdata(in: start + XChaCha20Poly1305.nonceByteCount..<start + XChaCha20Poly1305.nonceByteCount + length)
            ChunkRecords.seal(plaintext, range: 0..<length, into: &file, at: start,
                              key: keys.chunkKey, associatedData: header.chunkAssociatedData(index))
            index += 1
        }
    }

    private static func exercise(_ store: ProtectedStore) {
        _ = try? store.contents(atPath: "f")
        _ = try? store.attributesOfItem(atPath: "f")
        guard let handle = try? store.openFile(atPath: "f", mode: .read) else { return }
        defer { try? handle.close() }
        let size = (try? handle.size()) ?? 0
        for offset in [0, size / 2, size > 0 ? size - 1 : 0, size, size + 1] {
            _ = try? handle.read(atOffset: offset, upToCount: 4096)
        }
        _ = try? handle.readToEnd()
        // The write paths on the same header: overwrite, extend, shrink, flush.
        guard let writer = try? store.openFile(atPath: "f", mode: .update) else { return }
        defer { try? writer.close() }
        _ = try? writer.write(contentsOf: Data("xy".utf8), atOffset: size / 3)
        _ = try? writer.write(contentsOf: Data("end".utf8), atOffset: size)
        _ = try? writer.synchronize()
        _ = try? writer.truncate(atOffset: size / 2)
        _ = try? writer.synchronize()
    }
}
