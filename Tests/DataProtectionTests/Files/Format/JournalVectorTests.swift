import Foundation
import SystemPackage
import Testing
@testable import DataProtection

/// `Keys/vectors/journals` (file-format.md §9, from `Keys/vectors/generate_files.py`): each a
/// protected file and the journal beside it, opened as ``FileFormatVectorTests`` opens a file
/// through the real code path, so that recovery runs. The plaintext read must be the vector's
/// (the chain redone, or the journal ignored: torn, stale, another file's), and the journal
/// must be gone afterwards.
@Suite("Journal vectors")
struct JournalVectorTests {
    @Test("Journal vector", arguments: FormatVectorFile.names(in: "journals"))
    func journal(_ name: String) throws {
        let vector = try FormatVectorFile(name)
        #expect(try vector.field("expect") == "success")
        try withFormatScratchDirectory { directory in
            let device = try FormatVectorDevice.boot(at: directory.appendingPathComponent("device"),
                                                     keys: FormatVectorDevice.symmetricClasses(try vector.hex("class-key")))
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
