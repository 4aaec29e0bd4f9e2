import Foundation
import SystemPackage
import Testing
@testable import DataProtection

/// Runs the journal vectors of `Keys/vectors/journals` (file-format.md §9), made by an
/// independent implementation of the format (`Keys/vectors/generate_files.py`): a protected
/// file with a journal beside it, opened through the real code path (a `Device` booted from a
/// keybag that holds the vector's class key, `OpenFile.open`, which recovers, and
/// `OpenFile.read`). The plaintext read must be the vector's: the chain redone, or the journal
/// ignored (torn, stale, another file's); either way the journal is gone afterwards.
@Suite("Journal vectors")
struct JournalVectorTests {
    @Test("Journal vector", arguments: FormatVectorFile.names(in: "journals"))
    func journal(_ name: String) throws {
        let vector = try FormatVectorFile(name)
        #expect(try vector.field("expect") == "success")
        try withFormatScratchDirectory { directory in
            let key = try vector.hex("class-key")
            var slotKeys: [KeybagSlot: Data] = [:]
            for slot in [KeybagSlot.complete, .completeUntilFirstUserAuthentication, .completeWhenUserInactive, .none] {
                slotKeys[slot] = key
            }
            let device = try FormatVectorDevice.boot(at: directory.appendingPathComponent("device"), keys: slotKeys)
            let path = directory.appendingPathComponent("file")
            let journalPath = directory.appendingPathComponent("file" + FileJournal.suffix)
            try vector.payload.write(to: path)
            try vector.hex("journal").write(to: journalPath)
            let file = try OpenFile.open(at: FilePath(path.path), device: device)
            let content = try file.read(at: 0, count: Int(file.currentSize))
            try file.close(flushing: false)
            #expect(content == (try vector.hex("plaintext")))
            #expect(!FileManager.default.fileExists(atPath: journalPath.path), "the journal is removed once settled")

            // Opened again (no journal now): the same plaintext, from the records and header on disk.
            let again = try OpenFile.open(at: FilePath(path.path), device: device)
            #expect(try again.read(at: 0, count: Int(again.currentSize)) == (try vector.hex("plaintext")))
            try again.close(flushing: false)
        }
    }
}
