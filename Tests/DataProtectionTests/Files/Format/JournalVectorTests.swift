import Foundation
import SystemPackage
import Testing
@testable import DataProtection

/// `Keys/vectors/journals` (file-format.md §9, from `Keys/vectors/generate_files.py`): each a
/// protected file and the journal beside it, opened as ``FileFormatVectorTests`` opens a file
/// through the real code path, so that recovery runs. The plaintext read must be the vector's
/// (the chain redone, or the journal ignored: torn, stale, another file's), and the journal
/// must be gone afterwards; or, for an authentic journal no writer makes (more than 256
/// entries), `integrityFailure` with nothing written.
@Suite("Journal vectors")
struct JournalVectorTests {
    @Test("Journal vector", arguments: FormatVectorFile.names(in: "journals"))
    func journal(_ name: String) throws {
        let vector = try FormatVectorFile(name)
        let expect = try vector.field("expect")
        try #require(["success", "integrityFailure"].contains(expect), "unknown expect \(expect)")
        try withFormatScratchDirectory { directory in
            let device = try FormatVectorDevice.boot(at: directory.appendingPathComponent("device"),
                                                     keys: FormatVectorDevice.symmetricClasses(try vector.hex("class-key")))
            let path = directory.appendingPathComponent("file")
            let journalPath = directory.appendingPathComponent("file" + FileJournal.suffix)
            try vector.payload.write(to: path)
            try vector.hex("journal").write(to: journalPath)
            if expect == "integrityFailure" {
                // Refused before anything is written: the file and its journal stay as they were.
                let error = #expect(throws: DataProtectionError.self) {
                    let file = try OpenFile.open(at: FilePath(path.path), device: device)
                    _ = try file.read(at: 0, count: Int(file.currentSize))
                }
                #expect(error?.code == .integrityFailure, "\(String(describing: error))")
                #expect(try Data(contentsOf: path) == vector.payload, "nothing written to the file")
                #expect(try Data(contentsOf: journalPath) == (try vector.hex("journal")), "the journal is left for inspection")
                return
            }
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

    @Test("Journal vectors pin the entry bound: 256 apply, 257 are refused")
    func entryBound() throws {
        let names = FormatVectorFile.names(in: "journals")
        #expect(names.contains("journals/entries_256") && names.contains("journals/entries_257"))
        let vector = try FormatVectorFile("journals/entries_257")
        #expect(try vector.field("expect") == "integrityFailure")
        #expect(FileJournal.maximumEntries == 256)
        // The refusal says why: the entry count, not records outside the file.
        try withFormatScratchDirectory { directory in
            let device = try FormatVectorDevice.boot(at: directory.appendingPathComponent("device"),
                                                     keys: FormatVectorDevice.symmetricClasses(try vector.hex("class-key")))
            let path = directory.appendingPathComponent("file")
            try vector.payload.write(to: path)
            try vector.hex("journal").write(to: directory.appendingPathComponent("file" + FileJournal.suffix))
            let error = #expect(throws: DataProtectionError.self) {
                let file = try OpenFile.open(at: FilePath(path.path), device: device)
                _ = try file.read(at: 0, count: Int(file.currentSize))
            }
            #expect(error?.code == .integrityFailure && error?.message.contains("more than 256 entries") == true,
                    "\(String(describing: error))")
        }
    }
}
